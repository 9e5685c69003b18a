package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"fusebox/api"
	"fusebox/breakerpool"
	"fusebox/cluster"
	"fusebox/dynconfig"
	"fusebox/healthprobe"
	"fusebox/hintpolicy"
	"fusebox/internal/authtoken"
	"fusebox/internal/tlsutil"
	"fusebox/ownership"
	"fusebox/raftstore"
	"fusebox/raftstore/state"
	"fusebox/ui"
)

// Node is one running fusebox node.
type Node struct {
	cfg  Config
	base *slog.Logger // for components that add the node id themselves
	log  *slog.Logger // base with the node id
	reg  *prometheus.Registry
	adv  advertised // what peers are told to dial (advertise.go)

	httpLn    net.Listener
	dirLock   *os.File // the data dir's lock (datadir_lock.go), held until Close ends
	config    *dynconfig.Collection
	pool      *breakerpool.Pool
	members   *cluster.Membership
	gossipUp  atomic.Bool // members started: every own address is final
	hints     *hintpolicy.Policy
	hintFwd   hintForwarder
	health    *healthprobe.Prober // active health checks of open keys (health.go)
	healthFwd healthForwarder
	queueFwd  queueForwarder // breaker closes → the queue releases blocked tasks (queue.go)
	uiRec     *ui.Recorder   // recent breaker transitions for the status page
	store     *raftstore.Store
	state     nodeState // store.Reader(): the local replica's reads
	shards    *ownership.Manager
	deliver   *deliveries
	api       *api.Server
	tokens    *authtoken.Store // the API tokens in force (nil set: no authorisation)

	// configMu and forcedMu serialize syncConfig and syncForced (watch.go):
	// the watchers and the ownership manager's CaughtUp both call them.
	configMu      sync.Mutex
	forcedMu      sync.Mutex
	forcedApplied map[breakerpool.Key]uint64 // forced rows applied: key → raft index (forcedMu)

	// pg is the postgres task store; nil with --task-store raft
	// (pgtasks.go).
	pg *pgTasks
	// pgHealth watches this node's own path to the database (pghealth.go).
	pgHealth *pgHealth

	tls       *tlsutil.Holder // nil without TLS (tls.go)
	peerHC    *http.Client    // node-to-node HTTPS client (tls.go)
	reloadMu  sync.Mutex      // Reload (reload.go)
	reloaders []reloader

	// loops are the node's own goroutines (config and forced-breaker
	// watchers); cancel stops them, wg waits for them.
	cancel context.CancelFunc
	wg     sync.WaitGroup

	closeOnce sync.Once
	closeErr  error
}

// New validates cfg; nothing is opened or bound until Start.
func New(cfg Config, logger *slog.Logger) (*Node, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	adv, err := cfg.resolveAdvertise(hostPrivateIPv4)
	if err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return &Node{cfg: cfg, adv: adv, base: logger, log: logger.With("node", cfg.NodeID), reg: reg}, nil
}

