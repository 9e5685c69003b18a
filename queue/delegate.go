package queue

import (
	"context"
	"errors"

	"fusebox/breakerpool"
	"fusebox/transport"
)

// ErrNotDelegated is wrapped by a Delegator's Call when the peer made no
// call: its own breaker refused it, it could not be reached, it refused the
// request. The task is then handled as the refusal of this node's breaker
// (blocked: no attempt counted).
var ErrNotDelegated = errors.New("queue: call not made through the peer")

// Delegator makes the calls this node's own breaker refuses through a peer
// whose calls to the destination pass (hintpolicy's DelegateVia decides
// when; node/delegate.go makes the call through the peer's API, and the
// peer calls the destination through its own breaker). It is how one node
// whose egress to a destination is broken still delivers its shards' tasks
// there (hintpolicy/DESIGN.md, "Calls through a peer").
type Delegator interface {
	// Via returns the peer to make k's refused calls through, if any.
	Via(k breakerpool.Key) (peer string, ok bool)
	// Call makes r through peer and returns the destination's answer as
	// the executor would (the same Result, error pairs). An error wrapping
	// ErrNotDelegated means the peer made no call.
	Call(ctx context.Context, peer string, k breakerpool.Key, r transport.Request) (transport.Result, error)
}

// delegated makes c through the peer the Delegator names, when there is
// one: after this node's breaker refused it (prev is the refusal), or after
// this node's own call failed at its egress (prev is that failure: the
// breaker's probe while a delegation lasts, whose task would otherwise back
// off after every probe this node spends on its own egress). It returns
// what the call through the peer returned, or prev when there is no peer
// or the peer made no call. The call takes a rate token as any call does
// (Execute), so calls through a peer keep to this node's limits. The
// breaker is not fed: the answer is the peer's egress's, not this node's.
func (q *Queue) delegated(c *call, prev error) error {
	via, ok := q.delegate.Via(c.g.key)
	if !ok {
		return prev
	}
	sh := c.it.sh
	if !c.gated { // this node's own call took the token: wait for another
		if err := c.g.acquireToken(sh.ctx, q.closingCh); err != nil {
			return prev
		}
		c.gated = true
	}
	prevCalled, prevRes, prevXerr, itCalled := c.called, c.res, c.xerr, c.it.called
	c.via, c.called = via, false
	err := q.guarded(sh.ctx, c)
	switch {
	case c.called && errors.Is(err, ErrNotDelegated), !c.called && prevCalled:
		// No call through the peer: this node's own answer (a refusal or
		// its failed call) stands.
		c.called, c.res, c.xerr, c.it.called = prevCalled, prevRes, prevXerr, itCalled
		return prev
	}
	return err
}
