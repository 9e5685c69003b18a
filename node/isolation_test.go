package node

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"fusebox/api"
	"fusebox/breakerpool"
	"fusebox/dynconfig"
	"fusebox/internal/testwait"
	"fusebox/transport"
	"fusebox/transport/transporttest"
)

// Issue 20 §2: one dead destination over its backlog cap never refuses
// another destination's tasks. Destination A refuses connections and has
// a cap of 20 pending tasks; the retired shard limit is set to 1, which
// before this change made every shard refuse everything after its first
// pending task. Every node answers A's 21st task with a 429 naming A, and
// takes B's tasks (202), which are delivered.
func TestDeadDestinationOverItsCapDoesNotRefuseOthers(t *testing.T) {
	c := newTestCluster(t, 3, nil)
	testwait.For(t, 30*time.Second, "initial placement", func() bool { return shardsSettled(t, nodesOf(c.nodes)) })
	dead := transporttest.NewDestination(t)
	if err := dead.SetMode(transporttest.ModeRefuse); err != nil {
		t.Fatal(err)
	}
	healthy := transporttest.NewDestination(t)
	deadKey := transport.BreakerDestination(breakerpool.TaskGroupCallback, dead.CallbackURL())
	const limit = 20
	setConfig(t, c.nodes, dynconfig.KeyTaskMaxDestinationBacklog, deadKey, fmt.Sprint(limit))
	setConfig(t, c.nodes, dynconfig.KeyTaskMaxShardBacklog, "", "1") // retired: no effect

	for i := range limit {
		n := c.nodes[i%len(c.nodes)]
		if _, err := n.client().SubmitTask(ctxT(t), callbackTask(dead.CallbackURL()+fmt.Sprintf("/p%d", i), fmt.Sprintf("wf-a-%d", i), fmt.Sprintf("a-%d", i))); err != nil {
			t.Fatalf("task %d for A via %s (under its limit): %v", i, n.cfg.NodeID, err)
		}
	}
	for _, n := range c.nodes {
		_, err := n.client().SubmitTask(ctxT(t), callbackTask(dead.CallbackURL(), "wf-a-over-"+n.cfg.NodeID, "a-over-"+n.cfg.NodeID))
		var e *api.Error
		if !errors.As(err, &e) || e.Status != http.StatusTooManyRequests || e.Field != "destination" ||
			!strings.Contains(e.Message, deadKey) || e.RetryAfter <= 0 {
			t.Fatalf("A over its cap via %s: %v (%+v); want a 429 naming %s with Retry-After", n.cfg.NodeID, err, e, deadKey)
		}
	}
	var ids []string
	for _, n := range c.nodes {
		for j := range 8 { // many workflows: most shards, including A's
			acc, err := n.client().SubmitTask(ctxT(t), callbackTask(healthy.CallbackURL(), fmt.Sprintf("wf-b-%s-%d", n.cfg.NodeID, j), fmt.Sprintf("b-%s-%d", n.cfg.NodeID, j)))
			if err != nil {
				t.Fatalf("B via %s beside a full A: %v; want 202", n.cfg.NodeID, err)
			}
			ids = append(ids, acc.TaskID)
		}
	}
	apic := c.nodes[0].client()
	testwait.For(t, 30*time.Second, "B's tasks delivered", func() bool {
		for _, id := range ids {
			if tk, err := apic.Task(ctxT(t), id); err != nil || tk.Status != "succeeded" {
				return false
			}
		}
		return true
	})
	if got := gatherCounter(t, c.nodes, "fusebox_tasks_submit_refused_total"); got < float64(len(c.nodes)) {
		t.Fatalf("fusebox_tasks_submit_refused_total = %v, want >= %d", got, len(c.nodes))
	}
}

// The data-dir floor reads the real file system (cached for a second) and
// fusebox.tasks.minFreeDiskMB; an unreadable free space reports no floor.
func TestTaskAPIDataDirSpace(t *testing.T) {
	c := dynconfig.NewCollection(nil)
	defer c.Close()
	disk := newDataDirSpace(t.TempDir())
	apic := &TaskAPI{config: c, disk: disk}
	free, floor := apic.DataDirSpace()
	if free == 0 || floor != dynconfig.DefaultTaskMinFreeDiskMB<<20 {
		t.Fatalf("DataDirSpace = %d, %d; want the real free space and the default floor", free, floor)
	}
	c.Update([]dynconfig.Entry{{Key: dynconfig.KeyTaskMinFreeDiskMB, Value: []byte(`0`)}})
	if _, floor := apic.DataDirSpace(); floor != 0 {
		t.Fatalf("floor with 0 = %d, want none", floor)
	}
	calls := 0
	disk.stat = func(string) (uint64, error) { calls++; return 0, errors.New("gone") }
	disk.at = time.Time{}
	c.Update([]dynconfig.Entry{{Key: dynconfig.KeyTaskMinFreeDiskMB, Value: []byte(`1`)}})
	for range 3 {
		if free, floor := apic.DataDirSpace(); free != 0 || floor != 0 {
			t.Fatalf("unreadable space = %d, %d; want no floor", free, floor)
		}
	}
	if calls != 1 {
		t.Fatalf("statfs called %d times in a second, want 1 (cached)", calls)
	}
}
