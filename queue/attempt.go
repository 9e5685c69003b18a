package queue

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"golang.org/x/time/rate"

	"fusebox/breakerpool"
	"fusebox/transport"
)

// errRateRace: the token seen before the breaker admitted the call was gone
// when taken (a limit change in between). The task is released, not failed.
var errRateRace = fmt.Errorf("queue: rate token vanished after breaker admission: %w", breakerpool.ErrNoVerdict)

// errLate: the task's deadline passed, or came within the minimum request
// timeout, while it waited for its rate token; it ends deadline exceeded
// without a call, and the breaker gets no verdict (it learnt nothing about
// the destination).
var errLate = fmt.Errorf("queue: deadline reached while waiting for a rate token: %w", breakerpool.ErrNoVerdict)

// errLost: the shard was lost, or its ownership stopped being current,
// between the admission check and the call; the task is released
// unstarted.
var errLost = fmt.Errorf("queue: shard lost before the call: %w", breakerpool.ErrNoVerdict)

// errClosing: the queue is closing; a task still waiting for a token is
// released unstarted.
var errClosing = errors.New("queue: closing")

// acquireToken takes g's gate and waits, without consuming anything, until
// the rate limiter holds a whole token. The gate stays held (the caller
// gives it back with releaseToken; on an error it is not held): the caller
// asks the breaker next and, only if admitted, takes the token (which
// nobody else can take meanwhile), then releases the gate. So a breaker
// rejection never consumes a token, and an admitted call — a half-open
// probe included — never holds its breaker permit while waiting for the
// rate limiter.
func (g *group) acquireToken(ctx context.Context, closing <-chan struct{}) error {
	select {
	case g.gate <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	case <-closing:
		return errClosing
	}
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		g.mu.Lock()
		changed := g.changed
		g.mu.Unlock()
		now := time.Now()
		tokens := g.lim.TokensAt(now)
		l := g.lim.Limit()
		if l == rate.Inf || tokens >= 1 {
			return nil
		}
		var tc <-chan time.Time
		if l > 0 {
			wait := time.Duration((1-tokens)/float64(l)*float64(time.Second)) + time.Microsecond
			if timer == nil {
				timer = time.NewTimer(wait)
			} else {
				timer.Reset(wait)
			}
			tc = timer.C
		}
		select {
		case <-tc:
		case <-changed:
		case <-ctx.Done():
			<-g.gate
			return ctx.Err()
		case <-closing:
			<-g.gate
			return errClosing
		}
	}
}

// releaseToken gives back the gate acquireToken took.
func (g *group) releaseToken() { <-g.gate }

// process runs one item through the group's pipeline and records its
// disposition. It never panics: a panicking executor is an unexpected error.
func (q *Queue) process(g *group, it *item) {
	sh := it.sh
	if q.closing.Load() || sh.ctx.Err() != nil {
		sh.release(it, 0)
		return
	}
	t := &it.task
	if !knownTaskGroup(t.TaskGroup) {
		sh.finish(it, q.dlq(t, fmt.Sprintf("poison task: unknown task group %q", t.TaskGroup)))
		return
	}
	req := decodeRequest(t)
	if req.TaskGroup == "" {
		req.TaskGroup = t.TaskGroup
	} else if req.TaskGroup != t.TaskGroup {
		sh.finish(it, q.dlq(t, fmt.Sprintf("poison task: request task group %q differs from task group %q", req.TaskGroup, t.TaskGroup)))
		return
	}
	if req.RequestID == "" {
		req.RequestID = t.ID // idempotency key: a redelivery after a shard move carries the same id
	}
	req.Namespace, req.Destination = t.NamespaceID, g.key.Destination // the request series' labels
	req.Deadline = t.Deadline                                         // a start's Operation-Timeout (never stored)
	lim := q.limits.Current()
	if ol, ok := lim.(OutputLimits); ok && t.TaskGroup == breakerpool.TaskGroupNexusInvocation {
		req.MaxOutput = ol.MaxOutputBytes(t.NamespaceID, g.key.Destination) // never stored either
	}
	if req.Timeout == 0 {
		// g.key is KeyOf(t), derived once when the task joined its group.
		req.Timeout = min(lim.RequestTimeout(t.TaskGroup, t.NamespaceID, g.key.Destination), transport.MaxTimeout)
	}
	if r, over := q.pastDeadline(t, &req); over {
		sh.finish(it, r)
		return
	}
	resolved := false
	if isNexus(t.TaskGroup) && q.resolver != nil {
		url, err := q.resolver.ResolveEndpoint(t.Destination)
		switch {
		case errors.Is(err, ErrUnknownEndpoint):
			sh.finish(it, q.terminal(t, StatusFailed, t.Attempts, "unknown nexus endpoint "+fmt.Sprintf("%q", t.Destination), 0))
			return
		case err != nil:
			sh.finish(it, q.unexpected(t, t.Attempts, "resolving endpoint: "+err.Error()))
			return
		}
		req.URL, resolved = url, true
	}
	if err := req.Validate(); err != nil {
		var ve *transport.ValidationError
		if resolved && errors.As(err, &ve) && ve.Field == "url" {
			sh.finish(it, q.terminal(t, StatusFailed, t.Attempts, fmt.Sprintf("endpoint %q: %v", t.Destination, err), 0))
		} else {
			sh.finish(it, q.dlq(t, "poison task: "+err.Error()))
		}
		return
	}
	if q.policy != nil && t.TaskGroup == breakerpool.TaskGroupCallback {
		// A callback's allowlist is checked again at every attempt, so a
		// narrowed list stops tasks accepted under the old one. Such a task
		// is dead-lettered with the reason (no call, no breaker verdict);
		// once the list allows it again, POST /v1/dlq/redrive resumes it.
		// (Endpoint URLs are checked when an operator registers them.)
		if err := q.policy.Allowed(t.NamespaceID, req.URL); err != nil {
			q.m.rejections.WithLabelValues("destination_not_allowed").Inc()
			sh.finish(it, q.dlq(t, err.Error()))
			return
		}
	}
	q.attempt(g, it, req)
}

