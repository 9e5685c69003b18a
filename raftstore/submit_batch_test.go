package raftstore

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"fusebox/internal/testwait"
	"fusebox/raftstore/state"
)

// gate is a synchronous hook for the submit batcher: every batch blocks in
// it until released, and the sizes are recorded in order.
type gate struct {
	mu      sync.Mutex
	sizes   []int
	release chan struct{}
}

func (g *gate) hook(n int) {
	g.mu.Lock()
	g.sizes = append(g.sizes, n)
	g.mu.Unlock()
	<-g.release
}

func (g *gate) seen() []int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.sizes)
}

// newBatchStore is a one-node store with the shard count and map set, whose
// batcher blocks every batch in the returned gate.
func newBatchStore(t *testing.T) (*Store, *gate) {
	t.Helper()
	s, _ := newTaskStore(t)
	g := &gate{release: make(chan struct{})}
	s.submits.mu.Lock()
	s.submits.testHookSend = g.hook
	s.submits.mu.Unlock()
	return s, g
}

type submitResult struct {
	out []state.SubmitOutcome
	idx uint64
	err error
}

// submitAsync submits one task in the background.
func submitAsync(t *testing.T, s *Store, nt state.NewTask, requestID string) <-chan submitResult {
	ch := make(chan submitResult, 1)
	go func() {
		out, idx, err := s.SubmitTasks(t.Context(), state.SubmitTasksCommand{CommandMeta: state.CommandMeta{RequestID: requestID}, Tasks: []state.NewTask{nt}})
		ch <- submitResult{out, idx, err}
	}()
	return ch
}

func (s *Store) queuedSubmits() int {
	s.submits.mu.Lock()
	defer s.submits.mu.Unlock()
	return len(s.submits.queue)
}

// fillInFlight starts submits until every flush slot holds a blocked batch.
func fillInFlight(t *testing.T, s *Store, g *gate) []<-chan submitResult {
	t.Helper()
	var chs []<-chan submitResult
	for i := range submitBatchesInFlight {
		chs = append(chs, submitAsync(t, s, newTaskFor("", "ns", fmt.Sprint("inflight-", i), ""), ""))
		testwait.For(t, 10*time.Second, "the batch to reach the gate", func() bool { return len(g.seen()) == i+1 })
	}
	return chs
}

func TestSingleSubmitsCoalesceWhileABatchIsInFlight(t *testing.T) {
	s, g := newBatchStore(t)
	first := fillInFlight(t, s, g)
	const queued = 5
	var later []<-chan submitResult
	for i := range queued {
		later = append(later, submitAsync(t, s, newTaskFor("", "ns", fmt.Sprint("wf-", i), ""), ""))
	}
	testwait.For(t, 10*time.Second, "the later submits to queue", func() bool { return s.queuedSubmits() == queued })
	close(g.release)

	ids := map[string]bool{}
	var idx uint64
	for i, ch := range append(first, later...) {
		r := <-ch
		if r.err != nil || len(r.out) != 1 || r.out[0].Outcome != state.SubmitAccepted {
			t.Fatalf("submit %d = %+v, %v", i, r.out, r.err)
		}
		if ids[r.out[0].TaskID] {
			t.Fatalf("task id %s answered twice", r.out[0].TaskID)
		}
		ids[r.out[0].TaskID] = true
		if _, ok := s.Reader().Task(r.out[0].TaskID); !ok {
			t.Fatalf("task %s not in the state", r.out[0].TaskID)
		}
		if i >= submitBatchesInFlight {
			if idx != 0 && r.idx != idx {
				t.Fatalf("coalesced submits answered from raft indexes %d and %d", idx, r.idx)
			}
			idx = r.idx
		}
	}
	want := append(slices.Repeat([]int{1}, submitBatchesInFlight), queued)
	if got := g.seen(); !slices.Equal(got, want) {
		t.Fatalf("batch sizes = %v, want %v", got, want)
	}
	if n := testutil.CollectAndCount(s.metrics.submitBatch); n != 1 {
		t.Fatalf("coalesced-tasks histogram has %d series", n)
	}
	// Every submit's queue wait is observed, and every batch's write; the
	// queued ones waited for as long as the first batches were held.
	waits, waited := groupCommitSamples(t, s, "submit", "wait")
	writes, _ := groupCommitSamples(t, s, "submit", "write")
	if waits != submitBatchesInFlight+queued || writes != submitBatchesInFlight+1 {
		t.Fatalf("group-commit samples: %d waits, %d writes; want %d and %d", waits, writes, submitBatchesInFlight+queued, submitBatchesInFlight+1)
	}
	if waited <= 0 {
		t.Fatalf("queued submits waited %v s in all", waited)
	}
}

// groupCommitSamples is the sample count and sum of one series of
// fusebox_raft_group_commit_seconds.
func groupCommitSamples(t *testing.T, s *Store, batcher, phase string) (uint64, float64) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(s.metrics.groupCommit)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["batcher"] == batcher && labels["phase"] == phase {
				return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
			}
		}
	}
	return 0, 0
}

