package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"fusebox/api"
	"fusebox/breakerpool"
	"fusebox/transport/transporttest"
)

// submitTimeout bounds one logical submit across all its retries.
const submitTimeout = 20 * time.Second

// TaskGen builds task i of a load and names the Dest it goes to. The load
// sets RequestID itself.
type TaskGen func(i int) (api.TaskSubmit, *Dest)

// AcceptedTask is a task the cluster answered 202 for.
type AcceptedTask struct {
	ID        string
	Shard     int
	RequestID string // the submit's idempotency key
	Group     string
	Dest      *Dest
	Via       string // node that acknowledged it
	At        time.Time
}

// TaskLoad submits a stream of tasks round-robin through the live nodes
// of a cluster and records which ones were accepted. Every submit carries a
// request id (<prefix><i>), so retrying an ambiguous attempt — a timeout, a
// node killed mid-call, a 503 — is safe: the cluster answers a repeat with
// the original task. Retries go to the next live node with backoff for up
// to submitTimeout. A load registers itself with its cluster, so
// CheckInvariants verifies its tasks.
type TaskLoad struct {
	c      *Cluster
	prefix string
	gen    TaskGen

	mu        sync.Mutex
	next      int
	rr        int
	accepted  []AcceptedTask
	attempted map[string]bool // request ids sent at least once
	notAcked  int
	retries   int
	badDup    []string // first attempt answered "duplicate": a request id reused?
	refused   []string // answered with a non-retryable error (a 4xx for a valid task)
	lastErr   error
	// failedWith, when set, is the only HTTP status a task may end failed
	// with (AllowFailedWith); else every task must succeed.
	failedWith int

	stop chan struct{}
	wg   sync.WaitGroup
}

// NewTaskLoad prepares a load whose request ids start with "<name>-"; it
// is stopped when the test ends at the latest.
func NewTaskLoad(c *Cluster, name string, gen TaskGen) *TaskLoad {
	l := &TaskLoad{c: c, prefix: name + "-", gen: gen, attempted: map[string]bool{}, stop: make(chan struct{})}
	c.loads = append(c.loads, l)
	c.t.Cleanup(l.Stop) // a failed test must not leave submitters running
	return l
}

// nexusTask is a start of fusebox-test/echo through endpoint ep.
func nexusTask(ns, wf, ep string, i int) api.TaskSubmit {
	return api.TaskSubmit{
		NamespaceID: ns, WorkflowID: wf, TaskGroup: breakerpool.TaskGroupNexusInvocation, Destination: ep,
		Request: api.TaskRequest{Service: transporttest.Service, Operation: transporttest.OpEcho,
			Input: json.RawMessage(`{"i":` + strconv.Itoa(i) + `}`)},
	}
}

// callbackTask is a raw JSON POST to url.
func callbackTask(ns, wf, url string, i int) api.TaskSubmit {
	return api.TaskSubmit{
		NamespaceID: ns, WorkflowID: wf, TaskGroup: breakerpool.TaskGroupCallback, Destination: url,
		Request: api.TaskRequest{Body: []byte(`{"i":` + strconv.Itoa(i) + `}`), ContentType: "application/json"},
	}
}

// AllowFailedWith lets the load's tasks end failed when the destination's
// last answer to them was status (a non-retryable answer its front
// recorded for the task): a destination that answered 400 for a while.
// Check verifies each such task against the front's calls.
func (l *TaskLoad) AllowFailedWith(status int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.failedWith = status
}

// Run submits n tasks (n ≤ 0: until Stop) from workers goroutines, each
// pausing interval between its submits. The goroutines are the load's;
// Wait or Stop ends them.
func (l *TaskLoad) Run(n, workers int, interval time.Duration) {
	for range workers {
		l.wg.Go(func() {
			tick := time.NewTicker(interval)
			defer tick.Stop()
			for {
				i, ok := l.claim(n)
				if !ok {
					return
				}
				l.submit(i)
				select {
				case <-l.stop:
					return
				case <-tick.C:
				}
			}
		})
	}
}

// Wait waits until Run has submitted its n tasks.
func (l *TaskLoad) Wait() { l.wg.Wait() }

// Stop ends Run (the submit under way finishes or gives up) and waits.
func (l *TaskLoad) Stop() {
	l.mu.Lock()
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	l.mu.Unlock()
	l.wg.Wait()
}

func (l *TaskLoad) claim(n int) (int, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-l.stop:
		return 0, false
	default:
	}
	if n > 0 && l.next >= n {
		return 0, false
	}
	l.next++
	return l.next - 1, true
}

func (l *TaskLoad) submit(i int) bool {
	ts, dest := l.gen(i)
	ts.RequestID = l.prefix + strconv.Itoa(i)
	deadline := time.Now().Add(submitTimeout)
	backoff := 20 * time.Millisecond
	for attempt := 1; ; attempt++ {
		p, err := l.pick()
		var acc api.TaskAccepted
		if err == nil {
			l.mu.Lock()
			l.attempted[ts.RequestID] = true
			l.mu.Unlock()
			acc, err = p.Client().SubmitTask(context.Background(), ts)
		}
		if err == nil {
			l.mu.Lock()
			if acc.Duplicate && attempt == 1 {
				l.badDup = append(l.badDup, ts.RequestID)
			}
			l.accepted = append(l.accepted, AcceptedTask{ID: acc.TaskID, Shard: acc.Shard, RequestID: ts.RequestID,
				Group: ts.TaskGroup, Dest: dest, Via: p.Name(), At: time.Now()})
			l.mu.Unlock()
			return true
		}
		if l.retry(err, deadline) {
			select {
			case <-l.stop:
				l.giveUp()
				return false
			case <-time.After(backoff):
			}
			backoff = min(backoff*2, 500*time.Millisecond)
			continue
		}
		l.giveUp()
		return false
	}
}

