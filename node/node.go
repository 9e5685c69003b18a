package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"fusebox/transport"
)

// Node is one running fusebox node.
type Node struct {
	cfg Config
	log *slog.Logger
	reg *prometheus.Registry

	httpLn net.Listener
	api    *transport.Server

	closeOnce sync.Once
	closeErr  error
}

// New validates cfg and builds the node's parts; nothing listens until Start.
func New(cfg Config, logger *slog.Logger) (*Node, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return &Node{cfg: cfg, log: logger.With("node", cfg.NodeID), reg: reg}, nil
}

// Start brings the node up in dependency order. On error the caller must
// still call Close to release what did start.
func (n *Node) Start(ctx context.Context) error {
	if err := claimDataDir(n.cfg.DataDir, n.cfg.NodeID); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", n.cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("--http-addr %s: %w", n.cfg.HTTPAddr, err)
	}
	n.httpLn = ln
	n.api = transport.New(transport.Config{Addr: ln.Addr().String(), AdminToken: n.cfg.AdminToken}, transport.Deps{
		Gatherer: n.reg,
		Ready:    n.ready,
	}, n.log.With("component", "api"))
	n.api.Serve(ln)
	n.log.Info("node started", "http", n.HTTPAddr())
	return nil
}

func (n *Node) ready() (bool, map[string]any) {
	return true, map[string]any{}
}

// HTTPAddr is the bound API address.
func (n *Node) HTTPAddr() string {
	if n.httpLn != nil {
		return n.httpLn.Addr().String()
	}
	return n.cfg.HTTPAddr
}

// GossipAddr is the bound gossip address.
func (n *Node) GossipAddr() string { return n.cfg.GossipAddr }

// RaftAddr is the bound Raft address.
func (n *Node) RaftAddr() string { return n.cfg.RaftAddr }

// Close stops the node in reverse start order. Idempotent.
func (n *Node) Close(ctx context.Context) error {
	n.closeOnce.Do(func() {
		var errs []error
		if n.api != nil {
			errs = append(errs, n.api.Close(ctx))
		}
		n.closeErr = errors.Join(errs...)
	})
	return n.closeErr
}
