package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"fusebox/api"
	"fusebox/internal/logring"
	"fusebox/node"
)

// serveFlags are the contract's flags (DESIGN.md "External contract"); each
// can also be set as FUSEBOX_<NAME> (dashes become underscores).
type serveFlags struct {
	nodeID          string
	dataDir         string
	httpAddr        string
	gossipAddr      string
	raftAddr        string
	advHTTP         string
	advRaft         string
	advGossip       string
	join            string
	bootstrapExpect int
	shards          int
	gossipKeyFile   string
	adminTokenFile  string
	logLevel        string
	logFormat       string
	timing          string
	shutdownTimeout time.Duration
	enablePprof     bool
	tls             tlsFlags // tls.go
	rejoinEmpty     bool
	metricsPublic   bool
	maxConns        int
	httpBodyTimeout time.Duration
	taskStore       string
	postgresURL     string
	gcHeapFloorMB   int
	outboundSrc     string
}

func serveCmd() *cobra.Command {
	f := &serveFlags{}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run a fusebox node",
		Long: `Run a fusebox node. With no flags it runs a single-node cluster on loopback
with its data under ./data, which is what "make run" does.

Every flag can also be set in the environment as FUSEBOX_<FLAG NAME>, upper
case with dashes as underscores (FUSEBOX_NODE_ID, FUSEBOX_HTTP_ADDR, …). A flag
given on the command line wins over the environment.

To form a 3-node cluster, start each node with a distinct --node-id,
--data-dir and addresses, --bootstrap-expect 3 and --join listing the others'
gossip addresses.

SIGINT or SIGTERM shuts down gracefully: the node hands its shards (and, as
the Raft leader, its leadership) to the others, lets the calls under way
finish (up to 10s) and writes their results, stops accepting requests, leaves
the gossip pool and closes Raft. If that takes longer than --shutdown-timeout
(and 5s of grace) it stops anyway and exits 1, as a crash would: nothing
accepted is lost, but calls may be made again. A second signal kills it.
SIGHUP reloads the TLS certificate, key and CA files (also picked up within
a few seconds of a change on disk) and --admin-token-file; a bad file keeps
the old material. A SIGHUP during shutdown is ignored.

With --tls-cert-file, --tls-key-file and --tls-ca-file the HTTP API serves
HTTPS only, and Raft and leader forwarding use mutual TLS: peers must present
a node certificate from the CA. TLS needs --gossip-key-file too. Create the CA
and certificates with "fusebox tls ca create" and "fusebox tls cert create".
Beyond loopback (any --http-addr or --raft-addr that is not 127.0.0.1, ::1 or
localhost, including 0.0.0.0) serve refuses to start without TLS and
--admin-token-file unless --insecure is given.

Tasks live in the nodes' Raft state by default. With --task-store postgres
and --postgres-url (or FUSEBOX_POSTGRES_URL) they live in a PostgreSQL
database the nodes share, and Raft keeps only the control plane; the node
starts even while the database is unreachable, retrying, and refuses submits
with 503 (its /readyz names the task store and the error) until it is open.

Peers are told the --advertise-{http,raft,gossip}-addr addresses. Without
them a node advertises what it binds; a wildcard bind (0.0.0.0, :: or an
empty host) advertises the first private (RFC 1918) IPv4 address of an up,
non-loopback interface, as Consul does, and serve refuses to start, naming
the flag to set, when the host has none.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := applyEnv(cmd.Flags()); err != nil {
				return err
			}
			return runServe(cmd, f)
		},
	}
	host, _ := os.Hostname()
	if host == "" {
		host = "fusebox-1"
	}
	fl := cmd.Flags()
	fl.SortFlags = false
	fl.StringVar(&f.nodeID, "node-id", host, "unique, stable name of this node in the cluster")
	fl.StringVar(&f.dataDir, "data-dir", "./data", "directory for the Raft log, snapshots and node identity; keep it across restarts")
	fl.StringVar(&f.httpAddr, "http-addr", "127.0.0.1:8470", "host:port of the HTTP API (ingest, admin, /metrics, /healthz, /readyz)")
	fl.StringVar(&f.gossipAddr, "gossip-addr", "127.0.0.1:8471", "host:port for memberlist gossip (TCP and UDP); peers --join this address")
	fl.StringVar(&f.raftAddr, "raft-addr", "127.0.0.1:8472", "host:port for Raft replication traffic (TCP)")
	fl.StringVar(&f.advHTTP, "advertise-http-addr", "", "HOST[:PORT] peers and the status page use to reach the HTTP API, when not --http-addr (NAT, containers; a host alone keeps the bind port). Default: the bound address; for a wildcard bind (0.0.0.0, ::) the first private IPv4 address of an up, non-loopback interface, as Consul picks it")
	fl.StringVar(&f.advRaft, "advertise-raft-addr", "", "HOST[:PORT] peers dial for Raft, when not --raft-addr; default as for --advertise-http-addr")
	fl.StringVar(&f.advGossip, "advertise-gossip-addr", "", "HOST[:PORT] peers gossip with, when not --gossip-addr; default as for --advertise-http-addr")
	fl.StringVar(&f.join, "join", "", "comma-separated gossip addresses of existing nodes to join; retried until one answers")
	fl.IntVar(&f.bootstrapExpect, "bootstrap-expect", 0, "number of servers that bootstrap a new cluster together once they see each other (0: 1 when --join is empty, else join an existing cluster)")
	fl.IntVar(&f.shards, "shards", node.DefaultShards, "number of shards, fixed when the cluster is created; later values must match (production: about 8× the largest node count you expect, 4× at least)")
	fl.StringVar(&f.gossipKeyFile, "gossip-key-file", "", "file of base64 AES keys (16, 24 or 32 bytes), one per line, first is used to encrypt; without the key a node can neither join nor be heard. Required with TLS and for a --gossip-addr beyond loopback")
	fl.StringVar(&f.adminTokenFile, "admin-token-file", "", "file of named API tokens, one '<name> <role> <token>' a line (roles submit, read, node, admin; a file of one bare token is an admin token); every route but /healthz and /readyz then needs Authorization: Bearer <token> of its role; re-read when it changes (docs/operations.md)")
	fl.StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fl.StringVar(&f.logFormat, "log-format", "text", "log format: text or json")
	fl.StringVar(&f.timing, "timing", "lan", "failure-detection and election timings: lan (production) or fast (tests and demos on one host)")
	fl.DurationVar(&f.shutdownTimeout, "shutdown-timeout", 30*time.Second, "how long a graceful shutdown may take before the node stops anyway")
	fl.BoolVar(&f.rejoinEmpty, "rejoin-empty", false, "start even though --data-dir lost its Raft log (wal/, or raft.db on an older data dir, missing or empty): leave the Raft configuration and rejoin as a new member that copies the state from the leader; needs a running cluster (docs/operations.md)")
	fl.BoolVar(&f.enablePprof, "enable-pprof", false, "serve Go's runtime profiles under /debug/pprof/ on the HTTP API (admin role when tokens are set)")
	fl.BoolVar(&f.metricsPublic, "metrics-public", false, "serve /metrics without a token (by default it needs the read role when tokens are set)")
	fl.IntVar(&f.maxConns, "max-conns", api.DefaultMaxConns, fmt.Sprintf("most HTTP API connections served at once; over it %d more are kept to answer /healthz and /readyz only, the rest are closed (keep it well below the fd limit, ulimit -n)", api.DefaultHealthReserve))
	fl.DurationVar(&f.httpBodyTimeout, "http-body-timeout", api.DefaultBodyTimeout, "how long a client may take to send a request body; a slower one gets 408 and its connection is closed")
	fl.StringVar(&f.taskStore, "task-store", node.TaskStoreRaft, "where tasks, attempts, results and the DLQ live: raft (replicated in the nodes' Raft state, nothing else to run) or postgres (a PostgreSQL database shared by the nodes, --postgres-url; Raft keeps config, endpoints, shards and forced breakers)")
	fl.StringVar(&f.postgresURL, "postgres-url", "", "with --task-store postgres: postgres://user:password@host:5432/database[?sslmode=…][&pool_max_conns=N] (N: connections per node, default 2); the password is a secret (never logged): prefer FUSEBOX_POSTGRES_URL to the command line. The node starts while the database is unreachable and retries; /readyz says why")
	fl.IntVar(&f.gcHeapFloorMB, "gc-heap-floor-mb", defaultGCHeapFloorMB, "the Go collector's heap goal is kept at least this many MiB: while the live heap is under half of it the node raises GOGC so that it collects when the heap reaches it, not each time a small heap doubles (less CPU for the collector on nodes with little live data); 0 turns it off; ignored when the GOGC environment variable is set (docs/operations.md)")
	fl.StringVar(&f.outboundSrc, "outbound-source-addr", "", "local IP address outbound calls to destinations (tasks and health checks) leave from, on a host with several; no port. Default: the kernel chooses by its routes. An IPv4 address reaches only destinations' IPv4 addresses, an IPv6 one only IPv6; Raft, gossip and peer traffic are not affected (docs/operations.md)")
	f.tls.register(fl)
	return cmd
}

// applyEnv sets every flag not given on the command line from
// FUSEBOX_<NAME>, naming the variable in any error.
func applyEnv(fs *pflag.FlagSet) error {
	var firstErr error
	fs.VisitAll(func(fl *pflag.Flag) {
		if fl.Changed || firstErr != nil {
			return
		}
		name := "FUSEBOX_" + strings.ToUpper(strings.ReplaceAll(fl.Name, "-", "_"))
		if v, ok := os.LookupEnv(name); ok {
			if err := fs.Set(fl.Name, v); err != nil {
				firstErr = fmt.Errorf("environment %s=%q: %w", name, v, err)
			}
		}
	})
	return firstErr
}

// newLogger writes to stderr and keeps the last logring.DefaultSize
// records in ring (GET /v1/debug/logs, the debug bundle).
func newLogger(level, format string, ring *logring.Ring) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %q is not one of debug, info, warn, error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	var h slog.Handler
	switch format {
	case "text":
		h = slog.NewTextHandler(os.Stderr, opts)
	case "json":
		h = slog.NewJSONHandler(os.Stderr, opts)
	default:
		return nil, fmt.Errorf("--log-format: %q is not text or json", format)
	}
	if ring != nil {
		h = ring.Handler(h, opts)
	}
	return slog.New(newOneComponent(h)), nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func readSecretFile(flag, path string) (string, error) {
	if path == "" {
		return "", nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", flag, err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("%s: %s is empty", flag, path)
	}
	return tok, nil
}

func runServe(cmd *cobra.Command, f *serveFlags) error {
	ring := logring.New(logring.DefaultSize)
	logger, err := newLogger(f.logLevel, f.logFormat, ring)
	if err != nil {
		return err
	}
	cfg := node.Config{
		NodeID:              f.nodeID,
		DataDir:             f.dataDir,
		HTTPAddr:            f.httpAddr,
		GossipAddr:          f.gossipAddr,
		RaftAddr:            f.raftAddr,
		AdvertiseHTTPAddr:   f.advHTTP,
		AdvertiseRaftAddr:   f.advRaft,
		AdvertiseGossipAddr: f.advGossip,
		Join:                splitList(f.join),
		BootstrapExpect:     f.bootstrapExpect,
		Shards:              f.shards,
		GossipKeyFile:       f.gossipKeyFile,
		AdminTokenFile:      f.adminTokenFile,
		EnablePprof:         f.enablePprof,
		MetricsPublic:       f.metricsPublic,
		HTTPLimits:          api.Limits{MaxConns: f.maxConns, BodyTimeout: f.httpBodyTimeout},
		Timing:              f.timing,
		Version:             version,
		TLSCertFile:         f.tls.certFile,
		TLSKeyFile:          f.tls.keyFile,
		TLSCAFile:           f.tls.caFile,
		Insecure:            f.tls.insecure,
		RejoinEmpty:         f.rejoinEmpty,
		TaskStore:           f.taskStore,
		PostgresURL:         f.postgresURL,
		OutboundSourceAddr:  f.outboundSrc,
	}
	if f.gcHeapFloorMB < 0 {
		return fmt.Errorf("--gc-heap-floor-mb %d: must not be negative", f.gcHeapFloorMB)
	}
	if f.shutdownTimeout <= 0 {
		// 0 read as "no limit" stopped every node at once, as a crash:
		// exit 1, no hand-over, calls under way made again elsewhere.
		return fmt.Errorf("--shutdown-timeout %v: must be positive (how long a graceful shutdown may take; default 30s)", f.shutdownTimeout)
	}
	n, err := node.New(cfg, logger)
	if err != nil {
		return err
	}
	defer startGCFloor(f.gcHeapFloorMB, logger)()
	ctx := cmd.Context()
	// SIGHUP reloads (reload.go); caught from before Start, so an early
	// one cannot kill the process (its default action).
	stopHUP := reloadOnSIGHUP(ctx, n, logger)
	defer stopHUP()
	if err := n.Start(ctx); err != nil {
		_ = n.Close(ctx)
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "fusebox node %q listening: %s://%s (gossip %s, raft %s), data in %s\n",
		cfg.NodeID, scheme(cfg), n.HTTPAddr(), n.GossipAddr(), n.RaftAddr(), cfg.DataDir)
	var failed error
	select {
	case <-ctx.Done():
	case <-n.Failed():
		// The node cannot work (its raft log store refuses writes, or its
		// state halted at an entry its build does not know): stop as on
		// SIGTERM — its shards move at once — and exit with the cause.
		failed = n.FailErr()
		logger.Error("stopping: this node cannot work", "error", failed)
	}
	// Past here SIGHUP is ignored, not left to its default action (exit):
	// a reload (systemd's ExecReload, a certificate hook) during the
	// hand-over killed the node halfway through it.
	signal.Ignore(syscall.SIGHUP)
	stopHUP()
	logger.Info("shutting down", "timeout", f.shutdownTimeout)
	sctx, cancel := contextWithTimeout(f.shutdownTimeout)
	defer cancel()
	// Close honours sctx step by step; if a step still outlives it (a
	// write waiting on a quorum that is gone), the node stops anyway after
	// a short grace, as a crash would: Raft's log and snapshots are
	// durable, and a restart recovers.
	closed := make(chan error, 1)
	go func() { closed <- n.Close(sctx) }()
	var closeErr error
	select {
	case closeErr = <-closed:
	case <-sctx.Done():
		select {
		case closeErr = <-closed:
		case <-time.After(shutdownGrace):
			logger.Error("shutdown did not finish in time; stopping anyway", "timeout", f.shutdownTimeout, "grace", shutdownGrace)
			return fmt.Errorf("shutdown: not finished %v after --shutdown-timeout %v", shutdownGrace, f.shutdownTimeout)
		}
	}
	if failed != nil {
		return errors.Join(failed, closeErr)
	}
	if closeErr != nil {
		return fmt.Errorf("shutdown: %w", closeErr)
	}
	logger.Info("stopped")
	return nil
}

// shutdownGrace is how long past --shutdown-timeout serve waits for Close
// to return before it exits anyway.
const shutdownGrace = 5 * time.Second

func contextWithTimeout(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}