// Start brings the node up in dependency order: data dir, HTTP listener
// (so its port is known), dynamic config, breaker pool, Raft transport,
// gossip, Raft, the watchers, and finally the API. On error the caller must
// still call Close to release what did start.
func (n *Node) Start(ctx context.Context) error {
	cfg := n.cfg
	if err := claimDataDir(cfg.DataDir, cfg.NodeID); err != nil {
		return err
	}
	lock, err := lockDataDir(cfg.DataDir)
	if err != nil {
		return err
	}
	n.dirLock = lock
	clusterID, err := readClusterID(cfg.DataDir)
	if err != nil {
		return err
	}
	if err := n.loadTokens(); err != nil {
		return err
	}
	keys := cfg.GossipKeys
	if keys == nil && cfg.GossipKeyFile != "" {
		var err error
		if keys, err = cluster.LoadKeyFile(cfg.GossipKeyFile); err != nil {
			return fmt.Errorf("--gossip-key-file: %w", err)
		}
	}
	if err := n.startTLS(); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("--http-addr %s: %w", cfg.HTTPAddr, err)
	}
	ln = n.wrapListener(ln) // HTTPS when TLS is on
	n.httpLn = ln

	n.config = dynconfig.NewCollection(n.log.With("component", "dynconfig"))
	if n.uiRec, err = ui.NewRecorder(0); err != nil {
		return err
	}
	n.queueFwd.hints = &n.hintFwd // a refuted confirmation's closes do not ramp (queue.go)
	observe := func(t breakerpool.Transition) {
		n.hintFwd.observe(t) // before the queue: a probe of its own that refutes a round is recorded first
		n.uiRec.Observe(t)
		n.queueFwd.observe(t)
		n.healthFwd.observe(t)
	}
	if n.pool, err = breakerpool.New(withSeriesLimit(poolConfig(observe, &n.hintFwd), n.config), n.config, n.reg, n.log.With("component", "breakerpool")); err != nil {
		return err
	}
	n.pool.Start()

	// The Raft store binds its transport in New, so its address can go into
	// the gossip metadata; it reaches the membership through an adapter that
	// is filled in before Raft starts.
	adapter := &raftMembers{}
	bootstrap := cfg.BootstrapExpect
	if bootstrap == 0 && len(cfg.Join) == 0 {
		bootstrap = 1
	}
	n.store, err = raftstore.New(raftstore.Config{
		NodeID: cfg.NodeID, DataDir: cfg.DataDir, RaftBindAddr: cfg.RaftAddr, AdvertiseAddr: n.adv.raft, BootstrapExpect: bootstrap,
		Preset: cfg.Timing, Logger: n.base, Registerer: n.reg, TLS: n.raftTLS(), RejoinEmpty: cfg.RejoinEmpty,
		CommitTimeout: n.raftCommitTimeout(), PushCommits: n.cfg.UsesPostgres(),
	}, raftstore.Deps{
		Members:   adapter,
		Forwarder: n.forwarder(),
		Validator: configValidator{},
	})
	if err != nil {
		return addrError("--raft-addr", cfg.RaftAddr, dataDirError(err))
	}
	n.state = n.store.Reader()
	n.members, err = cluster.New(cluster.Config{
		NodeID: cfg.NodeID, BindAddr: cfg.GossipAddr, AdvertiseAddr: n.adv.gossip, Join: cfg.Join, Preset: cluster.Preset(cfg.Timing), Keys: keys,
		Meta: cluster.Meta{ID: cfg.NodeID, HTTPAddr: n.AdvertiseHTTPAddr(), RaftAddr: n.store.RaftAddr(), Version: cfg.Version, LogVersion: state.BuildLogVersion(), ClusterID: clusterID},
	}, n.base.With("component", "gossip"), n.reg)
	if err != nil {
		return addrError("--gossip-addr", cfg.GossipAddr, fmt.Errorf("gossip: %w", err))
	}
	adapter.m = n.members
	// Components outlive Start's context (it only bounds start-up): they are
	// stopped by Close.
	if err := n.members.Start(context.Background()); err != nil {
		return addrError("--gossip-addr", cfg.GossipAddr, fmt.Errorf("gossip: %w", err))
	}
	n.gossipUp.Store(true)
	if n.hints, err = startHints(n.pool, n.members, &n.hintFwd, n.hasHealthCheck, n.confirmByHealth, n.queueFwd.delegated, n.reg, n.log.With("component", "hints")); err != nil {
		return fmt.Errorf("hints: %w", err)
	}
	if cfg.UsesPostgres() {
		if n.pg, err = n.openPostgres(); err != nil {
			return fmt.Errorf("--postgres-url: %w", err)
		}
		n.store.OnLeader(func(ctx context.Context) {
			n.pg.store.RunCollector(ctx, time.Minute, TaskRetention(n.config))
		})
		if err := n.startPGHealth(); err != nil {
			return fmt.Errorf("task store watch: %w", err)
		}
	} else {
		n.store.OnLeader(func(ctx context.Context) {
			n.store.RunTaskCollector(ctx, time.Minute, TaskRetention(n.config))
		})
	}
	if n.shards, err = n.startShards(); err != nil {
		return fmt.Errorf("shards: %w", err)
	}
	// Start's ctx bounds only the start-up, which with --rejoin-empty
	// waits for a leader: a signal meanwhile must end it.
	if err := n.store.Start(ctx); err != nil {
		return fmt.Errorf("raft: %w", err)
	}
	policy := n.newDestinationPolicy()
	if n.deliver, err = n.startDeliveries(n.shards, policy); err != nil {
		return fmt.Errorf("queue: %w", err)
	}
	if err := n.startHealth(policy); err != nil {
		return fmt.Errorf("health checks: %w", err)
	}

	loopCtx, cancel := context.WithCancel(context.Background())
	n.cancel = cancel
	n.goLoop(func() { n.watchConfig(loopCtx) })
	n.goLoop(func() { n.watchForcedBreakers(loopCtx) })
	n.goLoop(func() { n.watchClusterID(loopCtx, clusterID) })

	peers := n.peerClient
	n.api = api.New(api.Config{Addr: ln.Addr().String(), Tokens: n.tokens, MetricsPublic: cfg.MetricsPublic,
		EnablePprof: cfg.EnablePprof, Limits: cfg.HTTPLimits, Registerer: n.reg}, api.Deps{
		Gatherer: n.reg,
		Logs:     cfg.Logs,
		Ready:    n.ready,
		Store:    n.store,
		State:    n.store.Reader(),
		Members:  apiMembers{n.members},
		Breakers: n.pool,
		Ramps:    apiRamps{n.deliver.queue},
		Fleet:    apiFleet{n.deliver.queue, n.members},
		Confirm:  confirmAPI{n.hints},
		Health:   healthAPI{n},
		Tasks:    n.newTaskAPI(policy),
		Shards:   n.shards,
		Ops:      opsAPI{n},
		Handover: apiHandover{q: n.deliver.queue, relay: n.pg != nil, unwritable: func() bool { return n.pg != nil && n.pg.failing() }},
		Delegate: n.deliver.delegate,
		Peers:    peers,
		UI: ui.New(ui.Deps{NodeID: cfg.NodeID, Recorder: n.uiRec, Members: apiMembers{n.members}, Peers: peers, History: n.uiHistory(loopCtx)},
			n.log.With("component", "ui")),
	}, n.log.With("component", "api"))
	n.api.Serve(ln)
	n.log.Info("node started", "http", n.HTTPAddr(), "gossip", n.GossipAddr(), "raft", n.RaftAddr(),
		"advertise_http", n.AdvertiseHTTPAddr())
	return nil
}

