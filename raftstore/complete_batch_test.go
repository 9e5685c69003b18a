package raftstore

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"fusebox/internal/testwait"
	"fusebox/raftstore/state"
	"fusebox/shardmap"
)

// completeFixture is a one-node store at log version lv with tasks in every
// shard, whose complete batcher blocks every batch in g.
type completeFixture struct {
	s       *Store
	m       *shardmap.Map
	g       *gate
	byShard map[int][]string // pending task ids by shard
}

func newCompleteFixture(t *testing.T, lv int) *completeFixture {
	t.Helper()
	c := newTestCluster(t, func(cfg *Config) { cfg.LogVersion = lv })
	s := c.add("n1", 1)
	c.start("n1")
	c.leader(10 * time.Second)
	ctx := t.Context()
	if _, err := s.SetShardCount(ctx, state.SetShardCountCommand{Count: taskShards}); err != nil {
		t.Fatal(err)
	}
	m, _, _ := shardmap.Rebalance(mustNewMap(t, taskShards), []string{"n1"}, nil)
	if _, err := s.CommitShardMap(ctx, state.CommitShardMapCommand{Map: m}); err != nil {
		t.Fatal(err)
	}
	var tasks []state.NewTask
	for i := range 32 {
		tasks = append(tasks, newTaskFor("", "ns", fmt.Sprint("wf-", i), ""))
	}
	out, idx, err := s.SubmitTasks(ctx, state.SubmitTasksCommand{Tasks: tasks})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.WaitForApplied(ctx, idx); err != nil {
		t.Fatal(err)
	}
	f := &completeFixture{s: s, m: m, g: &gate{release: make(chan struct{})}, byShard: map[int][]string{}}
	for _, o := range out {
		f.byShard[o.Shard] = append(f.byShard[o.Shard], o.TaskID)
	}
	for sh := range taskShards {
		if len(f.byShard[sh]) < 3 {
			t.Fatalf("shard %d has %d tasks; the test needs 3 in each", sh, len(f.byShard[sh]))
		}
	}
	s.completes.mu.Lock()
	s.completes.testHookSend = f.g.hook
	s.completes.mu.Unlock()
	return f
}

// done is the complete that marks task id of shard succeeded at epoch.
func (f *completeFixture) done(shard int, id string, epoch uint64) state.CompleteTasksCommand {
	return state.CompleteTasksCommand{Shard: shard, Epoch: epoch, Node: "n1",
		Results: []state.TaskResult{{TaskID: id, Status: state.TaskSucceeded, Attempts: 1}}}
}

func (f *completeFixture) epoch(shard int) uint64 { return f.m.Shards[shard].Epoch }

type completeResult struct {
	out state.CompleteOutcome
	err error
}

func completeAsync(t *testing.T, s *Store, c state.CompleteTasksCommand) <-chan completeResult {
	ch := make(chan completeResult, 1)
	go func() {
		out, err := s.CompleteTasks(t.Context(), c)
		ch <- completeResult{out, err}
	}()
	return ch
}

func (s *Store) queuedCompletes() int {
	s.completes.mu.Lock()
	defer s.completes.mu.Unlock()
	return len(s.completes.queue)
}

// fillCompletes starts completes of shard 0 until every flush slot holds a
// blocked batch.
func (f *completeFixture) fillCompletes(t *testing.T) []<-chan completeResult {
	t.Helper()
	var chs []<-chan completeResult
	for i := range completeBatchesInFlight {
		chs = append(chs, completeAsync(t, f.s, f.done(0, f.byShard[0][i], f.epoch(0))))
		testwait.For(t, 10*time.Second, "the batch to reach the gate", func() bool { return len(f.g.seen()) == i+1 })
	}
	return chs
}

