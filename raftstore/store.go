package raftstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"fusebox/raftstore/state"
)

// Store is one node's raft replica of the cluster state.
type Store struct {
	cfg    Config
	deps   Deps
	logger *slog.Logger

	state   *state.State
	fsm     *FSM
	metrics *metrics

	// unreachable is, while this node leads, the servers its heartbeats
	// fail to and since when (leader.go; nil otherwise).
	unreachable atomic.Pointer[map[string]time.Time]
	// leaderEra ends when the leader this node knows changes (leader_watch.go).
	leaderEra atomic.Pointer[leaderEra]

	logs    logStore // Config.LogStore, or the one the data dir holds (logstore.go), as guard
	guard   *guardedLogs
	logFail logFailure // logguard.go
	// logFailFatal is Config.LogFailFatal.
	logFailFatal time.Duration
	snaps        *raft.FileSnapshotStore
	trans        *raft.NetworkTransport
	inbound      *inboundStream // trans's stream layer, tracking raft's inbound handlers
	raftAddr     string
	boundAt      string // the raft listener's bound address (RaftBoundAddr)
	raft         atomic.Pointer[raft.Raft]
	gateView     atomic.Pointer[ClusterVersion] // gate.go
	notifyCh     chan bool

	ctx    context.Context // background work; cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	pushKick chan struct{} // a write committed here as leader; Config.PushCommits (push.go)

	// freshLag and contactLag are FreshLag and ContactLag, fixed by the
	// config: the queue asks for them before every call, and raftConfig
	// builds a whole raft.Config.
	freshLag, contactLag time.Duration

	submits   submitBatcher   // group commit of single-task submits
	completes completeBatcher // group commit of completes (complete_batch.go)

	hooksMu sync.Mutex
	hooks   []func(context.Context)

	// rejoin: the data dir lost its log and Config.RejoinEmpty is set
	// (datadir.go, rejoin.go).
	rejoin bool

	startOnce sync.Once
	closeOnce sync.Once
	closing   atomic.Bool // set when Close begins: raft's errors after it are logged at INFO
	closeErr  error
}

// New opens the data dir and binds the raft transport; raft itself starts in
// Start. On error nothing is left open.
func New(cfg Config, deps Deps) (_ *Store, err error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	if deps.Members == nil {
		return nil, errors.New("raftstore: Deps.Members is required")
	}
	s := &Store{cfg: cfg, deps: deps, logger: cfg.Logger.With("component", "raftstore", "node", cfg.NodeID), notifyCh: make(chan bool, 16), pushKick: make(chan struct{}, 1)}
	s.leaderEra.Store(newLeaderEra())
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.freshLag = 2 * cfg.raftConfig().HeartbeatTimeout
	s.contactLag = cfg.raftConfig().HeartbeatTimeout / 2
	s.logFailFatal = cfg.LogFailFatal
	s.logFail.failed = make(chan struct{})
	s.state, err = state.NewState(state.StateOptions{Validator: deps.Validator, HistoryLimit: cfg.HistoryLimit, RequestWindow: cfg.RequestWindow, LogVersion: cfg.LogVersion})
	if err != nil {
		return nil, err
	}
	s.fsm = NewFSM(s.state, s.logger)
	// A halted FSM applies nothing more: like a log store that refuses
	// writes, the node cannot follow the cluster and must stop (halt.go).
	s.fsm.OnHalt(func(he *state.HaltError) {
		s.fail(fmt.Errorf("%w; this node cannot follow the cluster and stops", he))
	})
	if s.metrics, err = newMetrics(cfg.Registerer, s); err != nil {
		return nil, err
	}
	s.submits.init(s) // after the metrics, which the batchers observe
	s.completes.init(s)

	var closers []func() error
	defer func() {
		if err != nil {
			for i := len(closers) - 1; i >= 0; i-- {
				_ = closers[i]()
			}
		}
	}()
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("raftstore: Config.DataDir: %w", err)
	}
	dir, err := s.checkDataDir()
	if err != nil {
		return nil, err
	}
	hl := newHCLogger(s.logger, "raft", &s.closing)
	if dir.logStore != cfg.LogStore && !s.rejoin {
		// The data dir holds the other log store: move its log over
		// (logstore.go). A data dir whose log is lost has nothing to move.
		if err := migrateLogStore(cfg.DataDir, dir.logStore, cfg.LogStore, hl, s.logger.Info); err != nil {
			return nil, fmt.Errorf("raftstore: migrate the raft log in %s from %s to %s: %w",
				cfg.DataDir, dir.logStore, cfg.LogStore, err)
		}
		dir.logStore = cfg.LogStore
	}
	opened, err := openLogStore(cfg.DataDir, dir.logStore, hl)
	if err != nil {
		return nil, fmt.Errorf("raftstore: open the %s log store in %s: %w", dir.logStore, cfg.DataDir, err)
	}
	s.guard = &guardedLogs{logStore: opened, onFail: s.logWriteFailed, quiet: cfg.LogFailFatal / 4}
	s.logs = s.guard
	closers = append(closers, s.logs.Close)
	if s.snaps, err = raft.NewFileSnapshotStoreWithLogger(cfg.DataDir, 2, hl); err != nil {
		return nil, fmt.Errorf("raftstore: snapshot store: %w", err)
	}
	if err := s.checkLog(dir); err != nil {
		return nil, err
	}
	var adv *net.TCPAddr
	if cfg.AdvertiseAddr != "" {
		if adv, err = net.ResolveTCPAddr("tcp", cfg.AdvertiseAddr); err != nil {
			return nil, fmt.Errorf("raftstore: Config.AdvertiseAddr %q: %w", cfg.AdvertiseAddr, err)
		}
	}
	var sl raft.StreamLayer
	if cfg.TLS != nil {
		sl, err = s.newTLSStream(adv) // mutual TLS (tls_stream.go)
	} else {
		sl, err = newTCPStream(cfg.RaftBindAddr, adv)
	}
	if err != nil {
		return nil, fmt.Errorf("raftstore: raft transport on %q: %w", cfg.RaftBindAddr, err)
	}
	if b, ok := sl.(interface{ boundAddr() net.Addr }); ok {
		s.boundAt = b.boundAddr().String()
	}
	s.inbound = newInboundStream(sl) // Close waits for raft's handlers (inbound.go)
	tc := transportConfig(hl)
	tc.Stream = s.inbound
	s.trans = raft.NewNetworkTransportWithConfig(tc)
	s.raftAddr = string(s.trans.LocalAddr())
	return s, nil
}

