package node

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"fusebox/api"
	"fusebox/dynconfig"
	"fusebox/internal/pgtest"
	"fusebox/internal/testwait"
	"fusebox/raftstore/state"
	"fusebox/taskstore/pgstore"
	"fusebox/transport/transporttest"
)

// pgNode starts a single node whose tasks live in a fresh database of the
// package's shared PostgreSQL server.
func pgNode(t *testing.T, url string) *testNode {
	t.Helper()
	cfg := testConfig(t, "p1", 1, nil)
	cfg.TaskStore, cfg.PostgresURL = TaskStorePostgres, url
	return startNode(t, cfg)
}

func waitNodeReady(t *testing.T, n *testNode) {
	t.Helper()
	c := &testCluster{t: t, nodes: []*testNode{n}}
	c.waitReady(30 * time.Second)
	testwait.For(t, 30*time.Second, "shards placed", func() bool { return shardsSettled(t, []*Node{n.Node}) })
}

// The delivery path through the API, the same on both task stores: a
// submit is delivered to a real receiver and reads back succeeded (a
// resubmit is its duplicate); a task the allowlist refuses at its attempt
// is dead-lettered, listed in the DLQ and delivered after a redrive; the
// destination backlog limit refuses with a 429 naming the key while
// another destination is accepted. On postgres the task is in the
// database and not in Raft.
func TestTaskAPIOnBothStores(t *testing.T) {
	t.Run(TaskStoreRaft, func(t *testing.T) {
		cfg := testConfig(t, "r1", 1, nil)
		n := startNode(t, cfg)
		waitNodeReady(t, n)
		testTaskAPI(t, n)
	})
	t.Run(TaskStorePostgres, func(t *testing.T) {
		n := pgNode(t, pgtest.NewDatabase(t))
		waitNodeReady(t, n)
		if _, detail := n.ready(); detail["task_store"] != TaskStorePostgres {
			t.Fatalf("readyz detail %v does not name the task store", detail)
		}
		id := testTaskAPI(t, n)
		if _, err := pgtestStoreRow(t, n, id); err != nil {
			t.Fatal(err)
		}
	})
}

