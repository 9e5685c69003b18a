package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"fusebox/api"
	"fusebox/breakerpool"
	"fusebox/hintpolicy"
	"fusebox/queue"
	"fusebox/transport"
)

// delegation makes the calls this node's own open breaker refuses through a
// peer whose calls to the destination pass (queue.Delegator), and the calls
// peers ask this node to make for them (api.CallDelegate). The hint policy
// decides when (hintpolicy/delegate.go); hintpolicy/DESIGN.md, "Calls
// through a peer", has the reasoning.
//
// A call made for a peer goes through this node's own breaker for the key
// (so a destination that is down for this node too is protected, and its
// failures open this breaker and are gossiped as any), the allowlist
// (callbacks) or the endpoint registry (Nexus: the URL is this node's
// replica's, whatever the peer sent), and the executor's dial policy.
// Nothing is written: the owner records the result under its own epoch.
type delegation struct {
	n      *Node
	exec   *transport.Executor
	policy *transport.Policy
	res    queue.Resolver
	sent   *prometheus.CounterVec
	served *prometheus.CounterVec
}

// Results of delegated calls, the result label of
// fusebox_delegated_calls_total.
const (
	delegateMade            = "made"             // the peer (sent) or this node (served) made the call
	delegateNotMade         = "not_made"         // sent: the peer answered that it made no call
	delegateUnreachable     = "unreachable"      // sent: the peer's API did not answer (down, older build, refused)
	delegateBreakerOpen     = "breaker_open"     // served: this node's own breaker refused it
	delegateInvalid         = "invalid"          // served: the request did not validate
	delegateNotAllowed      = "not_allowed"      // served: the allowlist refuses the callback's URL
	delegateUnknownEndpoint = "unknown_endpoint" // served: no such Nexus endpoint in this replica
)

// delegateSlack is added to the call's own timeout for the round trip to
// the peer.
const delegateSlack = 5 * time.Second

func newDelegation(n *Node, exec *transport.Executor, policy *transport.Policy, res queue.Resolver) (*delegation, error) {
	d := &delegation{n: n, exec: exec, policy: policy, res: res,
		sent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fusebox_delegated_calls_total",
			Help: "Calls made through a peer because this node's calls to the destination fail where the peer's pass (side sent), and calls made for a peer (side served), by result.",
		}, []string{"side", "result"}),
	}
	d.served = d.sent
	for _, r := range []string{delegateMade, delegateNotMade, delegateUnreachable} {
		d.sent.WithLabelValues("sent", r)
	}
	for _, r := range []string{delegateMade, delegateBreakerOpen, delegateInvalid, delegateNotAllowed, delegateUnknownEndpoint} {
		d.served.WithLabelValues("served", r)
	}
	if err := n.reg.Register(d.sent); err != nil {
		return nil, err
	}
	return d, nil
}

// Via is queue.Delegator's: the hint policy's verdict, unless
// fusebox.breaker.callThroughPeer is off for the destination.
func (d *delegation) Via(k breakerpool.Key) (string, bool) {
	p := d.n.hintFwd.p.Load()
	if p == nil || !d.n.config.Current().CallThroughPeer(k.NamespaceID, k.Destination) {
		return "", false
	}
	return p.DelegateVia(k)
}

// Call is queue.Delegator's: r made by peer, whose answer is rebuilt as the
// executor's (Result, error). Its outcome goes back to the hint policy: an
// answer from the destination keeps the delegation, a failure or refusal
// at the peer or an unreachable peer ends it, a call aborted here says
// nothing.
func (d *delegation) Call(ctx context.Context, peer string, k breakerpool.Key, r transport.Request) (transport.Result, error) {
	res, outcome, err := d.call(ctx, peer, k, r)
	if p := d.n.hintFwd.p.Load(); p != nil && outcome != noOutcome {
		p.DelegateOutcome(k, peer, outcome)
	}
	return res, err
}

// noOutcome: the call says nothing of the peer or the destination (it was
// aborted here), so the hint policy is not told.
const noOutcome hintpolicy.DelegateResult = -1

