package raftstore

import (
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// inboundStream wraps the raft.StreamLayer handed to NetworkTransport so
// that Store.Close can wait for raft's inbound connection handlers before
// it closes the log store.
//
// Why: NetworkTransport answers a heartbeat on the handler's own goroutine
// (raft's heartbeat fast path: handleCommand calls Raft.processHeartbeat
// directly, not through the main loop). processHeartbeat checks for
// shutdown once, on entry; a heartbeat carrying a newer term that got past
// that check just before Raft.Shutdown then calls setCurrentTerm, and raft
// panics if the stable store refuses the write ("failed to save current
// term: closed"). Neither Raft.Shutdown nor NetworkTransport.Close waits
// for those goroutines, so without this wrapper a Close racing a peer's
// heartbeat could crash the process (seen once in CI, in the ownership
// tests' cluster teardown).
//
// raft's handleConn closes its connection when it returns (a deferred
// conn.Close), so a connection's Close marks its handler finished. drain
// closes the underlying connections, which ends each handler's blocking
// read, and waits for every handler to close its wrapper.
type inboundStream struct {
	raft.StreamLayer

	mu      sync.Mutex
	conns   map[*inboundConn]struct{}
	drained bool           // set by drain: Accept refuses from then on
	live    sync.WaitGroup // one per accepted connection, Done on its Close
}

func newInboundStream(sl raft.StreamLayer) *inboundStream {
	return &inboundStream{StreamLayer: sl, conns: make(map[*inboundConn]struct{})}
}

// Accept is the wrapped layer's Accept; the connection is tracked until
// raft's handler closes it.
func (s *inboundStream) Accept() (net.Conn, error) {
	c, err := s.StreamLayer.Accept()
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.drained {
		c.Close()
		return nil, net.ErrClosed
	}
	ic := &inboundConn{Conn: c, owner: s}
	s.conns[ic] = struct{}{}
	s.live.Add(1)
	return ic, nil
}

// drain refuses further connections, closes every accepted one and waits
// up to timeout for raft's handlers to return. It reports whether they
// all did. Call it after NetworkTransport.Close.
func (s *inboundStream) drain(timeout time.Duration) bool {
	s.mu.Lock()
	s.drained = true
	for c := range s.conns {
		c.Conn.Close() // the raw close: the handler's own Close marks it done
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.live.Wait(); close(done) }()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

// inboundConn is an accepted connection; its Close (raft's handler
// returning) is what drain waits for.
type inboundConn struct {
	net.Conn
	owner *inboundStream
	once  sync.Once
}

func (c *inboundConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.owner.mu.Lock()
		delete(c.owner.conns, c)
		c.owner.mu.Unlock()
		c.owner.live.Done()
	})
	return err
}

// inboundDrainTimeout bounds Store.Close's wait for raft's inbound
// handlers. A handler only outlives its closed connection while it is
// inside a heartbeat's log-store write, which takes milliseconds.
const inboundDrainTimeout = 10 * time.Second