// SubmitBatch submits the next n tasks in one POST /v1/tasks:batch,
// retrying the whole batch (idempotent) and resubmitting overloaded items.
// It returns how many were accepted.
func (l *TaskLoad) SubmitBatch(n int) int {
	l.mu.Lock()
	first := l.next
	l.next += n
	l.mu.Unlock()
	todo := make([]int, n)
	subs := make([]api.TaskSubmit, n)
	dests := make([]*Dest, n)
	for k := range n {
		todo[k] = k
		subs[k], dests[k] = l.gen(first + k)
		subs[k].RequestID = l.prefix + strconv.Itoa(first+k)
	}
	deadline := time.Now().Add(submitTimeout)
	accepted := 0
	backoff := 20 * time.Millisecond
	for len(todo) > 0 {
		p, err := l.pick()
		var res api.TaskBatchAccepted
		if err == nil {
			batch := make([]api.TaskSubmit, len(todo))
			l.mu.Lock()
			for j, k := range todo {
				batch[j] = subs[k]
				l.attempted[subs[k].RequestID] = true
			}
			l.mu.Unlock()
			res, err = p.Client().SubmitTasks(context.Background(), batch)
			if err == nil && len(res.Results) != len(batch) {
				err = fmt.Errorf("batch of %d answered with %d results", len(batch), len(res.Results))
			}
		}
		if err == nil {
			var again []int
			l.mu.Lock()
			for j, k := range todo {
				r := res.Results[j]
				if r.Outcome == api.OutcomeOverloaded {
					again = append(again, k)
					continue
				}
				l.accepted = append(l.accepted, AcceptedTask{ID: r.TaskID, Shard: r.Shard, RequestID: subs[k].RequestID,
					Group: subs[k].TaskGroup, Dest: dests[k], Via: p.Name(), At: time.Now()})
				accepted++
			}
			l.mu.Unlock()
			todo = again
			if len(todo) == 0 {
				break
			}
			err = fmt.Errorf("%d items overloaded", len(todo))
		}
		if !l.retry(err, deadline) {
			for range todo {
				l.giveUp()
			}
			break
		}
		<-time.After(backoff) // back-off between attempts of one batch
		backoff = min(backoff*2, 500*time.Millisecond)
	}
	return accepted
}

// pick returns the next live node, round-robin.
func (l *TaskLoad) pick() (*Process, error) {
	live := l.c.Live()
	if len(live) == 0 {
		return nil, errors.New("no live node")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.rr++
	return live[l.rr%len(live)], nil
}

// retry records err and reports whether another attempt is due.
func (l *TaskLoad) retry(err error, deadline time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lastErr = err
	if !retryable(err) {
		l.refused = append(l.refused, err.Error())
		return false
	}
	if time.Now().After(deadline) {
		return false
	}
	l.retries++
	return true
}

func (l *TaskLoad) giveUp() {
	l.mu.Lock()
	l.notAcked++
	l.mu.Unlock()
}

// Accepted returns the accepted tasks so far, in acknowledgement order.
func (l *TaskLoad) Accepted() []AcceptedTask {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]AcceptedTask(nil), l.accepted...)
}

// TaskLoadStats are a load's submit figures. Refused lists the
// non-retryable answers (every task a load sends is valid, so each is a
// finding); NotAcked counts them and the submits that ran out of time.
type TaskLoadStats struct {
	Attempted, Accepted, NotAcked, Retries int
	Refused                                []string
	LastErr                                error
}

func (s TaskLoadStats) String() string {
	return fmt.Sprintf("tasks attempted %d, accepted %d, not acknowledged %d (refused %d), retries %d", s.Attempted, s.Accepted, s.NotAcked, len(s.Refused), s.Retries)
}

// Stats returns the submit figures so far.
func (l *TaskLoad) Stats() TaskLoadStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return TaskLoadStats{Attempted: len(l.attempted), Accepted: len(l.accepted), NotAcked: l.notAcked, Retries: l.retries,
		Refused: append([]string(nil), l.refused...), LastErr: l.lastErr}
}

// listAllTasks pages through GET /v1/tasks on p and returns the tasks whose
// request id starts with prefix, by id.
func listAllTasks(p *Process, prefix string) (map[string]api.Task, error) {
	out := map[string]api.Task{}
	after := ""
	for range 10_000 {
		l, err := p.Client().Tasks(context.Background(), api.TaskListQuery{After: after, Limit: api.MaxTaskListLimit})
		if err != nil {
			return nil, fmt.Errorf("%s: GET /v1/tasks: %w", p.Name(), err)
		}
		for _, t := range l.Tasks {
			if strings.HasPrefix(t.RequestID, prefix) {
				out[t.ID] = t
			}
		}
		if l.Next == "" {
			return out, nil
		}
		after = l.Next
	}
	return nil, fmt.Errorf("%s: GET /v1/tasks: more than 10000 pages", p.Name())
}

// describeTask renders a task for an error message.
func describeTask(t api.Task) string {
	s := fmt.Sprintf("%s (shard %d, %s → %s, status %s, attempts %d", t.ID, t.Shard, t.TaskGroup, t.Destination, t.Status, t.Attempts)
	if !t.NextAttemptAt.IsZero() {
		s += ", next " + t.NextAttemptAt.Format(time.RFC3339Nano)
	}
	if t.LastAnswer != nil {
		s += fmt.Sprintf(", last answer %d %q", t.LastAnswer.HTTPStatus, t.LastAnswer.Message)
	}
	return s + ")"
}
