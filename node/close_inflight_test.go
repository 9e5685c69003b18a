package node

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"fusebox/internal/testwait"
	"fusebox/raftstore/state"
	"fusebox/shardmap"
)

// slowReceiver is a callback receiver that answers 200 after hold,
// recording the Nexus-Request-Id of every request and signalling the first
// arrival on arrived.
type slowReceiver struct {
	hold    time.Duration
	mu      sync.Mutex
	ids     []string
	arrived chan struct{}
	once    sync.Once
}

func (h *slowReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	h.ids = append(h.ids, r.Header.Get("Nexus-Request-Id"))
	h.mu.Unlock()
	h.once.Do(func() { close(h.arrived) })
	t := time.NewTimer(h.hold)
	defer t.Stop()
	select {
	case <-t.C:
		w.WriteHeader(http.StatusOK)
	case <-r.Context().Done():
	}
}

func (h *slowReceiver) calls() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.ids...)
}

// TestCloseShardWithACallInFlight: an operator closes a shard (POST
// /v1/shards/{id}/close) while its live owner has a call under way that
// takes half a second. The owner hands the shard over first, as before a
// move: it starts no call on it, the call ends and its result is written,
// and only then is the shard released (and placed again, here on the same
// node at a new epoch). The destination sees the task once. Before, the
// release fenced the call's result out (its epoch was gone) and the task
// was called again at the new epoch.
func TestCloseShardWithACallInFlight(t *testing.T) {
	h := &slowReceiver{hold: 500 * time.Millisecond, arrived: make(chan struct{})}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	c := newTestCluster(t, 3, nil)
	testwait.For(t, 30*time.Second, "initial placement", func() bool { return shardsSettled(t, nodesOf(c.nodes)) })

	const wf = "wf-close"
	shard := shardmap.ShardOf(deliveryNS, wf, c.nodes[0].store.Reader().ShardCount())
	before := c.nodes[0].store.Reader().ShardMap().Shards[shard]
	id, err := newSubmitter(t, c.nodes).submit(callbackTask(srv.URL+"/cb", wf, "req-close"))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-h.arrived:
	case <-time.After(20 * time.Second):
		t.Fatal("the owner never called the destination")
	}
	closed, err := c.nodes[0].client().CloseShard(ctxT(t), shard, &before.Epoch)
	if err != nil {
		t.Fatalf("close: %v", err)
	}
	if closed.Epoch <= before.Epoch+1 {
		t.Fatalf("closed shard at epoch %d, want past %d (the release, then the new assignment)", closed.Epoch, before.Epoch+1)
	}
	testwait.For(t, 30*time.Second, "the task succeeded", func() bool {
		tk, ok := c.nodes[0].store.Reader().Task(id)
		return ok && tk.Status == state.TaskSucceeded
	})
	if calls := h.calls(); len(calls) != 1 || calls[0] != id {
		t.Errorf("destination saw request ids %v, want the task id %s once", calls, id)
	}
	if got := gatherCounter(t, c.nodes, "fusebox_shard_handovers_total"); got != 1 {
		t.Errorf("%v hand-overs counted, want 1 (the close's)", got)
	}
}