// Completes of several shards queued behind the batches in flight go as one
// complete_tasks_multi entry; a section under a stale epoch is refused alone
// (its caller gets the *shardmap.WrongOwnerError) and the others apply.
func TestCompletesOfSeveralShardsCoalesceIntoOneEntry(t *testing.T) {
	f := newCompleteFixture(t, state.LogVersion)
	first := f.fillCompletes(t)
	cmds := []state.CompleteTasksCommand{
		f.done(1, f.byShard[1][0], f.epoch(1)),
		f.done(2, f.byShard[2][0], f.epoch(2)+1), // stale
		f.done(3, f.byShard[3][0], f.epoch(3)),
		f.done(0, f.byShard[0][2], f.epoch(0)),
	}
	var later []<-chan completeResult
	for i, c := range cmds {
		later = append(later, completeAsync(t, f.s, c))
		testwait.For(t, 10*time.Second, "the complete to queue", func() bool { return f.s.queuedCompletes() == i+1 })
	}
	close(f.g.release)
	for _, ch := range first {
		if r := <-ch; r.err != nil || r.out.Applied != 1 {
			t.Fatalf("in-flight complete = %+v, %v", r.out, r.err)
		}
	}
	for i, ch := range later {
		r := <-ch
		id := cmds[i].Results[0].TaskID
		task, _ := f.s.Reader().Task(id) // CompleteTasks waited for the apply
		if cmds[i].Shard == 2 {
			var woe *shardmap.WrongOwnerError
			if !errors.As(r.err, &woe) || woe.Shard != 2 || woe.Owner != "n1" || woe.Epoch != f.epoch(2) {
				t.Fatalf("stale section: %+v, %v; want a WrongOwnerError with the current epoch %d", r.out, r.err, f.epoch(2))
			}
			if task.Status != state.TaskPending {
				t.Fatalf("the stale section's task is %s", task.Status)
			}
			continue
		}
		if r.err != nil || r.out.Applied != 1 || task.Status != state.TaskSucceeded {
			t.Fatalf("complete %d = %+v, %v; task %s", i, r.out, r.err, task.Status)
		}
	}
	if got, want := f.g.seen(), append(slices.Repeat([]int{1}, completeBatchesInFlight), len(cmds)); !slices.Equal(got, want) {
		t.Fatalf("batch sizes = %v, want %v", got, want)
	}
	if got := logTypes(t, f.s); got[state.MsgCompleteTasksMulti] != 1 || got[state.MsgCompleteTasksBin] != completeBatchesInFlight {
		t.Fatalf("the log holds %v; want one complete_tasks_multi and %d complete_tasks_bin", got, completeBatchesInFlight)
	}
	if n := testutil.CollectAndCount(f.s.metrics.completeBatch); n != 1 {
		t.Fatalf("coalesced-shards histogram has %d series", n)
	}
	if waits, _ := groupCommitSamples(t, f.s, "complete", "wait"); waits == 0 {
		t.Fatal("no complete's queue wait was observed")
	}
}

// An entry the FSM refuses as a whole (a shard outside the map, which only
// the replicated state shows) is retried one complete each: only the bad
// complete's caller gets the error.
func TestCoalescedCompleteRefusalReachesOnlyItsCaller(t *testing.T) {
	f := newCompleteFixture(t, state.LogVersion)
	first := f.fillCompletes(t)
	good1 := completeAsync(t, f.s, f.done(1, f.byShard[1][0], f.epoch(1)))
	testwait.For(t, 10*time.Second, "good1 to queue", func() bool { return f.s.queuedCompletes() == 1 })
	bad := completeAsync(t, f.s, f.done(taskShards+3, f.byShard[2][0], 1))
	testwait.For(t, 10*time.Second, "bad to queue", func() bool { return f.s.queuedCompletes() == 2 })
	good2 := completeAsync(t, f.s, f.done(3, f.byShard[3][0], f.epoch(3)))
	testwait.For(t, 10*time.Second, "good2 to queue", func() bool { return f.s.queuedCompletes() == 3 })
	close(f.g.release)
	for _, ch := range first {
		if r := <-ch; r.err != nil {
			t.Fatal(r.err)
		}
	}
	for name, ch := range map[string]<-chan completeResult{"good1": good1, "good2": good2} {
		if r := <-ch; r.err != nil || r.out.Applied != 1 {
			t.Fatalf("%s = %+v, %v", name, r.out, r.err)
		}
	}
	r := <-bad
	var e *state.Error
	if !errors.As(r.err, &e) || e.Code != state.CodeInvalidArgument || e.Field != "shard" {
		t.Fatalf("bad = %+v, %#v; want invalid_argument on shard", r.out, r.err)
	}
	if got, want := f.g.seen(), append(slices.Repeat([]int{1}, completeBatchesInFlight), 3); !slices.Equal(got, want) {
		t.Fatalf("batch sizes = %v, want %v", got, want)
	}
}

