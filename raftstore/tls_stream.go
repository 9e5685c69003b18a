package raftstore

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
)

// TLSConfigs is what the store needs to run Raft over mutual TLS
// (*tlsutil.Holder implements it). Both are called per connection, so a
// reload of the node's certificate or CA bundle applies to the next one.
type TLSConfigs interface {
	// RaftServerConfig verifies inbound peers (client certificate required).
	RaftServerConfig() *tls.Config
	// PeerClientConfig dials a peer, presenting this node's certificate.
	PeerClientConfig() *tls.Config
}

// maxPendingHandshakes bounds inbound handshakes in progress; a connection
// beyond it is closed at once (and counted), so a flood of stalled
// connections costs bounded memory and never delays Accept.
const maxPendingHandshakes = 64

// tlsStreamLayer is a raft.StreamLayer over crypto/tls. Its own accept
// loop takes TCP connections and completes each TLS handshake in a
// goroutine of its own, under a deadline, before raft's Accept sees the
// connection: a peer without a certificate from the CA is refused before
// any Raft RPC is decoded, and one peer that stalls its handshake holds
// up nobody else.
type tlsStreamLayer struct {
	ln        net.Listener
	advertise net.Addr
	tls       TLSConfigs
	timeout   time.Duration
	failures  *prometheus.CounterVec
	log       *slog.Logger

	ready   chan net.Conn // handshaken inbound connections for Accept
	pending chan struct{} // semaphore of handshakes in progress

	ctx       context.Context // cancelled by Close: aborts handshakes
	cancel    context.CancelFunc
	wg        sync.WaitGroup // the accept loop and every handshake
	closeOnce sync.Once
	closeErr  error
}

// newTLSStream binds Config.RaftBindAddr and returns a TLS stream layer
// for raft's NetworkTransport.
func (s *Store) newTLSStream(adv *net.TCPAddr) (raft.StreamLayer, error) {
	ln, err := net.Listen("tcp", s.cfg.RaftBindAddr)
	if err != nil {
		return nil, err
	}
	addr := ln.Addr()
	if adv != nil {
		addr = advertiseWithPort(adv, addr)
	}
	if ta, ok := addr.(*net.TCPAddr); !ok || ta.IP == nil || ta.IP.IsUnspecified() {
		ln.Close()
		return nil, fmt.Errorf("address %s is not advertisable: set an advertise address", addr)
	}
	failures := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fusebox_raft_tls_handshake_failures_total",
		Help: "Raft TLS handshakes that failed, by direction (inbound: a peer refused — no certificate, another CA, expired, not a node certificate, timed out, or too many handshakes pending; outbound: dialling a peer).",
	}, []string{"direction"})
	if s.cfg.Registerer != nil {
		if err := s.cfg.Registerer.Register(failures); err != nil {
			ln.Close()
			return nil, fmt.Errorf("register metrics: %w", err)
		}
	}
	return newTLSStreamLayer(ln, addr, s.cfg.TLS, s.cfg.TLSHandshakeTimeout, failures, s.logger.With("component", "raft-tls")), nil
}

// transportConfig is the NetworkTransport's configuration, TLS or not.
//
// MaxRPCsInFlight 1 turns raft's pipelined replication off. With the
// default (2) the pipeline's channels are unbuffered, and a follower that
// answers an append with Success=false (a log mismatch: after a leader
// change, a rejoin, a restore) can deadlock it: pipelineDecode returns,
// nothing reads the pipeline's done channel, the next send parks on the
// in-progress channel, and pipeline.Close — deferred in the goroutine that
// is parked — never runs. The follower then gets heartbeats but no entry
// ever again, and Raft.Shutdown hangs (seen here as a raftstore test stuck
// in Close; grafana/pyroscope#5518 hit the same in production). raft#541
// measured pipelining worth little with batched appends, which fusebox's
// group commit makes.
func transportConfig(hl hclog.Logger) *raft.NetworkTransportConfig {
	return &raft.NetworkTransportConfig{MaxPool: 3, Timeout: raftTransportTimeout, Logger: hl, MaxRPCsInFlight: 1}
}

