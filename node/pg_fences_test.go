package node

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"fusebox/api"
	"fusebox/dynconfig"
	"fusebox/internal/pgtest"
	"fusebox/internal/testwait"
	"fusebox/raftstore/state"
	"fusebox/transport/transporttest"
)

// TestNewClusterOnAnOldDatabase: a cluster started afresh (new Raft state)
// on the database of an older one delivers the tasks the older one left
// there. The database's fences of the shards (owner and epoch of their
// last acquire) are then ahead of the new cluster's shard map; before the
// leader raised the map's epochs past them (ownership/fences.go) every
// acquire was refused and the tasks waited for ever: with another node id
// at the same epochs, and with the same id at epochs the older cluster had
// raised.
func TestNewClusterOnAnOldDatabase(t *testing.T) {
	for _, tc := range []struct {
		name, id string
		closes   int // times the old cluster closes the task's shard (each raises its epoch twice)
	}{
		{"another node id", "q1", 0},
		{"the same node id, epochs behind", "p1", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := pgtest.NewDatabase(t)
			dest := transporttest.NewDestination(t)
			if err := dest.SetMode(transporttest.ModeRefuse); err != nil {
				t.Fatal(err)
			}
			old := pgNode(t, url)
			waitNodeReady(t, old)
			allowLoopback(t, old)
			acc := submitTried(t, old, fencesCallback(dest, "wf-1", "rid-1"))
			for range tc.closes {
				if _, err := old.client().CloseShard(ctxT(t), acc.Shard, nil); err != nil {
					t.Fatal(err)
				}
			}
			want := uint64(1 + 2*tc.closes)
			testwait.ForErr(t, 30*time.Second, "the old cluster's fence of the task's shard", func() error {
				f, err := old.pg.store.Fences(ctxT(t))
				if err != nil {
					return err
				}
				if got := f[acc.Shard]; got.Owner != "p1" || got.Epoch != want {
					return fmt.Errorf("fence %+v, want p1@%d", got, want)
				}
				return nil
			})
			old.stop()

			cfg := testConfig(t, tc.id, 1, nil)
			cfg.TaskStore, cfg.PostgresURL = TaskStorePostgres, url
			n := startNode(t, cfg)
			waitNodeReady(t, n)
			allowLoopback(t, n)
			if err := dest.SetMode(transporttest.ModeUp); err != nil {
				t.Fatal(err)
			}
			waitTask(t, n, acc.TaskID, "succeeded on the new cluster", func(tk api.Task) bool { return tk.Status == state.TaskSucceeded })
			sm := n.shards.Holder().Load()
			if a := sm.Shards[acc.Shard]; a.Owner != tc.id || a.Epoch <= want {
				t.Errorf("task's shard in the new map: %+v, want owned by %s past epoch %d", a, tc.id, want)
			}
			if got := counterValue(t, n.reg, "fusebox_shard_epochs_raised_total"); got < 1 {
				t.Errorf("fusebox_shard_epochs_raised_total = %v, want at least 1", got)
			}
		})
	}
}

// TestDatabaseFenceWentBack: the database loses the acquire of a shard
// this node works on (a failover to a standby that had not received it, a
// restored backup): its fence falls below the node's epoch, and the node's
// next result write there is refused. The node takes the shard again at
// its epoch and delivers its tasks; before, it dropped the shard as if a
// newer owner had it, and nothing moved the shard again — its tasks waited
// for ever.
func TestDatabaseFenceWentBack(t *testing.T) {
	url := pgtest.NewDatabase(t)
	dest := transporttest.NewDestination(t)
	if err := dest.SetMode(transporttest.ModeUnavailable); err != nil {
		t.Fatal(err)
	}
	n := pgNode(t, url)
	waitNodeReady(t, n)
	allowLoopback(t, n)
	configSet(t, n, dynconfig.KeyBreakerSettings, fencesNS, `{"Timeout":"100ms"}`)
	acc := submitTried(t, n, fencesCallback(dest, "wf-1", "rid-1"))
	epoch := n.shards.Holder().Load().Shards[acc.Shard].Epoch
	conn, err := pgx.Connect(ctxT(t), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctxT(t), `UPDATE fusebox_shards SET epoch = $2, owner = 'p0' WHERE shard = $1`, acc.Shard, int64(epoch-1)); err != nil {
		t.Fatal(err)
	}
	// The next attempt's result write meets the fence gone back.
	tried := 0
	testwait.ForErr(t, 30*time.Second, "a result write refused by the fence gone back", func() error {
		tk, err := n.client().Task(ctxT(t), acc.TaskID)
		if err != nil {
			return err
		}
		tried = tk.Attempts
		if v := refusedWrites(t, n); v == 0 {
			return fmt.Errorf("no refused write yet (task at %d attempts)", tk.Attempts)
		}
		return nil
	})
	if err := dest.SetMode(transporttest.ModeUp); err != nil {
		t.Fatal(err)
	}
	waitTask(t, n, acc.TaskID, "succeeded after the refused write", func(tk api.Task) bool { return tk.Status == state.TaskSucceeded })
	var fe int64
	var owner string
	if err := conn.QueryRow(ctxT(t), `SELECT epoch, owner FROM fusebox_shards WHERE shard = $1`, acc.Shard).Scan(&fe, &owner); err != nil {
		t.Fatal(err)
	}
	if owner != "p1" || uint64(fe) != epoch {
		t.Errorf("fence after the retake: %s@%d, want p1@%d", owner, fe, epoch)
	}
	t.Logf("task at %d attempts when the write was refused; fence back at %s@%d", tried, owner, fe)
}