// attempt: rate gate → breaker → executor, then the disposition.
func (q *Queue) attempt(g *group, it *item, req transport.Request) {
	sh := it.sh
	c := &call{q: q, g: g, it: it, req: req, waitStart: time.Now()}
	if err := g.acquireToken(sh.ctx, q.closingCh); err != nil {
		sh.release(it, 0) // shard lost or closing
		return
	}
	c.gated = true
	if !q.current(sh) {
		// Out of contact with the cluster, or the map this node holds
		// gives the shard to another owner or epoch: it may have lost the
		// shard. No call; the task stays pending (the next owner, or this
		// node once current again, delivers it).
		c.release()
		q.m.rejections.WithLabelValues("stale_ownership").Inc()
		sh.release(it, q.cfg.RejectRetry)
		return
	}
	if !sh.ho.admit() {
		// Handed over for a move (handover.go): no call; the task stays
		// pending for the next owner (or for this node if the move never
		// comes).
		c.release()
		q.m.rejections.WithLabelValues("handover").Inc()
		sh.release(it, 0)
		return
	}
	defer sh.ho.leave() // after the disposition is recorded
	c.cb = breakerpool.CircuitBreakerExecutable{Breaker: q.breakers.Breaker(g.key), Executable: c}
	err := q.guarded(sh.ctx, &c.cb)
	if q.delegate != nil && ((!c.called && breakerpool.IsCircuitBreakerOpen(err)) || (c.called && breakerpool.IsDestinationDown(c.xerr))) {
		err = q.delegated(c, err) // delegate.go
	}
	c.release()
	c.done(err)
}

// call is one attempt's state, one allocation: the executable the breaker
// runs (Execute), the breaker's wrapper of it, and what the call returned.
// (As closures over locals, an attempt cost eight allocations here.)
type call struct {
	q         *Queue
	g         *group
	it        *item
	req       transport.Request
	waitStart time.Time
	gated     bool // holds g's gate (acquireToken)
	cb        breakerpool.CircuitBreakerExecutable

	called bool
	via    string  // the peer this call goes through (delegate.go), or ""
	late   *Result // the deadline failure, when the re-check after the rate wait refused the call
	res    transport.Result
	xerr   error
	perr   *panicError
}

// release gives back the group's gate once.
func (c *call) release() {
	if c.gated {
		c.gated = false
		c.g.releaseToken()
	}
}

