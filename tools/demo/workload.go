package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"fusebox/api"
	"fusebox/breakerpool"
	"fusebox/transport/transporttest"
)

// Names the demo registers: two Nexus endpoints and the namespace of every
// task (so each node has one breaker per destination).
const (
	destHealthy   = "healthy"
	destFlaky     = "flaky"
	demoNamespace = "demo"
)

// workloadTick is how often the workload submits a batch; maxBatch bounds
// one batch (the API's own limit is api.MaxTaskBatchSubmit).
const (
	workloadTick = 200 * time.Millisecond
	maxBatch     = 200
)

// workloadStats are the workload's figures so far.
type workloadStats struct {
	// Submitted counts tasks accepted (or found duplicate after a retry)
	// per destination.
	Submitted map[string]int
	// Overloaded counts tasks a node refused as over its shard backlog;
	// Failed tasks whose batch no node accepted. Neither is resubmitted.
	Overloaded, Failed int
	LastErr            string
}

// workload submits Rate tasks/s for each destination through
// POST /v1/tasks:batch, one batch per tick, round-robin over the nodes
// (the next node if one does not answer). Each task has a request id, so a
// batch retried after an ambiguous failure is not queued twice. One
// goroutine, owned by the workload; stop is its handshake.
type workload struct {
	cl     *cluster
	rate   float64
	dests  []string
	logger *slog.Logger

	mu        sync.Mutex
	submitted map[string]int
	planned   map[string]int // tasks generated so far per destination
	over      int
	failed    int
	lastErr   string
	seq       int

	stopCh chan struct{}
	done   chan struct{}
}

func newWorkload(cl *cluster, rate float64, logger *slog.Logger) *workload {
	return &workload{
		cl: cl, rate: rate, dests: []string{destHealthy, destFlaky}, logger: logger,
		submitted: map[string]int{}, planned: map[string]int{},
	}
}

// start runs the workload until stop. A batch under way when stop comes
// is finished, not cut off (which would leave it unknown whether it was
// queued); each try of it is bounded by apiTimeout.
func (w *workload) start() {
	w.stopCh, w.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(w.done)
		begin := time.Now()
		t := time.NewTicker(workloadTick)
		defer t.Stop()
		for rr := 0; ; rr++ {
			select {
			case <-w.stopCh:
				return
			case <-t.C:
			}
			if batch := w.next(time.Since(begin)); len(batch) > 0 {
				w.submit(context.Background(), rr, batch)
			}
		}
	}()
}

// stop ends the workload and waits for its in-flight batch. Idempotent.
func (w *workload) stop() {
	if w.stopCh == nil {
		return
	}
	select {
	case <-w.stopCh:
	default:
		close(w.stopCh)
	}
	<-w.done
}

// next builds the tasks owed at elapsed: rate × elapsed per destination,
// minus what was already generated, at most one second's worth (a stalled
// submit does not turn into a burst).
func (w *workload) next(elapsed time.Duration) []api.TaskSubmit {
	w.mu.Lock()
	defer w.mu.Unlock()
	var batch []api.TaskSubmit
	for _, d := range w.dests {
		owed := int(w.rate*elapsed.Seconds()) - w.planned[d]
		if max1s := int(w.rate) + 1; owed > max1s {
			w.planned[d] += owed - max1s // skipped: the demo fell behind
			owed = max1s
		}
		for range min(owed, maxBatch/len(w.dests)) {
			w.planned[d]++
			w.seq++
			batch = append(batch, newTask(d, w.seq))
		}
	}
	return batch
}

func newTask(dest string, seq int) api.TaskSubmit {
	s := strconv.Itoa(seq)
	return api.TaskSubmit{
		NamespaceID: demoNamespace,
		WorkflowID:  "wf-" + s, // spread over every shard, hence every node
		TaskGroup:   breakerpool.TaskGroupNexusInvocation,
		Destination: dest,
		RequestID:   "demo-" + s,
		Request: api.TaskRequest{
			Service:   transporttest.Service,
			Operation: transporttest.OpEcho,
			Input:     json.RawMessage(`{"seq":` + s + `}`),
		},
	}
}

func (w *workload) submit(ctx context.Context, rr int, batch []api.TaskSubmit) {
	var res api.TaskBatchAccepted
	err := w.cl.call(ctx, rr%len(w.cl.clients), func(ctx context.Context, c *api.Client) error {
		var err error
		res, err = c.SubmitTasks(ctx, batch)
		return err
	})
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		w.failed += len(batch)
		w.lastErr = err.Error()
		w.logger.Warn("batch not accepted by any node", "tasks", len(batch), "err", err)
		return
	}
	if len(res.Results) != len(batch) {
		w.failed += len(batch)
		w.lastErr = fmt.Sprintf("batch of %d answered with %d results", len(batch), len(res.Results))
		return
	}
	for i, r := range res.Results {
		switch r.Outcome {
		case api.OutcomeAccepted, api.OutcomeDuplicate:
			w.submitted[batch[i].Destination]++
		case api.OutcomeOverloaded:
			w.over++
		default:
			w.failed++
			w.lastErr = "unknown batch outcome " + strconv.Quote(r.Outcome)
		}
	}
}

func (w *workload) stats() workloadStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := workloadStats{Submitted: map[string]int{}, Overloaded: w.over, Failed: w.failed, LastErr: w.lastErr}
	for k, v := range w.submitted {
		s.Submitted[k] = v
	}
	return s
}