// refusedWrites is fusebox_queue_completion_writes_total{result="refused"}.
func refusedWrites(t *testing.T, n *testNode) float64 {
	mfs, err := n.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "fusebox_queue_completion_writes_total" {
			for _, m := range mf.GetMetric() {
				if hasLabel(m.GetLabel(), "result", "refused") {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// TestNewClusterWithFewerShardsIsNotReady: a cluster started afresh on an
// older cluster's database with fewer shards than that one had would never
// read the pending tasks of the shards it lacks; it is not ready, and
// /readyz says why and what to do. Before, it was ready and those tasks
// waited for ever.
func TestNewClusterWithFewerShardsIsNotReady(t *testing.T) {
	url := pgtest.NewDatabase(t)
	dest := transporttest.NewDestination(t)
	if err := dest.SetMode(transporttest.ModeUnavailable); err != nil {
		t.Fatal(err)
	}
	old := pgNode(t, url) // DefaultShards
	waitNodeReady(t, old)
	allowLoopback(t, old)
	top := -1
	for i := 0; top < 8; i++ {
		if i == 200 {
			t.Fatal("no task in a shard above 7 in 200 submits")
		}
		acc, err := old.client().SubmitTask(ctxT(t), fencesCallback(dest, fmt.Sprintf("wf-%d", i), fmt.Sprintf("rid-%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		top = max(top, acc.Shard)
	}
	old.stop()

	cfg := testConfig(t, "q1", 1, nil)
	cfg.TaskStore, cfg.PostgresURL, cfg.Shards = TaskStorePostgres, url, 8
	n := startNode(t, cfg)
	var detail map[string]any
	testwait.ForErr(t, 30*time.Second, "a shard map, and /readyz naming the shards it lacks", func() error {
		var ready bool
		ready, detail = n.ready()
		msg, _ := detail["task_store_error"].(string)
		if n.shards.Holder().Load() == nil || ready || !strings.Contains(msg, fmt.Sprintf("pending tasks of shard %d", top)) {
			return fmt.Errorf("ready %v, detail %v", ready, detail)
		}
		return nil
	})
	if msg := detail["task_store_error"].(string); !strings.Contains(msg, "--shards") || !strings.Contains(msg, "8 shards") {
		t.Errorf("readyz detail %q does not say what to do", msg)
	}
}

// TestRebuiltClusterRestoresItsStateFirst follows docs/scaling.md's
// procedure for a cluster rebuilt on an older cluster's database that left
// Nexus tasks: their endpoints live in the Raft state, and a task whose
// endpoint the new cluster does not know fails at its attempt. So the new
// cluster starts on an empty scratch database, the old cluster's snapshot
// is restored into it, and its node restarts (data dir kept) on the real
// database: the task is delivered through the restored endpoint.
func TestRebuiltClusterRestoresItsStateFirst(t *testing.T) {
	url, scratch := pgtest.NewDatabase(t), pgtest.NewDatabase(t)
	dest := transporttest.NewDestination(t)
	if err := dest.SetMode(transporttest.ModeUnavailable); err != nil {
		t.Fatal(err)
	}
	old := pgNode(t, url)
	waitNodeReady(t, old)
	if _, err := old.client().PutEndpoint(ctxT(t), api.Endpoint{Name: "ep-old", URL: dest.NexusURL()}); err != nil {
		t.Fatal(err)
	}
	configSet(t, old, dynconfig.KeyBreakerSettings, deliveryNS, `{"Timeout":"100ms"}`)
	acc := submitTried(t, old, echoTask("ep-old", "wf-1", "rid-1"))
	var snap bytes.Buffer
	if _, err := old.client().SaveSnapshot(ctxT(t), &snap); err != nil {
		t.Fatal(err)
	}
	old.stop()

	cfg := testConfig(t, "q1", 1, nil)
	cfg.TaskStore, cfg.PostgresURL = TaskStorePostgres, scratch
	n := startNode(t, cfg)
	waitNodeReady(t, n)
	if _, err := n.client().RestoreSnapshot(ctxT(t), &snap, false); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "the restored endpoint", func() bool {
		_, ok := n.store.Reader().Endpoint("ep-old")
		return ok
	})
	n.stop()
	if err := dest.SetMode(transporttest.ModeUp); err != nil {
		t.Fatal(err)
	}
	cfg.PostgresURL = url
	n = startNode(t, cfg)
	waitTask(t, n, acc.TaskID, "succeeded on the rebuilt cluster", func(tk api.Task) bool { return tk.Status == state.TaskSucceeded })
}

// fencesNS is the namespace of these tests' callbacks, which reach loopback.
const fencesNS = "ns-pg"

// allowLoopback lets fencesNS's callbacks call loopback destinations on n.
func allowLoopback(t *testing.T, n *testNode) {
	t.Helper()
	configSet(t, n, dynconfig.KeyCallbackAllowedAddresses, fencesNS, `[{"Pattern":"127.0.0.1:*","AllowInsecure":true}]`)
}

// submitTried submits ts through n and waits until it has been tried once.
func submitTried(t *testing.T, n *testNode, ts api.TaskSubmit) api.TaskAccepted {
	t.Helper()
	acc, err := n.client().SubmitTask(ctxT(t), ts)
	if err != nil {
		t.Fatal(err)
	}
	waitTask(t, n, acc.TaskID, "tried", func(tk api.Task) bool { return tk.Attempts >= 1 })
	return acc
}

// fencesCallback is a callback of fencesNS to dest.
func fencesCallback(dest *transporttest.Destination, wf, rid string) api.TaskSubmit {
	ts := callbackTask(dest.CallbackURL(), wf, rid)
	ts.NamespaceID = fencesNS
	return ts
}

// TestTwoClustersOnOneDatabase: two live clusters given the same database
// (a copied URL) used to fence each other's owners out by turns, each
// leader raising the epochs the other had acquired, for as long as both
// ran (measured: 16 shards raised per cluster every second at fast
// timing). Each now sees the other recorded in the database, is not ready
// (/readyz names the other cluster), and raises no more epochs; once one
// is gone the other is ready again.
func TestTwoClustersOnOneDatabase(t *testing.T) {
	url := pgtest.NewDatabase(t)
	a := pgNode(t, url)
	cfg := testConfig(t, "q1", 1, nil)
	cfg.TaskStore, cfg.PostgresURL = TaskStorePostgres, url
	b := startNode(t, cfg)
	for _, n := range []*testNode{a, b} {
		testwait.ForErr(t, 30*time.Second, n.cfg.NodeID+"'s /readyz naming the other cluster", func() error {
			ready, detail := n.ready()
			msg, _ := detail["task_store_error"].(string)
			if ready || !strings.Contains(msg, "another fusebox cluster") {
				return fmt.Errorf("ready %v, detail %v", ready, detail)
			}
			return nil
		})
	}
	raised := func() float64 {
		return counterValue(t, a.reg, "fusebox_shard_epochs_raised_total") + counterValue(t, b.reg, "fusebox_shard_epochs_raised_total")
	}
	before := raised()
	until := time.Now().Add(3 * time.Second)
	testwait.ForErr(t, 10*time.Second, "three seconds with no epoch raised", func() error {
		if now := raised(); now != before {
			t.Fatalf("%v shard epochs raised while both clusters were known to share the database", now-before)
		}
		if time.Now().Before(until) {
			return errors.New("watching")
		}
		return nil
	})
	a.stop()
	testwait.For(t, 30*time.Second, "q1 ready once the other cluster is gone", func() bool {
		ready, _ := b.ready()
		return ready
	})
}
