package ui_test

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"fusebox/breakerpool"
	"fusebox/internal/testwait"
	"fusebox/ui"
)

// TestHistoryFromRealPool: the history samples a real pool's
// fusebox_breaker_requests_total into calls, failures and rejections per
// interval, with the shard owners; GET /ui/api/history serves it, and the
// cluster scope merges a peer's over real HTTP, tagged with the member
// asked and without its shard owners, listing a member that does not
// answer.
func TestHistoryFromRealPool(t *testing.T) {
	reg := prometheus.NewRegistry()
	pool, err := breakerpool.New(breakerpool.Config{}, nil, reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	pool.Start()
	t.Cleanup(pool.Close)
	hist, err := ui.NewHistory(reg, func() map[string]int { return map[string]int{"n1": 3, "n2": 5} }, 10*time.Millisecond, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { hist.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })

	k := breakerpool.Key{TaskGroup: breakerpool.TaskGroupNexusInvocation, NamespaceID: "ns1", Destination: "down-api"}
	b := pool.Get(k)
	for range 2 {
		done, err := b.Allow()
		if err != nil {
			t.Fatal(err)
		}
		done(true)
	}
	tripBreaker(t, pool, k)
	if _, err := b.Allow(); err == nil {
		t.Fatal("open breaker admitted a call")
	}
	var sum ui.KeyCalls
	testwait.For(t, 5*time.Second, "the calls to be sampled", func() bool {
		sum = ui.KeyCalls{}
		for _, s := range hist.Samples() {
			for _, c := range s.Calls {
				sum.Calls += c.Calls
				sum.Failures += c.Failures
				sum.Rejected += c.Rejected
			}
		}
		return sum.Calls >= 3 && sum.Rejected >= 1
	})
	cancel() // the ring holds still from here
	wg.Wait()
	if sum.Calls-sum.Failures != 2 || sum.Failures < 1 {
		t.Errorf("sampled %+v, want 2 successes and the failures that tripped it, counted once", sum)
	}
	samples := hist.Samples()
	if len(samples) > 100 || samples[len(samples)-1].Shards["n2"] != 5 {
		t.Errorf("%d samples (want at most 100), last shards %v", len(samples), samples[len(samples)-1].Shards)
	}
	for i := 1; i < len(samples); i++ {
		if !samples[i].At.After(samples[i-1].At) {
			t.Fatalf("samples not oldest first at %d", i)
		}
	}

	n1 := ui.New(ui.Deps{NodeID: "n1", History: hist}, nil).Data()
	srv := startServer(t, n1)
	members := staticMembers{
		{ID: "n1", HTTPAddr: srv.Listener.Addr().String(), State: "alive"},
		{ID: "n2", State: "alive"},
		{ID: "n3", HTTPAddr: deadAddr(t), State: "alive"},
	}
	n2 := ui.New(ui.Deps{NodeID: "n2", Members: members, Peers: peerClients(t)}, nil).Data()
	rec := serve(t, n2, http.MethodGet, "/ui/api/history?scope=cluster", nil)
	var cl ui.HistoryList
	if err := json.Unmarshal(rec.Body.Bytes(), &cl); err != nil || rec.Header().Get("Cache-Control") != "no-store" {
		t.Fatalf("%v: %s", err, rec.Body)
	}
	if len(cl.Nodes) != 2 || cl.Nodes[0].Node != "n1" || len(cl.Nodes[0].Samples) == 0 || cl.Nodes[1].Node != "n2" ||
		len(cl.Nodes[1].Samples) != 0 || len(cl.Unreachable) != 1 || cl.Unreachable[0] != "n3" {
		t.Fatalf("cluster history %+v, want n1's samples, n2 without a history, n3 unreachable", cl)
	}
	calls := uint64(0)
	for _, s := range cl.Nodes[0].Samples {
		if s.Shards != nil {
			t.Fatalf("a peer's shard owners were kept: %v", s.Shards)
		}
		for _, c := range s.Calls {
			calls += c.Calls
		}
	}
	if calls < 3 {
		t.Errorf("merged history has %d calls from n1, want its sampled calls", calls)
	}
	// ?since= keeps what is newer, here and from the peer.
	pin := cl.Nodes[0].Samples[0].At
	rec = serve(t, n2, http.MethodGet, "/ui/api/history?scope=cluster&since="+pin.Format(time.RFC3339Nano), nil)
	var newer ui.HistoryList
	if err := json.Unmarshal(rec.Body.Bytes(), &newer); err != nil || len(newer.Nodes) != 2 {
		t.Fatalf("since: %v %s", err, rec.Body)
	}
	for _, s := range newer.Nodes[0].Samples {
		if !s.At.After(pin) {
			t.Errorf("since %v returned a sample of %v", pin, s.At)
		}
	}
	if len(newer.Nodes[0].Samples) >= len(cl.Nodes[0].Samples) {
		t.Errorf("since kept %d of %d samples", len(newer.Nodes[0].Samples), len(cl.Nodes[0].Samples))
	}
	if rec := serve(t, n1, http.MethodGet, "/ui/api/history?since=yesterday", nil); rec.Code != http.StatusBadRequest {
		t.Errorf("since=yesterday: %d, want 400", rec.Code)
	}
	if rec := serve(t, n2, http.MethodGet, "/ui/api/history?scope=fleet", nil); rec.Code != http.StatusBadRequest {
		t.Errorf("scope=fleet: %d, want 400", rec.Code)
	}
	if _, err := ui.NewHistory(nil, nil, time.Second, time.Hour); err == nil {
		t.Error("a history of 3600 samples was accepted")
	}
}