// Execute is the call the breaker admitted: it takes the rate token the
// gate kept for it, then calls the destination.
func (c *call) Execute(ctx context.Context) error {
	q, it, t := c.q, c.it, &c.it.task
	// The deadline again, and the timeout cut to what is left now: process
	// checked before the wait for the rate token (acquireToken), which can
	// outlast the time left. Temporal checks right before its call
	// (components/nexusoperations/executors.go executeInvocationTask:
	// callTimeout against MinRequestTimeout). Before the token is taken: a
	// call not made does not spend one.
	if r, over := q.pastDeadline(t, &c.req); over {
		c.release()
		c.late = &r
		return errLate
	}
	start := time.Now()
	ok := c.g.lim.AllowN(start, 1)
	c.release()
	if !ok {
		return errRateRace
	}
	q.m.rateWait.Observe(start.Sub(c.waitStart).Seconds())
	it.calling.Store(true) // before the mark: a flush forgets the marks of calls not calling
	defer it.calling.Store(false)
	if !it.sh.markStarted(it) { // redelivery.go
		// The shard was lost (moved), or its ownership is no longer
		// current, since the admission check: no call.
		return errLost
	}
	c.called = true
	it.called = true
	it.callAt = start.UnixNano()
	if t.Attempts == 0 {
		q.m.firstAttempt.WithLabelValues(t.TaskGroup).Observe(time.Since(t.CreatedAt).Seconds())
	}
	c.g.startCall(start)
	defer c.g.endCall(start) // deferred: a panicking executor must not leave a slot counted busy
	if c.via != "" {
		c.res, c.xerr = q.delegate.Call(ctx, c.via, c.g.key, c.req)
		return c.xerr
	}
	c.res, c.xerr = q.exec.Execute(ctx, c.req)
	return c.xerr
}

// done records the attempt's disposition from the breaker's answer err.
func (c *call) done(err error) {
	q, it, sh, t := c.q, c.it, c.it.sh, &c.it.task
	switch {
	case errors.As(err, &c.perr):
		sh.finish(it, q.unexpected(t, t.Attempts+boolInt(c.called), c.perr.Error()))
	case !c.called && c.late != nil && errors.Is(err, errLate):
		sh.finish(it, *c.late)
	case !c.called && errors.Is(err, errRateRace):
		sh.release(it, q.cfg.RejectRetry)
	case !c.called && errors.Is(err, errLost):
		q.m.rejections.WithLabelValues("stale_ownership").Inc()
		sh.release(it, q.cfg.RejectRetry)
	case !c.called && breakerpool.IsCircuitBreakerOpen(err):
		q.blocked(it)
	case !c.called:
		sh.finish(it, q.unexpected(t, t.Attempts, "breaker: "+err.Error()))
	default:
		if r, ok := q.classify(t, c.res, c.xerr); ok {
			sh.finish(it, r)
		} else {
			sh.release(it, q.cfg.RejectRetry) // aborted: no attempt counted
		}
	}
}

// current reports whether this node's shard map is current enough to call
// destinations for sh, and still gives sh to this node at its epoch
// (always, for an Ownership that cannot tell).
func (q *Queue) current(sh *shard) bool {
	if f, ok := q.own.(FreshOwnership); ok && !f.Fresh() {
		return false
	}
	e, ok := q.own.(EpochOwnership)
	return !ok || e.OwnsAt(sh.id, sh.epoch)
}

// classify turns an executor answer into a result; ok false means release.
func (q *Queue) classify(t *Task, res transport.Result, err error) (Result, bool) {
	attempts := t.Attempts + 1
	if err == nil {
		r := q.terminal(t, StatusSucceeded, attempts, res.Message, res.Status)
		r.OperationID, r.Output = res.OperationID, res.Output
		return r, true
	}
	var failed *transport.FailedError // declared here: a success does not allocate it
	switch {
	case breakerpool.IsDestinationDown(err):
		if q.cfg.MaxAttempts > 0 && attempts >= q.cfg.MaxAttempts {
			return q.terminal(t, StatusFailed, attempts, fmt.Sprintf("gave up after %d attempts: %s", attempts, res.Message), res.Status), true
		}
		q.m.results.WithLabelValues(outcomeRetryDown).Inc()
		return Result{
			TaskID: t.ID, Status: StatusPending, Attempts: attempts, Unexpected: t.Unexpected,
			NextAttemptAt: time.Now().Add(q.retryDelay(t, attempts)),
			Message:       res.Message, HTTPStatus: res.Status,
		}, true
	case errors.As(err, &failed):
		return q.terminal(t, StatusFailed, attempts, failed.Message, failed.Status), true
	case res.Outcome == transport.OutcomeAborted:
		return Result{}, false
	default:
		return q.unexpected(t, attempts, err.Error()), true
	}
}