func (n *Node) goLoop(f func()) {
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		f()
	}()
}

// ready: the node has joined the gossip pool and knows a Raft leader that
// has applied the cluster's configuration.
func (n *Node) ready() (bool, map[string]any) {
	leader, _ := n.store.Leader()
	st := n.store.Stats()
	detail := map[string]any{
		"gossip_joined": n.members.Joined(),
		"raft_state":    st.State,
		"raft_leader":   leader,
		"applied_index": st.AppliedIndex,
	}
	hintsReadyDetail(n.hints, detail)
	ready := n.members.Joined() && leader != "" && st.AppliedIndex > 0
	ready = shardsReady(n.shards, detail) && ready
	if n.pg != nil {
		shards := 0
		if n.shards != nil {
			if sm := n.shards.Holder().Load(); sm != nil {
				shards = sm.NumShards
			}
		}
		ready = n.pg.readyDetail(detail, shards, n.log) && ready
	}
	if since, err, failing := n.store.LogWritesFailing(); failing {
		// It applies nothing new: no call, and it stops if this lasts
		// (raftstore/logguard.go).
		detail["raft_log_writes_failing"] = fmt.Sprintf("since %s: %v", since.UTC().Format(time.RFC3339), err)
		ready = false
	}
	if err := n.store.HaltErr(); err != nil {
		// Fail-stop: the state stops at the unknown entry, and the node
		// stops (Failed); never ready.
		detail["halted"] = err.Error()
		ready = false
	} else if err := n.store.FailErr(); err != nil {
		detail["failed"] = err.Error()
		ready = false
	}
	return ready, detail
}

