package node

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"fusebox/dynconfig"
	"fusebox/internal/testwait"
	"fusebox/raftstore/state"
	"fusebox/shardmap"
)

// holdFirst is a callback receiver that holds the first request until the
// caller gives up (its connection closes) and answers 200 to every later
// one. It records the Nexus-Request-Id of every request.
type holdFirst struct {
	mu   sync.Mutex
	ids  []string
	held chan struct{} // closed when the first request arrives
	once sync.Once
	stop chan struct{}
}

func (h *holdFirst) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	h.ids = append(h.ids, r.Header.Get("Nexus-Request-Id"))
	first := len(h.ids) == 1
	h.mu.Unlock()
	if first {
		h.once.Do(func() { close(h.held) })
		select {
		case <-r.Context().Done():
		case <-h.stop:
		}
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (h *holdFirst) calls() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.ids...)
}

// TestCrashedOwnersCallCountedByNextOwner: a shard owner crashes with a
// call in flight. It cannot count anything (its counters die with it), but
// the call left a start marker in the task table, so the node that takes
// the shard counts an interrupted attempt before delivering the task again.
func TestCrashedOwnersCallCountedByNextOwner(t *testing.T) {
	h := &holdFirst{held: make(chan struct{}), stop: make(chan struct{})}
	srv := httptest.NewServer(h)
	t.Cleanup(func() { close(h.stop); srv.Close() })
	c := newTestCluster(t, 3, nil)
	testwait.For(t, 30*time.Second, "initial placement", func() bool { return shardsSettled(t, nodesOf(c.nodes)) })

	const wf = "wf-interrupted"
	shard := shardmap.ShardOf(deliveryNS, wf, c.nodes[0].store.Reader().ShardCount())
	before := c.nodes[0].store.Reader().ShardMap().Shards[shard]
	var victim *testNode
	for _, n := range c.nodes {
		if n.cfg.NodeID == before.Owner {
			victim = n
		}
	}
	if victim == nil {
		t.Fatalf("shard %d has owner %q, not a node of the cluster", shard, before.Owner)
	}
	survivors := others(c.nodes, victim)
	// The in-process crash drains calls for the queue's DrainTimeout (10 s)
	// before cancelling them; a longer request timeout keeps the held call
	// from ending as a recorded (down) attempt first, as a SIGKILL would.
	setConfig(t, c.nodes, dynconfig.KeyCallbackRequestTimeout, "", `"60s"`)
	id, err := newSubmitter(t, survivors).submit(callbackTask(srv.URL+"/cb", wf, "req-interrupted"))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-h.held:
	case <-time.After(20 * time.Second):
		t.Fatal("the owner never called the destination")
	}
	testwait.For(t, 10*time.Second, "the attempt's start marker replicated", func() bool {
		tk, ok := survivors[0].store.Reader().Task(id)
		return ok && tk.AttemptEpoch == before.Epoch
	})

	victim.crash()
	testwait.For(t, 30*time.Second, "the task delivered again and succeeded", func() bool {
		tk, ok := survivors[0].store.Reader().Task(id)
		return ok && tk.Status == state.TaskSucceeded
	})
	after := survivors[0].store.Reader().ShardMap().Shards[shard]
	if after.Owner == victim.cfg.NodeID || after.Epoch <= before.Epoch {
		t.Fatalf("shard %d now %+v, want a survivor at an epoch above %d", shard, after, before.Epoch)
	}
	if got := gatherCounter(t, survivors, "fusebox_queue_interrupted_attempts_total"); got != 1 {
		t.Errorf("survivors counted %v interrupted attempts, want 1 (the crashed owner's call)", got)
	}
	if calls := h.calls(); len(calls) != 2 || calls[0] != id || calls[1] != id {
		t.Errorf("destination saw request ids %v, want the task id %s twice", calls, id)
	}
	if tk, _ := survivors[0].store.Reader().Task(id); tk.AttemptEpoch != 0 {
		t.Errorf("succeeded task keeps attempt epoch %d, want 0", tk.AttemptEpoch)
	}
}