// testTaskAPI runs the API sequence on n and returns the first task's id.
func testTaskAPI(t *testing.T, n *testNode) string {
	const ns = "ns-pg"
	dest := transporttest.NewDestination(t)
	configSet(t, n, dynconfig.KeyCallbackAllowedAddresses, ns, `[{"Pattern":"127.0.0.1:*","AllowInsecure":true}]`)
	submit := func(url, wf, rid string) (api.TaskAccepted, error) {
		ts := callbackTask(url, wf, rid)
		ts.NamespaceID = ns
		return n.client().SubmitTask(ctxT(t), ts)
	}

	acc, err := submit(dest.CallbackURL(), "wf-ok", "rid-ok")
	if err != nil {
		t.Fatal(err)
	}
	waitTask(t, n, acc.TaskID, "succeeded", func(tk api.Task) bool { return tk.Status == state.TaskSucceeded })
	if calls := dest.Calls(); len(calls) < 1 || calls[0].Status != http.StatusOK {
		t.Fatalf("receiver saw %+v", calls)
	}
	again, err := submit(dest.CallbackURL(), "wf-ok", "rid-ok")
	if err != nil || !again.Duplicate || again.TaskID != acc.TaskID {
		t.Fatalf("resubmit = %+v, %v; want a duplicate of %s", again, err, acc.TaskID)
	}
	firstID := acc.TaskID

	// DLQ and redrive.
	if err := dest.SetMode(transporttest.ModeRefuse); err != nil {
		t.Fatal(err)
	}
	acc, err = submit(dest.CallbackURL(), "wf-dlq", "rid-dlq")
	if err != nil {
		t.Fatal(err)
	}
	waitTask(t, n, acc.TaskID, "tried", func(tk api.Task) bool { return tk.Attempts >= 1 })
	configSet(t, n, dynconfig.KeyCallbackAllowedAddresses, ns, `[{"Pattern":"hooks.example.com"}]`)
	waitTask(t, n, acc.TaskID, "dead-lettered", func(tk api.Task) bool { return tk.Status == state.TaskDLQ })
	dlq, err := n.client().DLQ(ctxT(t), "", 10)
	if err != nil || len(dlq.Tasks) != 1 || dlq.Tasks[0].ID != acc.TaskID {
		t.Fatalf("DLQ = %+v, %v", dlq, err)
	}
	configSet(t, n, dynconfig.KeyCallbackAllowedAddresses, ns, `[{"Pattern":"127.0.0.1:*","AllowInsecure":true}]`)
	if err := dest.SetMode(transporttest.ModeUp); err != nil {
		t.Fatal(err)
	}
	if res, err := n.client().Redrive(ctxT(t), api.Redrive{All: true}); err != nil || res.Count != 1 {
		t.Fatalf("redrive all = %+v, %v", res, err)
	}
	waitTask(t, n, acc.TaskID, "succeeded after the redrive", func(tk api.Task) bool { return tk.Status == state.TaskSucceeded })

	// Limits: one pending task per destination.
	if err := dest.SetMode(transporttest.ModeRefuse); err != nil {
		t.Fatal(err)
	}
	configSet(t, n, dynconfig.KeyTaskMaxDestinationBacklog, ns, `1`)
	if _, err := submit(dest.CallbackURL(), "wf-l1", ""); err != nil {
		t.Fatal(err)
	}
	_, err = submit(dest.CallbackURL(), "wf-l2", "")
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Status != http.StatusTooManyRequests || ae.Key != dynconfig.KeyTaskMaxDestinationBacklog {
		t.Fatalf("second task for a full destination = %v, want a 429 naming %s", err, dynconfig.KeyTaskMaxDestinationBacklog)
	}
	// The other destination refuses too, so its task stays pending for the
	// counts below (a delivered one would leave the namespace one short).
	other := transporttest.NewDestination(t)
	if err := other.SetMode(transporttest.ModeRefuse); err != nil {
		t.Fatal(err)
	}
	if _, err := submit(other.CallbackURL(), "wf-l3", ""); err != nil {
		t.Fatalf("another destination refused: %v", err)
	}
	list, err := n.client().Tasks(ctxT(t), api.TaskListQuery{Status: state.TaskPending})
	if err != nil || len(list.Tasks) == 0 {
		t.Fatalf("pending listing = %+v, %v", list, err)
	}
	// The status page's counts come from the store the tasks live in.
	var counts api.TaskCounts
	if err := n.client().Do(ctxT(t), http.MethodGet, "/v1/tasks/_counts", nil, nil, &counts); err != nil {
		t.Fatal(err)
	}
	backlog := 0
	for _, c := range counts.Destinations {
		if c.Namespace == ns {
			backlog += c.Backlog
		}
	}
	if backlog < 2 {
		t.Fatalf("counts %+v: want the namespace's 2 pending tasks", counts.Destinations)
	}
	// A shard's description counts its pending tasks and gives the oldest
	// one's creation as its ack level, from the store the tasks live in.
	shard := list.Tasks[0].Shard
	want, ack := 0, uint64(0)
	for _, tk := range list.Tasks {
		if c := uint64(tk.CreatedAt.UnixMilli()); tk.Shard == shard {
			want++
			if ack == 0 || c < ack {
				ack = c
			}
		}
	}
	d, err := n.client().Shard(ctxT(t), shard)
	if err != nil || d.Tasks != api.TasksTracked || d.Backlog == nil || *d.Backlog != want || d.AckLevel == nil || *d.AckLevel != ack {
		t.Fatalf("shard %d = %+v, %v; want %d pending, ack level %d", shard, d, err, want, ack)
	}
	return firstID
}

// pgtestStoreRow reads a task straight from the node's database, to show
// the task really lives there (and not in Raft).
func pgtestStoreRow(t *testing.T, n *testNode, id string) (state.Task, error) {
	t.Helper()
	tk, ok, err := n.pg.store.Task(ctxT(t), id)
	if err == nil && !ok {
		err = errors.New("task " + id + " not in the database")
	}
	if _, inRaft := n.store.Reader().Task(id); inRaft {
		t.Fatalf("task %s is in the Raft state too", id)
	}
	return tk, err
}