// Below LogVersionCompleteMulti the batcher is not used: every complete is
// its own complete_tasks_bin entry, as before.
func TestCompletesGoAloneBelowLogVersionCompleteMulti(t *testing.T) {
	f := newCompleteFixture(t, state.LogVersionCompleteMulti-1)
	var chs []<-chan completeResult
	for sh := range taskShards {
		for _, id := range f.byShard[sh] {
			chs = append(chs, completeAsync(t, f.s, f.done(sh, id, f.epoch(sh))))
		}
	}
	for _, ch := range chs {
		if r := <-ch; r.err != nil || r.out.Applied != 1 {
			t.Fatalf("complete = %+v, %v", r.out, r.err)
		}
	}
	if got := f.g.seen(); len(got) != 0 {
		t.Fatalf("the batcher sent %v below log version %d", got, state.LogVersionCompleteMulti)
	}
	if got := logTypes(t, f.s); got[state.MsgCompleteTasksMulti] != 0 || got[state.MsgCompleteTasksBin] != len(chs) {
		t.Fatalf("the log holds %v; want %d complete_tasks_bin and no complete_tasks_multi", got, len(chs))
	}
}

// A complete that names its request id goes alone, even with every flush
// slot blocked.
func TestCompleteWithRequestIDIsNeverCoalesced(t *testing.T) {
	f := newCompleteFixture(t, state.LogVersion)
	first := f.fillCompletes(t)
	c := f.done(1, f.byShard[1][0], f.epoch(1))
	c.RequestID = "client-complete-1"
	if r := <-completeAsync(t, f.s, c); r.err != nil || r.out.Applied != 1 {
		t.Fatalf("complete = %+v, %v", r.out, r.err)
	}
	close(f.g.release)
	for _, ch := range first {
		if r := <-ch; r.err != nil {
			t.Fatal(r.err)
		}
	}
}

func TestCompleteBatcherCloseFailsQueuedCompletes(t *testing.T) {
	f := newCompleteFixture(t, state.LogVersion)
	first := f.fillCompletes(t)
	queued := []<-chan completeResult{
		completeAsync(t, f.s, f.done(1, f.byShard[1][0], f.epoch(1))),
		completeAsync(t, f.s, f.done(2, f.byShard[2][0], f.epoch(2))),
	}
	testwait.For(t, 10*time.Second, "two completes to queue", func() bool { return f.s.queuedCompletes() == 2 })
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		f.s.completes.close()
	}()
	for _, ch := range queued {
		if r := <-ch; !errors.Is(r.err, state.ErrUnavailable) {
			t.Fatalf("queued complete after close: %+v, %v", r.out, r.err)
		}
	}
	if r := <-completeAsync(t, f.s, f.done(3, f.byShard[3][0], f.epoch(3))); !errors.Is(r.err, state.ErrUnavailable) {
		t.Fatalf("complete after close: %+v, %v", r.out, r.err)
	}
	select {
	case <-closed:
		t.Fatal("close returned while batches were still in flight")
	default:
	}
	close(f.g.release)
	<-closed
	for _, ch := range first {
		if r := <-ch; r.err != nil {
			t.Fatalf("in-flight batch: %v", r.err)
		}
	}
}