// RaftAddr is the address peers use for raft: Config.AdvertiseAddr (its
// port 0 replaced by the bound port), else the bound address.
func (s *Store) RaftAddr() string { return s.raftAddr }

// RaftBoundAddr is the address the raft listener is bound to (0.0.0.0:PORT
// for a wildcard bind), which RaftAddr does not show when an address is
// advertised: the node's destination policy refuses both.
func (s *Store) RaftBoundAddr() string { return s.boundAt }

// newTCPStream is raft.NewTCPTransport's stream layer, with an advertise
// address whose port 0 means the port bound (a bind to port 0 advertised
// under another host); with adv nil it advertises the bound address.
func newTCPStream(bind string, adv *net.TCPAddr) (raft.StreamLayer, error) {
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, err
	}
	var a *net.TCPAddr
	if adv != nil {
		a = advertiseWithPort(adv, ln.Addr())
	} else {
		a, _ = ln.Addr().(*net.TCPAddr)
	}
	if a == nil || a.IP == nil || a.IP.IsUnspecified() {
		ln.Close()
		return nil, fmt.Errorf("address %s is not advertisable: set an advertise address", ln.Addr())
	}
	return &tcpStream{Listener: ln, adv: a}, nil
}

// advertiseWithPort is adv with a port of 0 replaced by bound's port.
func advertiseWithPort(adv *net.TCPAddr, bound net.Addr) *net.TCPAddr {
	a := *adv
	if b, ok := bound.(*net.TCPAddr); ok && a.Port == 0 {
		a.Port = b.Port
	}
	return &a
}

// tcpStream is raft's plain TCP stream layer advertising adv.
type tcpStream struct {
	net.Listener
	adv net.Addr
}

func (t *tcpStream) Addr() net.Addr { return t.adv }

func (t *tcpStream) boundAddr() net.Addr { return t.Listener.Addr() }

func (t *tcpStream) Dial(a raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return net.DialTimeout("tcp", string(a), timeout)
}

// NodeID returns this node's raft server id.
func (s *Store) NodeID() string { return s.cfg.NodeID }