// Failed is closed when the node can no longer work and must stop (its
// raft log store refused writes for too long, or its state halted at a
// raft entry its build does not know: raftstore.Store.Failed); FailErr
// says why. serve stops the process then, with an error.
func (n *Node) Failed() <-chan struct{} { return n.store.Failed() }

// FailErr is why the node failed, or nil.
func (n *Node) FailErr() error { return n.store.FailErr() }

// HTTPAddr is the bound API address.
func (n *Node) HTTPAddr() string {
	if n.httpLn != nil {
		return n.httpLn.Addr().String()
	}
	return n.cfg.HTTPAddr
}

// AdvertiseHTTPAddr is the API address peers are told (gossip metadata):
// --advertise-http-addr, the host's address for a wildcard bind, else the
// bound address.
func (n *Node) AdvertiseHTTPAddr() string {
	if n.adv.http == "" {
		return n.HTTPAddr()
	}
	return withPort(n.adv.http, n.HTTPAddr())
}

// GossipAddr is the advertised gossip address (the bound one unless
// advertised otherwise).
func (n *Node) GossipAddr() string {
	if n.members != nil {
		return n.members.GossipAddr()
	}
	return n.cfg.GossipAddr
}

// RaftAddr is the advertised Raft address (the bound one unless advertised
// otherwise).
func (n *Node) RaftAddr() string {
	if n.store != nil {
		return n.store.RaftAddr()
	}
	return n.cfg.RaftAddr
}

// Close stops the node in reverse start order: the API stops taking
// requests, the watchers stop, the node leaves the gossip pool (peers see a
// graceful leave, not a failure), Raft shuts down, then the pool and the
// config collection. Idempotent.
func (n *Node) Close(ctx context.Context) error {
	n.closeOnce.Do(func() {
		var errs []error
		// Hand this node's shards to the others first, while it still
		// serves and gossips, so the cluster re-places them at once instead
		// of after failure detection.
		errs = append(errs, n.handOver(ctx))
		if n.api != nil {
			errs = append(errs, n.api.Close(ctx))
		} else if n.httpLn != nil {
			errs = append(errs, n.httpLn.Close())
		}
		n.tokens.Close()
		n.closeHealth()
		n.stopPGHealth() // before the membership it writes to closes
		errs = append(errs, n.deliver.close())
		if n.cancel != nil {
			n.cancel()
		}
		n.wg.Wait()
		closeShards(n.shards)
		if n.store != nil {
			n.transferLeadership(ctx)
		}
		if n.hints != nil {
			n.hints.Close()
		}
		if n.members != nil {
			errs = append(errs, n.members.Close())
		}
		if n.store != nil {
			errs = append(errs, n.store.Close())
		}
		n.pg.close()
		if n.pool != nil {
			n.pool.Close()
		}
		if n.config != nil {
			errs = append(errs, n.config.Close())
		}
		n.closeTLS()
		if n.dirLock != nil {
			_ = n.dirLock.Close() // last: the data dir is free for another process
		}
		n.closeErr = errors.Join(errs...)
	})
	return n.closeErr
}

// transferLeadership hands leadership to another voter before a leader
// shuts down, so the cluster does not wait out an election timeout.
func (n *Node) transferLeadership(ctx context.Context) {
	if err := n.store.TransferLeadership(ctx, 5*time.Second); err != nil {
		n.log.Warn("leadership transfer before shutdown failed", "err", err)
	}
}