// In a cluster with a server below LogVersionCompleteMulti no node proposes
// complete_tasks_multi (completes go alone, the batcher unused); once it is
// upgraded in place, concurrent completes go as one entry, and every
// replica applies it alike.
func TestCompleteMultiWaitsForEveryServer(t *testing.T) {
	n3Version := state.LogVersionCompleteMulti - 1
	c := startOlderN3(t, &n3Version)
	n1 := c.nodes["n1"] // never restarted: it proposes the completes (forwarded if it is not the leader)
	ctx := t.Context()
	if _, err := n1.SetShardCount(ctx, state.SetShardCountCommand{Count: taskShards}); err != nil {
		t.Fatal(err)
	}
	m, _, _ := shardmap.Rebalance(mustNewMap(t, taskShards), []string{"n1"}, nil)
	idx, err := n1.CommitShardMap(ctx, state.CommitShardMapCommand{Map: m})
	if err != nil {
		t.Fatal(err)
	}
	c.waitAllApplied(idx, 10*time.Second) // n1 submits next: it needs the shard count
	var tasks []state.NewTask
	for i := range 32 {
		tasks = append(tasks, newTaskFor("", "ns", fmt.Sprint("wf-", i), ""))
	}
	out, _, err := n1.SubmitTasks(ctx, state.SubmitTasksCommand{Tasks: tasks})
	if err != nil {
		t.Fatal(err)
	}
	byShard := map[int][]string{}
	for _, o := range out {
		byShard[o.Shard] = append(byShard[o.Shard], o.TaskID)
	}
	g := &gate{release: make(chan struct{})}
	n1.completes.mu.Lock()
	n1.completes.testHookSend = g.hook
	n1.completes.mu.Unlock()
	done := func(shard int, id string) state.CompleteTasksCommand {
		return state.CompleteTasksCommand{Shard: shard, Epoch: m.Shards[shard].Epoch, Node: "n1",
			Results: []state.TaskResult{{TaskID: id, Status: state.TaskSucceeded, Attempts: 1}}}
	}
	testwait.For(t, 5*time.Second, "the cluster log version seen as n3's", func() bool {
		v, err := n1.ClusterLogVersion()
		return err == nil && v.LogVersion == n3Version
	})
	var chs []<-chan completeResult
	for sh := range taskShards {
		chs = append(chs, completeAsync(t, n1, done(sh, byShard[sh][0])))
	}
	for _, ch := range chs {
		if r := <-ch; r.err != nil || r.out.Applied != 1 {
			t.Fatalf("complete below log version %d = %+v, %v", state.LogVersionCompleteMulti, r.out, r.err)
		}
	}
	if got := g.seen(); len(got) != 0 {
		t.Fatalf("the batcher sent %v while n3 is at log version %d", got, n3Version)
	}

	// Upgrade n3 in place (same data dir).
	n3Version = state.LogVersion
	c.kill("n3")
	c.add("n3", 3)
	c.start("n3")
	testwait.For(t, 10*time.Second, "the cluster log version seen as the newest", func() bool {
		v, err := n1.ClusterLogVersion()
		return err == nil && v.LogVersion == state.LogVersion
	})
	c.leader(10 * time.Second)
	var first []<-chan completeResult
	for i := range completeBatchesInFlight {
		first = append(first, completeAsync(t, n1, done(0, byShard[0][1+i])))
		testwait.For(t, 10*time.Second, "the batch to reach the gate", func() bool { return len(g.seen()) == i+1 })
	}
	var later []<-chan completeResult
	for sh := 1; sh < taskShards; sh++ {
		later = append(later, completeAsync(t, n1, done(sh, byShard[sh][1])))
		testwait.For(t, 10*time.Second, "the complete to queue", func() bool { return n1.queuedCompletes() == sh })
	}
	close(g.release)
	for _, ch := range append(first, later...) {
		if r := <-ch; r.err != nil || r.out.Applied != 1 {
			t.Fatalf("complete = %+v, %v", r.out, r.err)
		}
	}
	if got := logTypes(t, n1); got[state.MsgCompleteTasksMulti] != 1 {
		t.Fatalf("the log holds %v; want one complete_tasks_multi", got)
	}
	c.waitAllApplied(n1.fsm.AppliedIndex(), 10*time.Second)
	want := n1.Reader().ListTasks(state.TaskQuery{Limit: 1000})
	for id, s := range c.nodes {
		if s.HaltErr() != nil {
			t.Fatalf("%s halted: %v", id, s.HaltErr())
		}
		if d := cmp.Diff(want, s.Reader().ListTasks(state.TaskQuery{Limit: 1000})); d != "" {
			t.Fatalf("%s's tasks differ from n1's:\n%s", id, d)
		}
	}
}

// take bounds a batch by sections, results and encoded bytes; the first
// complete always goes, however large.
func TestCompleteBatchBounds(t *testing.T) {
	waiter := func(results, output int) *completeWaiter {
		c := state.CompleteTasksCommand{Node: "n1", Results: make([]state.TaskResult, results)}
		if output > 0 {
			c.Results[0].Output = make([]byte, output)
		}
		var b completeBatcher
		b.init(nil)
		return b.newWaiter(c)
	}
	sizes := func(ws ...*completeWaiter) []int {
		var b completeBatcher
		b.init(nil)
		b.queue, b.inFlight = ws, 1
		var out []int
		for batch := b.take(); batch != nil; batch = b.take() {
			out = append(out, len(batch))
		}
		return out
	}
	many := func(n int, w func() *completeWaiter) []*completeWaiter {
		var ws []*completeWaiter
		for range n {
			ws = append(ws, w())
		}
		return ws
	}
	for name, tc := range map[string]struct {
		ws   []*completeWaiter
		want []int
	}{
		"sections": {many(state.MaxCompleteSections+5, func() *completeWaiter { return waiter(1, 0) }), []int{state.MaxCompleteSections, 5}},
		"results":  {many(6, func() *completeWaiter { return waiter(state.MaxTaskBatch, 0) }), []int{4, 2}},
		"bytes":    {many(3, func() *completeWaiter { return waiter(1, 300<<10) }), []int{1, 1, 1}},
		"small":    {many(40, func() *completeWaiter { return waiter(10, 1000) }), []int{40}},
	} {
		if got := sizes(tc.ws...); !slices.Equal(got, tc.want) {
			t.Errorf("%s: batches %v, want %v", name, got, tc.want)
		}
	}
}