func TestCoalescedSubmitRefusalReachesOnlyItsCaller(t *testing.T) {
	s, g := newBatchStore(t)
	first := fillInFlight(t, s, g)
	// Two tasks with one explicit id pass local validation; only the
	// replicated state can refuse the second.
	a := newTaskFor("0000000000000001aaaaaaaaaaaaaaaa", "ns", "a", "")
	b := newTaskFor("0000000000000001aaaaaaaaaaaaaaaa", "ns", "b", "")
	c := newTaskFor("", "ns", "c", "")
	// Two submits with one request_id: the second answers with the first.
	d := newTaskFor("", "ns", "d", "same-key")
	e := newTaskFor("", "ns", "e", "same-key")
	chA := submitAsync(t, s, a, "")
	testwait.For(t, 10*time.Second, "a to queue", func() bool { return s.queuedSubmits() == 1 })
	chB := submitAsync(t, s, b, "")
	testwait.For(t, 10*time.Second, "b to queue", func() bool { return s.queuedSubmits() == 2 })
	chC, chD := submitAsync(t, s, c, ""), submitAsync(t, s, d, "")
	testwait.For(t, 10*time.Second, "c, d to queue", func() bool { return s.queuedSubmits() == 4 })
	chE := submitAsync(t, s, e, "")
	testwait.For(t, 10*time.Second, "e to queue", func() bool { return s.queuedSubmits() == 5 })
	close(g.release)
	for _, ch := range first {
		if r := <-ch; r.err != nil {
			t.Fatal(r.err)
		}
	}
	rA, rB, rC, rD, rE := <-chA, <-chB, <-chC, <-chD, <-chE
	if rA.err != nil || rA.out[0].TaskID != a.ID || rA.out[0].Outcome != state.SubmitAccepted {
		t.Fatalf("a = %+v, %v", rA.out, rA.err)
	}
	var e1 *state.Error
	if !errors.As(rB.err, &e1) || e1.Code != state.CodeConflict || e1.Field != "tasks[0].id" {
		t.Fatalf("b: error = %#v, want a conflict on tasks[0].id", rB.err)
	}
	if rC.err != nil || rC.out[0].Outcome != state.SubmitAccepted {
		t.Fatalf("c = %+v, %v", rC.out, rC.err)
	}
	if rD.err != nil || rE.err != nil || rD.out[0].Outcome != state.SubmitAccepted || rE.out[0].Outcome != state.SubmitDuplicate || rE.out[0].TaskID != rD.out[0].TaskID {
		t.Fatalf("d = %+v, %v; e = %+v, %v", rD.out, rD.err, rE.out, rE.err)
	}
	if got, want := g.seen(), append(slices.Repeat([]int{1}, submitBatchesInFlight), 5); !slices.Equal(got, want) {
		t.Fatalf("batch sizes = %v, want %v (the refused batch is retried task by task, outside the batcher)", got, want)
	}
}

func TestSubmitWithRequestIDIsNeverCoalesced(t *testing.T) {
	s, g := newBatchStore(t)
	first := fillInFlight(t, s, g)
	// Every flush slot is blocked, yet a write that names its request id
	// commits on its own, and a retry of it applies once.
	nt := newTaskFor("", "ns", "alone", "")
	r := <-submitAsync(t, s, nt, "client-request-1")
	if r.err != nil || r.out[0].Outcome != state.SubmitAccepted {
		t.Fatalf("submit = %+v, %v", r.out, r.err)
	}
	nt.ID = r.out[0].TaskID // a retry carries what the first attempt sent
	again := <-submitAsync(t, s, nt, "client-request-1")
	if again.err != nil || !slices.Equal(again.out, r.out) || again.idx != r.idx {
		t.Fatalf("retry = %+v @%d, %v; first %+v @%d", again.out, again.idx, again.err, r.out, r.idx)
	}
	close(g.release)
	for _, ch := range first {
		if r := <-ch; r.err != nil {
			t.Fatal(r.err)
		}
	}
}

func TestSubmitBatcherCloseFailsQueuedSubmits(t *testing.T) {
	s, g := newBatchStore(t)
	first := fillInFlight(t, s, g)
	queued := []<-chan submitResult{
		submitAsync(t, s, newTaskFor("", "ns", "q1", ""), ""),
		submitAsync(t, s, newTaskFor("", "ns", "q2", ""), ""),
	}
	testwait.For(t, 10*time.Second, "two submits to queue", func() bool { return s.queuedSubmits() == 2 })
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		s.submits.close()
	}()
	for _, ch := range queued {
		if r := <-ch; !errors.Is(r.err, state.ErrUnavailable) {
			t.Fatalf("queued submit after close: %+v, %v", r.out, r.err)
		}
	}
	if r := <-submitAsync(t, s, newTaskFor("", "ns", "late", ""), ""); !errors.Is(r.err, state.ErrUnavailable) {
		t.Fatalf("submit after close: %+v, %v", r.out, r.err)
	}
	select {
	case <-closed:
		t.Fatal("close returned while batches were still in flight")
	default:
	}
	close(g.release)
	<-closed
	for _, ch := range first {
		if r := <-ch; r.err != nil {
			t.Fatalf("in-flight batch: %v", r.err)
		}
	}
}