func (d *delegation) call(ctx context.Context, peer string, k breakerpool.Key, r transport.Request) (transport.Result, hintpolicy.DelegateResult, error) {
	m, ok := d.n.members.Member(peer)
	if !ok || m.Meta.HTTPAddr == "" {
		d.sent.WithLabelValues("sent", delegateUnreachable).Inc()
		return notDelegated("peer %s is not a member with an API address", peer)
	}
	raw, err := transport.EncodeRequest(&r)
	if err != nil {
		return transport.Result{Outcome: transport.OutcomeAborted}, noOutcome, fmt.Errorf("%w: encoding the request: %v", queue.ErrNotDelegated, err)
	}
	timeout := r.Timeout
	if timeout <= 0 {
		timeout = transport.DefaultTimeout
	}
	cctx, cancel := context.WithTimeout(ctx, timeout+delegateSlack)
	defer cancel()
	ans, err := d.n.peerClient(m.Meta.HTTPAddr).WithTimeout(timeout+delegateSlack).Delegate(cctx, api.DelegateRequest{
		Namespace: k.NamespaceID, Destination: k.Destination, Request: raw, Deadline: r.Deadline, MaxOutput: r.MaxOutput,
	})
	switch {
	case err != nil && ctx.Err() != nil:
		return transport.Result{Outcome: transport.OutcomeAborted, Message: ctx.Err().Error()}, noOutcome, ctx.Err()
	case err != nil:
		// Not answered: the call may or may not have been made (a timeout
		// after the peer called). As any unanswered call, the task is
		// tried again later: at least once, as always.
		d.sent.WithLabelValues("sent", delegateUnreachable).Inc()
		return notDelegated("peer %s: %v", peer, err)
	case !ans.Made:
		d.sent.WithLabelValues("sent", delegateNotMade).Inc()
		res, outcome, err := notDelegated("peer %s made no call: %s: %s", peer, ans.NotMade, ans.Message)
		if ans.NotMade == delegateBreakerOpen {
			outcome = hintpolicy.DelegateDown // failing for the peer too
		}
		return res, outcome, err
	}
	d.sent.WithLabelValues("sent", delegateMade).Inc()
	d.n.log.Debug("call made through a peer", "key", k.String(), "via", peer, "outcome", ans.Outcome, "status", ans.Status)
	res := transport.Result{Status: ans.Status, OperationID: ans.OperationID, Output: ans.Output,
		OutputContentType: ans.OutputContentType, Message: ans.Message}
	switch ans.Outcome {
	case transport.OutcomeSucceeded.String():
		res.Outcome = transport.OutcomeSucceeded
		return res, hintpolicy.DelegateReached, nil
	case transport.OutcomeStarted.String():
		res.Outcome = transport.OutcomeStarted
		return res, hintpolicy.DelegateReached, nil
	case transport.OutcomeFailed.String():
		res.Outcome = transport.OutcomeFailed
		return res, hintpolicy.DelegateReached, &transport.FailedError{Status: ans.Status, Message: ans.Message}
	case transport.OutcomeDown.String():
		// Down for the peer too: not this node's egress. The task backs
		// off as after any failed call; this node's breaker is not fed.
		res.Outcome = transport.OutcomeDown
		return res, hintpolicy.DelegateDown, &breakerpool.DestinationDownError{Message: "through peer " + peer + ": " + ans.Message, RetryAfter: ans.RetryAfter}
	case transport.OutcomeAborted.String():
		res.Outcome = transport.OutcomeAborted
		return res, noOutcome, fmt.Errorf("through peer %s: call aborted: %s", peer, ans.Message)
	}
	return notDelegated("peer %s answered an unknown outcome %q", peer, ans.Outcome)
}

// notDelegated is Call's answer when no call was made for a reason of
// the peer's own.
func notDelegated(format string, args ...any) (transport.Result, hintpolicy.DelegateResult, error) {
	msg := fmt.Sprintf(format, args...)
	return transport.Result{Outcome: transport.OutcomeUnknown, Message: msg}, hintpolicy.DelegateUnreachable, fmt.Errorf("%w: %s", queue.ErrNotDelegated, msg)
}