// OnLeader registers fn to run, in its own goroutine, each time this node
// becomes leader (after the barrier). ctx is cancelled when leadership is lost
// or the store closes. Register before Start.
func (s *Store) OnLeader(fn func(ctx context.Context)) {
	s.hooksMu.Lock()
	defer s.hooksMu.Unlock()
	s.hooks = append(s.hooks, fn)
}

// Start starts raft and, with no existing state, bootstraps (at once for
// BootstrapExpect <= 1, or in the background once enough members are seen).
// It does not wait for a leader (Leader reports one once known).
func (s *Store) Start(ctx context.Context) error {
	err := errors.New("raftstore: Start called twice")
	s.startOnce.Do(func() { err = s.start(ctx) })
	return err
}

// raftLogCacheSize is the number of newest raft entries kept in memory.
const raftLogCacheSize = 512

func (s *Store) start(ctx context.Context) error {
	if s.ctx.Err() != nil {
		return errors.New("raftstore: Start after Close")
	}
	rc := s.cfg.raftConfig()
	rc.Logger = newHCLogger(s.logger, "raft", &s.closing)
	if err := s.recoverFromPeersFile(rc); err != nil {
		return err
	}
	existing, err := raft.HasExistingState(s.logs, s.logs, s.snaps)
	if err != nil {
		return fmt.Errorf("raftstore: read existing state: %w", err)
	}
	rc.NotifyCh = s.notifyCh
	// The log cache keeps the newest entries in memory, so replication to
	// followers and the FSM read them without a bolt read and msgpack decode
	// (as Consul and Nomad do; 4% of a loaded node's CPU without it).
	logs, err := raft.NewLogCache(raftLogCacheSize, s.logs)
	if err != nil {
		return fmt.Errorf("raftstore: log cache: %w", err)
	}
	if s.rejoin {
		if err := s.leaveForRejoin(ctx); err != nil {
			return err
		}
	}
	r, err := newRaft(rc, s.fsm, logs, s.logs, s.snaps, s.trans)
	if err != nil {
		return fmt.Errorf("raftstore: start raft: %w", err)
	}
	s.raft.Store(r)
	r.RegisterObserver(s.leaderObserver())
	s.wg.Go(s.monitorLeadership)
	s.wg.Go(func() { s.markWhenState(r) })
	switch {
	case s.rejoin:
		s.logger.Warn("rejoining with an empty log: not bootstrapping; the leader adds this node as a non-voter and promotes it once it is caught up")
	case existing:
		s.logger.Info("raft state found; not bootstrapping", "data_dir", s.cfg.DataDir)
	case s.cfg.BootstrapExpect == 0:
		s.logger.Info("not bootstrapping: waiting to be added to an existing cluster by its leader")
	case s.cfg.BootstrapExpect == 1:
		conf := raft.Configuration{Servers: []raft.Server{{ID: raft.ServerID(s.cfg.NodeID), Address: raft.ServerAddress(s.raftAddr), Suffrage: raft.Voter}}}
		if err := r.BootstrapCluster(conf).Error(); err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
			return fmt.Errorf("raftstore: bootstrap single node: %w", err)
		}
		s.logger.Info("bootstrapped single-node cluster")
	default:
		s.wg.Go(s.bootstrapLoop)
	}
	return ctx.Err()
}

// Close stops leader work and bootstrap, shuts raft down, then closes the
// transport and raft.db. It is idempotent.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.closing.Store(true) // raft's errors from here on are the shutdown's (logging.go)
		s.cancel()
		s.stopLogWatch()
		s.submits.close()
		s.completes.close()
		s.wg.Wait()
		var errs []error
		if r := s.raft.Load(); r != nil {
			if err := r.Shutdown().Error(); err != nil {
				errs = append(errs, fmt.Errorf("raft shutdown: %w", err))
			}
		}
		// Close also our pooled outbound connections: NetworkTransport.Close
		// does not, and the peers' handlers would block reading them forever.
		s.trans.CloseStreams()
		if err := s.trans.Close(); err != nil {
			errs = append(errs, fmt.Errorf("raft transport: %w", err))
		}
		// A heartbeat handler may still be writing the term to the log
		// store; closing it under that write panics raft (inbound.go).
		if !s.inbound.drain(inboundDrainTimeout) {
			s.logger.Warn("raft inbound handlers still running after the transport closed; closing the log store anyway", "waited", inboundDrainTimeout)
		}
		if err := s.logs.Close(); err != nil {
			errs = append(errs, fmt.Errorf("log store: %w", err))
		}
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}