// blocked handles a breaker rejection: one immediate resubmit, then the
// gentle reschedule. No attempt is counted and no rate token was used.
func (q *Queue) blocked(it *item) {
	t := &it.task
	if it.rel != nil {
		// Released at a close, refused again: the breaker reopened (or
		// guards). Its other tasks wait for their own time again.
		it.sh.endRelease(it.rel, "refused again")
	}
	n := t.Blocked + 1
	if it.resubmitted {
		n++
	}
	if n == 1 {
		it.resubmitted = true
		if q.sched.submit(it) {
			q.m.results.WithLabelValues(outcomeResubmitted).Inc()
			return
		}
		n = 2 // buffer full: take the gentle path now
	}
	q.m.results.WithLabelValues(outcomeRetryBlocked).Inc()
	it.sh.finish(it, Result{
		TaskID: t.ID, Status: StatusPending, Attempts: t.Attempts, Blocked: n, Unexpected: t.Unexpected,
		NextAttemptAt: q.sched.blockedTurn(it.key, time.Now(), q.blockedDelay(it.key, n)),
		Message:       "circuit breaker open", HTTPStatus: t.HTTPStatus,
	})
}

// blockedDelay is how long a task the breaker rejected waits: the gentle
// backoff, or until the breaker admits its next probe if that is later
// (with 20 % spread, so the tasks do not all come due at the probe; that
// part capped at BlockedBackoffMax). A retry before the probe could only be
// rejected again, and each rejection costs a result write to Raft: with
// the gentle 3 s × 1.5ⁿ alone, a dead destination's backlog was rewritten
// every few seconds for the whole open period. It counts from the task's
// turn (scheduler.blockedTurn), not from the refusal.
func (q *Queue) blockedDelay(k breakerpool.Key, n int) time.Duration {
	d := BlockedBackoff(n, rand.Float64())
	if br, ok := q.breakers.Breaker(k).(interface{ OpenRemaining() time.Duration }); ok {
		if r := br.OpenRemaining(); r > 0 {
			d = max(d, min(time.Duration(float64(r)*(1+0.2*rand.Float64())), BlockedBackoffMax))
		}
	}
	return d
}

// terminal builds a final result and records its latency.
func (q *Queue) terminal(t *Task, st string, attempts int, msg string, httpStatus int) Result {
	q.m.results.WithLabelValues(st).Inc()
	q.m.done.WithLabelValues(t.TaskGroup, st).Observe(time.Since(t.CreatedAt).Seconds())
	return Result{TaskID: t.ID, Status: st, Attempts: attempts, Blocked: 0, Unexpected: t.Unexpected, Message: msg, HTTPStatus: httpStatus}
}

func (q *Queue) dlq(t *Task, msg string) Result {
	q.log.Warn("task dead-lettered", "task", t.ID, "shard", t.Shard, "reason", msg)
	return q.terminal(t, StatusDLQ, t.Attempts, msg, t.HTTPStatus)
}

// unexpected counts an unexpected error: retried with the task's retry
// policy, dead-lettered after history.TaskDLQUnexpectedErrorAttempts.
func (q *Queue) unexpected(t *Task, attempts int, msg string) Result {
	u := t.Unexpected + 1
	if u >= q.maxUnexpected() {
		r := q.dlq(t, fmt.Sprintf("too many unexpected errors (%d), last: %s", u, msg))
		r.Attempts, r.Unexpected = attempts, u
		return r
	}
	q.m.results.WithLabelValues(outcomeRetryUnexpected).Inc()
	q.log.Warn("unexpected task error", "task", t.ID, "error", msg, "count", u)
	return Result{
		TaskID: t.ID, Status: StatusPending, Attempts: attempts, Unexpected: u,
		NextAttemptAt: time.Now().Add(RescheduleBackoff(q.cfg.RescheduleBase, u, rand.Float64())), Message: msg, HTTPStatus: t.HTTPStatus,
	}
}

// panicError is a recovered executor panic.
type panicError struct{ v any }

func (p *panicError) Error() string { return fmt.Sprintf("executor panic: %v", p.v) }

// guarded runs e, turning a panic into a *panicError (the breaker has
// already counted it as a failure).
func (q *Queue) guarded(ctx context.Context, e breakerpool.Executable) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &panicError{v}
		}
	}()
	return e.Execute(ctx)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
