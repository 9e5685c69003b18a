package cluster

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/hashicorp/memberlist"
)

// User message families. Every user message (UDP send or gossip broadcast)
// starts with one of these bytes; receivers drop and count unknown types, so
// new families can be added without breaking older nodes.
const (
	msgHint        byte = 1
	msgLeaveIntent byte = 2
	msgFleet       byte = 3 // a fleet budget backlog report (fleet.go)
)

// inbound is one user message copied off memberlist's UDP receive loop.
type inbound struct {
	typ  byte
	body []byte
}

// delegate implements memberlist.Delegate for a Membership. Its methods run
// on memberlist's goroutines and never block.
type delegate struct {
	m *Membership
}

var _ memberlist.Delegate = (*delegate)(nil)

// NodeMeta returns the current encoded metadata (validated to fit).
func (d *delegate) NodeMeta(limit int) []byte {
	b := *d.m.metaBytes.Load()
	if len(b) > limit {
		return nil // cannot happen: encode checks MetaMaxSize
	}
	return b
}

// NotifyMsg copies the message and queues it for the worker; a full queue
// drops the message and counts it.
func (d *delegate) NotifyMsg(buf []byte) {
	if len(buf) == 0 {
		d.m.metrics.msgsDropped.WithLabelValues("empty").Inc()
		return
	}
	typ := buf[0]
	switch typ {
	case msgHint, msgLeaveIntent, msgFleet:
	default:
		d.m.metrics.msgsDropped.WithLabelValues("unknown_type").Inc()
		return
	}
	msg := inbound{typ: typ, body: append([]byte(nil), buf[1:]...)}
	select {
	case d.m.inbound <- msg:
	default:
		d.m.metrics.msgsDropped.WithLabelValues("queue_full").Inc()
		if typ == msgHint {
			d.m.metrics.hintsReceived.WithLabelValues(string(HintDropped)).Inc()
		}
	}
}

// GetBroadcasts hands memberlist the queued hints and leave intents.
func (d *delegate) GetBroadcasts(overhead, limit int) [][]byte {
	return d.m.queue.GetBroadcasts(overhead, limit)
}

// LocalState sends this node's open hints to a push/pull peer.
func (d *delegate) LocalState(join bool) []byte { return d.m.localHintState() }

// MergeRemoteState feeds a push/pull peer's open hints to the sink.
func (d *delegate) MergeRemoteState(buf []byte, join bool) { d.m.mergeHintState(buf) }

// broadcast is a queued gossip message with a name: queueing a broadcast
// with the same name replaces the queued one (memberlist.NamedBroadcast).
// Finished runs with the queue's lock held, so it only sets a flag.
type broadcast struct {
	name string
	gen  uint64
	msg  []byte
	done atomic.Bool
}

var _ memberlist.NamedBroadcast = (*broadcast)(nil)

func (b *broadcast) Name() string    { return b.name }
func (b *broadcast) Message() []byte { return b.msg }
func (b *broadcast) Finished()       { b.done.Store(true) }
func (b *broadcast) Invalidates(o memberlist.Broadcast) bool {
	nb, ok := o.(memberlist.NamedBroadcast)
	return ok && nb.Name() == b.name
}

// Leave intents: version(1) uvarint(len) nodeID.
const leaveIntentV1 = 1

func encodeLeaveIntent(id string) []byte {
	b := []byte{msgLeaveIntent, leaveIntentV1}
	b = binary.AppendUvarint(b, uint64(len(id)))
	return append(b, id...)
}

func decodeLeaveIntent(body []byte) (string, error) {
	if len(body) < 2 || body[0] != leaveIntentV1 {
		return "", errors.New("leave intent: bad header")
	}
	r := reader{b: body[1:]}
	id := r.str("NodeID", maxNodeIDLen)
	if r.err != nil {
		return "", r.err
	}
	if id == "" || len(r.b) != 0 {
		return "", fmt.Errorf("leave intent: empty node ID or %d trailing bytes", len(r.b))
	}
	return id, nil
}
