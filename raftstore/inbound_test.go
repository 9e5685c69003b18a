package raftstore

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// TestInboundDrainWaitsForHandlers: drain ends the handler's read by
// closing the connection, then waits until the handler itself closes it,
// which is how raft's handleConn returns; Accept refuses after drain.
func TestInboundDrainWaitsForHandlers(t *testing.T) {
	sl, err := newTCPStream("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	in := newInboundStream(sl)
	t.Cleanup(func() { in.Close() })

	client, err := in.Dial(raft.ServerAddress(in.Addr().String()), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	conn, err := in.Accept()
	if err != nil {
		t.Fatal(err)
	}
	readEnded := make(chan error, 1)
	release := make(chan struct{})
	handlerDone := make(chan struct{})
	go func() { // a handler like raft's handleConn: read until error, then Close
		defer close(handlerDone)
		_, err := io.ReadAll(conn)
		readEnded <- err
		<-release // still "writing the term" when the read ended
		conn.Close()
	}()

	if in.drain(100 * time.Millisecond) {
		t.Fatal("drain returned true while a handler had not closed its connection")
	}
	select {
	case <-readEnded: // drain's raw close ended the blocking read
	case <-time.After(10 * time.Second):
		t.Fatal("drain did not end the handler's read")
	}
	close(release)
	if !in.drain(10 * time.Second) {
		t.Fatal("drain timed out after the handler closed its connection")
	}
	<-handlerDone

	// A connection accepted after drain is refused and closed.
	go func() {
		if c, err := net.DialTimeout("tcp", in.Addr().String(), time.Second); err == nil {
			defer c.Close()
			_, _ = io.ReadAll(c)
		}
	}()
	if c, err := in.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept after drain = %v, %v; want net.ErrClosed", c, err)
	}
}