// Delegated is api.CallDelegate's: a peer's call made by this node, through
// its own breaker, allowlist and dial policy.
func (d *delegation) Delegated(ctx context.Context, in api.DelegateRequest) api.DelegateAnswer {
	req, key, refused, why := d.prepare(in)
	if refused != "" {
		d.served.WithLabelValues("served", refused).Inc()
		return api.DelegateAnswer{NotMade: refused, Message: why}
	}
	c := &servedCall{exec: d.exec, req: req}
	err := (&breakerpool.CircuitBreakerExecutable{Breaker: d.n.pool.Get(key), Executable: c}).Execute(ctx)
	if !c.called {
		d.served.WithLabelValues("served", delegateBreakerOpen).Inc()
		msg := "this node's breaker for the destination refused the call"
		if err != nil {
			msg = err.Error()
		}
		return api.DelegateAnswer{NotMade: delegateBreakerOpen, Message: msg}
	}
	d.served.WithLabelValues("served", delegateMade).Inc()
	out := api.DelegateAnswer{Made: true, Outcome: c.res.Outcome.String(), Status: c.res.Status, OperationID: c.res.OperationID,
		Output: c.res.Output, OutputContentType: c.res.OutputContentType, Message: c.res.Message}
	if out.Outcome == transport.OutcomeUnknown.String() {
		out.Outcome = transport.OutcomeAborted.String()
	}
	var down *breakerpool.DestinationDownError
	if errors.As(c.xerr, &down) {
		out.RetryAfter = down.RetryAfter
		if out.Message == "" {
			out.Message = down.Error()
		}
	}
	var failed *transport.FailedError
	if errors.As(c.xerr, &failed) && out.Message == "" {
		out.Message = failed.Message
	}
	return out
}

// prepare validates a peer's call as the queue validates its own before an
// attempt, and derives its breaker key. refused names why it is not made.
func (d *delegation) prepare(in api.DelegateRequest) (req transport.Request, key breakerpool.Key, refused, why string) {
	req, err := transport.DecodeRequest(in.Request)
	if err != nil {
		return req, key, delegateInvalid, "request: " + err.Error()
	}
	switch req.TaskGroup {
	case breakerpool.TaskGroupNexusInvocation, breakerpool.TaskGroupNexusCancelation:
		url, err := d.res.ResolveEndpoint(in.Destination)
		if err != nil {
			return req, key, delegateUnknownEndpoint, err.Error()
		}
		req.URL = url // the registry's, whatever the peer sent
	case breakerpool.TaskGroupCallback:
		if got := transport.BreakerDestination(req.TaskGroup, req.URL); got != in.Destination {
			return req, key, delegateInvalid, fmt.Sprintf("destination: %q is not the callback URL's destination %q", in.Destination, got)
		}
		if err := d.policy.Allowed(in.Namespace, req.URL); err != nil {
			return req, key, delegateNotAllowed, err.Error()
		}
	default:
		return req, key, delegateInvalid, fmt.Sprintf("request.task_group: unknown task group %q", req.TaskGroup)
	}
	req.Namespace, req.Destination, req.Deadline, req.MaxOutput = in.Namespace, in.Destination, in.Deadline, in.MaxOutput
	if req.Timeout <= 0 || req.Timeout > transport.MaxTimeout {
		return req, key, delegateInvalid, fmt.Sprintf("request.timeout: must be in (0, %v], got %v", transport.MaxTimeout, req.Timeout)
	}
	if err := req.Validate(); err != nil {
		return req, key, delegateInvalid, err.Error()
	}
	return req, breakerpool.Key{TaskGroup: req.TaskGroup, NamespaceID: in.Namespace, Destination: in.Destination}, "", ""
}

// servedCall is the executable a served call's breaker runs.
type servedCall struct {
	exec   *transport.Executor
	req    transport.Request
	called bool
	res    transport.Result
	xerr   error
}

func (c *servedCall) Execute(ctx context.Context) error {
	c.called = true
	c.res, c.xerr = c.exec.Execute(ctx, c.req)
	return c.xerr
}

var (
	_ queue.Delegator  = (*delegation)(nil)
	_ api.CallDelegate = (*delegation)(nil)
)