// raftTransportTimeout bounds a Raft RPC's dial and, separately, its I/O.
const raftTransportTimeout = 10 * time.Second

// newTLSStreamLayer starts the accept loop on ln; Close stops it.
func newTLSStreamLayer(ln net.Listener, advertise net.Addr, cfgs TLSConfigs, timeout time.Duration, failures *prometheus.CounterVec, log *slog.Logger) *tlsStreamLayer {
	l := &tlsStreamLayer{
		ln: ln, advertise: advertise, tls: cfgs, timeout: timeout, failures: failures, log: log,
		ready: make(chan net.Conn), pending: make(chan struct{}, maxPendingHandshakes),
	}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	l.wg.Go(l.acceptLoop)
	return l
}

func (l *tlsStreamLayer) acceptLoop() {
	var delay time.Duration
	for {
		c, err := l.ln.Accept()
		if err != nil {
			if l.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			// A transient error (out of file descriptors): back off as
			// net/http does.
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			l.log.Warn("raft accept failed; retrying", "err", err, "delay", delay)
			select {
			case <-time.After(delay):
				continue
			case <-l.ctx.Done():
				return
			}
		}
		delay = 0
		select {
		case l.pending <- struct{}{}:
			l.wg.Go(func() { l.handshake(c) })
		default:
			l.failures.WithLabelValues("inbound").Inc()
			l.log.Warn("raft TLS: too many handshakes in progress; connection refused", "remote", c.RemoteAddr().String(), "limit", maxPendingHandshakes)
			c.Close()
		}
	}
}

// handshake completes the server side of one inbound connection's TLS
// handshake within the timeout and hands it to Accept.
func (l *tlsStreamLayer) handshake(c net.Conn) {
	defer func() { <-l.pending }()
	ctx, cancel := context.WithTimeout(l.ctx, l.timeout)
	defer cancel()
	tc := tls.Server(c, l.tls.RaftServerConfig())
	if err := tc.HandshakeContext(ctx); err != nil {
		l.failures.WithLabelValues("inbound").Inc()
		// Warn: a refused peer is either a misconfigured node (an expired
		// certificate, a CA not yet in the bundle) or an attack.
		l.log.Warn("raft TLS handshake refused", "remote", c.RemoteAddr().String(), "err", err)
		c.Close()
		return
	}
	select {
	case l.ready <- tc:
	case <-l.ctx.Done():
		tc.Close()
	}
}

// Accept returns the next inbound connection whose handshake succeeded.
func (l *tlsStreamLayer) Accept() (net.Conn, error) {
	select {
	case c := <-l.ready:
		return c, nil
	case <-l.ctx.Done():
		return nil, net.ErrClosed
	}
}

// Close stops the listener and every handshake in progress and waits for
// them. Idempotent.
func (l *tlsStreamLayer) Close() error {
	l.closeOnce.Do(func() {
		l.cancel()
		l.closeErr = l.ln.Close()
		l.wg.Wait()
	})
	return l.closeErr
}

// Addr is the advertised address.
func (l *tlsStreamLayer) Addr() net.Addr { return l.advertise }

func (l *tlsStreamLayer) boundAddr() net.Addr { return l.ln.Addr() }

// Dial opens a mutual-TLS connection to a peer, handshake included,
// within timeout.
func (l *tlsStreamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(l.ctx, timeout)
	defer cancel()
	raw, err := (&net.Dialer{}).DialContext(ctx, "tcp", string(address))
	if err != nil {
		return nil, err
	}
	tc := tls.Client(raw, l.tls.PeerClientConfig())
	if err := tc.HandshakeContext(ctx); err != nil {
		l.failures.WithLabelValues("outbound").Inc()
		raw.Close()
		return nil, fmt.Errorf("raft TLS handshake with %s: %w", address, err)
	}
	return tc, nil
}
