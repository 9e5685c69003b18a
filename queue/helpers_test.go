package queue_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"fusebox/breakerpool"
	"fusebox/queue"
	"fusebox/queue/queuetest"
	"fusebox/shardmap"
	"fusebox/transport"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// singleOwnerMap returns a committed map (version v) giving every shard to
// owner at epoch.
func singleOwnerMap(t testing.TB, numShards int, owner string, epoch, v uint64) *shardmap.Map {
	t.Helper()
	m, err := shardmap.New(numShards)
	if err != nil {
		t.Fatal(err)
	}
	m.Version = v
	for i := range m.Shards {
		m.Shards[i].Owner, m.Shards[i].Epoch = owner, epoch
	}
	return m
}

type env struct {
	holder *shardmap.Holder
	store  *queuetest.Store
	limits *queuetest.Limits
	pool   *breakerpool.Pool
	reg    *prometheus.Registry
	q      *queue.Queue // the queue start started, if any
}

// newEnv builds a shard map (numShards, all owned by "a" at epoch 1), a
// store, limits and a real breaker pool.
func newEnv(t testing.TB, numShards int, lim queuetest.LimitValues) *env {
	t.Helper()
	h := &shardmap.Holder{}
	if _, err := h.Store(singleOwnerMap(t, numShards, "a", 1, 1)); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	pool, err := breakerpool.New(breakerpool.Config{IdleTTL: -1, DisableJitter: true}, nil, reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	pool.Start()
	t.Cleanup(pool.Close)
	return &env{holder: h, store: queuetest.NewStore(h), limits: queuetest.NewLimits(lim), pool: pool, reg: reg}
}

// start builds and starts a queue for node "a"; it is closed at cleanup.
func (e *env) start(t testing.TB, cfg queue.Config, exec queue.Executor, res queue.Resolver) *queue.Queue {
	t.Helper()
	e.q = e.startNode(t, "a", cfg, exec, res, e.reg)
	return e.q
}

func (e *env) startNode(t testing.TB, node string, cfg queue.Config, exec queue.Executor, res queue.Resolver, reg prometheus.Registerer) *queue.Queue {
	t.Helper()
	d := e.deps(node, exec)
	d.Resolver, d.Registerer = res, reg
	return launch(t, cfg, d)
}

// deps are a queue's dependencies on e for node, with exec.
func (e *env) deps(node string, exec queue.Executor) queue.Deps {
	return queue.Deps{
		Store: e.store, Ownership: queuetest.HolderOwnership(e.holder, node), Limits: e.limits,
		Breakers: queue.PoolBreakers(e.pool), Executor: exec, Registerer: e.reg,
	}
}

// launch builds and starts a queue; it is closed at cleanup.
func launch(t testing.TB, cfg queue.Config, d queue.Deps) *queue.Queue {
	t.Helper()
	q, err := queue.New(cfg, d)
	if err != nil {
		t.Fatal(err)
	}
	q.Start()
	t.Cleanup(func() { _ = q.Close() })
	return q
}

// callback returns a callback task to dest whose URL is url.
func callback(id string, shard int, dest, url string) queue.Task {
	return queue.Task{
		ID: id, Shard: shard, NamespaceID: "ns", WorkflowID: "wf-" + id,
		TaskGroup: breakerpool.TaskGroupCallback, Destination: dest,
		Request: stored(callbackRequest(url)),
	}
}

func callbackRequest(url string) transport.Request {
	return transport.Request{URL: url, Body: []byte(`{"ok":true}`), ContentType: "application/json"}
}

// stored encodes req as a store holds a task's request (JSON).
func stored(req transport.Request) json.RawMessage {
	b, err := json.Marshal(req)
	if err != nil {
		panic(err)
	}
	return b
}

func callbacks(n, shards int, prefix, dest string) []queue.Task {
	out := make([]queue.Task, n)
	for i := range out {
		out[i] = callback(fmt.Sprintf("%s-%03d", prefix, i), i%shards, dest, "http://127.0.0.1:9/cb")
	}
	return out
}

func (e *env) add(t testing.TB, tasks ...queue.Task) {
	t.Helper()
	if err := e.store.Add(tasks...); err != nil {
		t.Fatal(err)
	}
}

func (e *env) allStatus(ids []queue.Task, st string) bool {
	for _, t := range ids {
		if got, _ := e.store.Task(t.ID); got.Status != st {
			return false
		}
	}
	return true
}

// allBlocked reports whether every task has been refused by its breaker n
// times (Blocked == n).
func (e *env) allBlocked(ids []queue.Task, n int) bool {
	for _, t := range ids {
		if got, _ := e.store.Task(t.ID); got.Blocked != n {
			return false
		}
	}
	return true
}

// fakeExec is an in-process Executor that records calls and concurrency.
// With hold set, calls block until release is closed or their ctx ends.
type fakeExec struct {
	mu       sync.Mutex
	calls    []call
	inflight int
	peak     int
	hold     bool
	release  chan struct{}
	answer   func(transport.Request) (transport.Result, error)
}

type call struct {
	req transport.Request
	at  time.Time
}

func newFakeExec(hold bool) *fakeExec {
	return &fakeExec{hold: hold, release: make(chan struct{})}
}

func (f *fakeExec) Execute(ctx context.Context, r transport.Request) (transport.Result, error) {
	f.mu.Lock()
	f.calls = append(f.calls, call{r, time.Now()})
	f.inflight++
	f.peak = max(f.peak, f.inflight)
	answer := f.answer
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.inflight--
		f.mu.Unlock()
	}()
	if f.hold {
		select {
		case <-f.release:
		case <-ctx.Done():
			return transport.Result{Outcome: transport.OutcomeAborted, Message: ctx.Err().Error()}, fmt.Errorf("aborted: %w", ctx.Err())
		}
	}
	if answer != nil {
		return answer(r)
	}
	return transport.Result{Outcome: transport.OutcomeSucceeded, Status: 200}, nil
}

func (f *fakeExec) stats() (calls, inflight, peak int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls), f.inflight, f.peak
}

func (f *fakeExec) callTimes() []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]time.Time, len(f.calls))
	for i, c := range f.calls {
		out[i] = c.at
	}
	return out
}

// metric returns the value of the series name{labels} in reg (0 if absent).
func metric(t testing.TB, reg prometheus.Gatherer, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for k, v := range labels {
				found := false
				for _, lp := range m.GetLabel() {
					if lp.GetName() == k && lp.GetValue() == v {
						found = true
					}
				}
				if !found {
					continue next
				}
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return 0
}

// fastCfg is a Config for tests: short retry and idle periods.
func fastCfg() queue.Config {
	return queue.Config{NodeID: "a", RejectRetry: 20 * time.Millisecond, DrainTimeout: 5 * time.Second}
}

func key(dest string) breakerpool.Key {
	return breakerpool.Key{TaskGroup: breakerpool.TaskGroupCallback, NamespaceID: "ns", Destination: dest}
}