// PostgreSQL unreachable at start: the node starts, /readyz is 503 naming
// the task store and the error, submits get 503 (never a 202); once the
// database is up the node opens the store on its own, and a task submitted
// then is delivered.
func TestPostgresUnreachableAtStart(t *testing.T) {
	if _, err := pgtest.BinDir(); err != nil {
		t.Skip(err)
	}
	srv, err := pgtest.Start(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	if err := srv.StopImmediate(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	url := strings.Replace(srv.URL("postgres"), "postgres@", "postgres:s3cret-pw@", 1)
	n := pgNode(t, url)
	testwait.For(t, 30*time.Second, "raft ready, store not", func() bool {
		_, d := n.ready()
		return d["raft_leader"] != "" && d["task_store_error"] != nil
	})
	ok, detail := n.ready()
	why, _ := detail["task_store_error"].(string)
	if ok || !strings.Contains(why, "postgres") || strings.Contains(why, "s3cret-pw") {
		t.Fatalf("ready = %v %v; want not ready, naming postgres, password hidden", ok, detail)
	}
	// /readyz needs no token: it says why without the database's address.
	if strings.Contains(why, "127.0.0.1") || !strings.Contains(why, "connection refused") {
		t.Fatalf("task_store_error %q: want the failure's class (connection refused), no address", why)
	}
	resp, err := http.Get("http://" + n.HTTPAddr() + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("/readyz = %d, want 503", resp.StatusCode)
	}
	dest := transporttest.NewDestination(t)
	_, err = n.client().SubmitTask(ctxT(t), callbackTask(dest.CallbackURL(), "wf", "rid-1"))
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Status != http.StatusServiceUnavailable || ae.Code != api.CodeUnavailable ||
		strings.Contains(ae.Message, "s3cret-pw") {
		t.Fatalf("submit with the store down = %v, want a 503 unavailable", err)
	}

	if err := srv.StartAgain(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitNodeReady(t, n)
	acc, err := n.client().SubmitTask(ctxT(t), callbackTask(dest.CallbackURL(), "wf", "rid-1"))
	if err != nil {
		t.Fatal(err)
	}
	waitTask(t, n, acc.TaskID, "succeeded", func(tk api.Task) bool { return tk.Status == state.TaskSucceeded })
}

func TestConfigTaskStoreFlags(t *testing.T) {
	base := testConfig(t, "c1", 1, nil)
	for _, tc := range []struct {
		store, url, want string
	}{
		{"", "", ""},
		{"raft", "", ""},
		{"postgres", "postgres://u:pw@127.0.0.1:5432/db", ""},
		{"mysql", "", "--task-store"},
		{"postgres", "", "--postgres-url"},
		{"raft", "postgres://u:pw@127.0.0.1/db", "--postgres-url"},
		{"postgres", "http://u:pw@127.0.0.1/db", "--postgres-url"},
		{"postgres", "postgres://u:pw@127.0.0.1:notaport/db", "--postgres-url"},
	} {
		cfg := base
		cfg.TaskStore, cfg.PostgresURL = tc.store, tc.url
		err := cfg.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%q %q: %v", tc.store, tc.url, err)
		case tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.want)):
			t.Errorf("%q %q: error %v, want one naming %s", tc.store, tc.url, err, tc.want)
		case err != nil && strings.Contains(err.Error(), "pw@"):
			t.Errorf("%q %q: error %v shows the password", tc.store, tc.url, err)
		}
	}
	// A URL pgx refuses says why, without the password (pgx's own message
	// quotes the URL, redacted only "best effort").
	for url, why := range map[string]string{
		"postgres://u:s3cret-pw@127.0.0.1:5432/db?sslmode=bogus":      "sslmode",
		"postgres://u:s3cret-pw@127.0.0.1:5432/db?pool_max_conns=abc": "pool_max_conns",
		"postgres://u:s3cret-pw@127.0.0.1:99999/db":                   "port",
	} {
		cfg := base
		cfg.TaskStore, cfg.PostgresURL = TaskStorePostgres, url
		err := cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), why) || strings.Contains(err.Error(), "s3cret-pw") {
			t.Errorf("%s: %v; want the reason (%s), no password", pgstore.RedactURL(url), err, why)
		}
	}
	cfg := base
	cfg.PostgresURL = "postgres://u:pw@127.0.0.1/db"
	if r := cfg.Redacted(); strings.Contains(r.PostgresURL, "pw") || !strings.Contains(r.PostgresURL, "127.0.0.1") {
		t.Fatalf("redacted URL %q", r.PostgresURL)
	}
}
