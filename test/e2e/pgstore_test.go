package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	"fusebox/api"
	"fusebox/breakerpool"
	"fusebox/dynconfig"
	"fusebox/internal/pgtest"
	"fusebox/internal/testwait"
	"fusebox/transport"
	"fusebox/transport/transporttest"
)

// Chaos scenarios of the postgres task store (issue 18): real fusebox
// processes sharing one throwaway PostgreSQL server (durable: an immediate
// shutdown must not lose a commit). Skipped only when PostgreSQL's
// binaries are missing (`make pg-tools` installs them).

// pgServer starts a durable PostgreSQL server stopped when the test ends.
func pgServer(t *testing.T) *pgtest.Server {
	t.Helper()
	return pgServerWith(t, pgtest.Options{Durable: true})
}

// pgServerWith is pgServer with opts.
func pgServerWith(t *testing.T, opts pgtest.Options) *pgtest.Server {
	t.Helper()
	if _, err := pgtest.BinDir(); err != nil {
		t.Skip(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv, err := pgtest.StartWith(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	return srv
}

// pgOptions run every node with --task-store postgres and the URL in
// FUSEBOX_POSTGRES_URL (as the docs advise: not on the command line).
func pgOptions(url string) ClusterOptions {
	return ClusterOptions{
		ExtraArgs: []string{"--task-store", "postgres"},
		Tweak:     func(c *ProcessConfig) { c.Env = append(c.Env, "FUSEBOX_POSTGRES_URL="+url) },
	}
}

// TestPostgresKillShardOwner is the owner-kill scenario on the postgres
// store: SIGKILL a node owning shards with a backlog; its shards are
// re-owned under new epochs (raised in the database before the new owner
// reads them), every accepted task succeeds, duplicates only from calls the
// victim had made, and the restarted node does not deliver again.
func TestPostgresKillShardOwner(t *testing.T) {
	srv := pgServer(t)
	testTasksKillShardOwner(t, pgOptions(srv.URL("postgres")))
}

// TestPostgresRestartedMidRun: with tasks flowing, PostgreSQL stops with an
// immediate shutdown (a crash) and starts again. No accepted task is lost,
// delivery resumes after the database returns (the time is reported), and
// a task is delivered twice only if its first delivery was before the
// database returned (a result the crash kept from being written).
func TestPostgresRestartedMidRun(t *testing.T) {
	srv := pgServer(t)
	testPostgresOutageForAll(t, srv, "pgrestart", "immediate shutdown", srv.StopImmediate, srv.StartAgain, true)
}

// TestPostgresHangsMidRun is the same outage as a hang: every server
// process stopped (SIGSTOP), so connections stay open and statements wait
// for answers that do not come — a wedged host, a black-holed route, a
// long lock — instead of being refused at once, then continued.
func TestPostgresHangsMidRun(t *testing.T) {
	srv := pgServer(t)
	resumed := true
	t.Cleanup(func() {
		if !resumed {
			_ = srv.Resume()
		}
	})
	testPostgresOutageForAll(t, srv, "pghang", "hang",
		func(context.Context) error { resumed = false; return srv.Pause() },
		func(context.Context) error { resumed = true; return srv.Resume() }, true)
}

// TestPostgresReadOnlyMidRun is the same outage for writes alone: the
// database turns read-only (default_transaction_read_only, as a hot
// standby is), so pings and reads pass while submits and result writes
// fail. /readyz says so (before, every node stayed ready); the nodes,
// whose looks pass, flag nothing; calls made meanwhile have their results
// written once it is writable again.
func TestPostgresReadOnlyMidRun(t *testing.T) {
	srv := pgServer(t)
	set := func(on string) func(context.Context) error {
		return func(context.Context) error {
			if err := srv.Exec("ALTER SYSTEM SET default_transaction_read_only = " + on); err != nil {
				return err
			}
			return srv.Exec("SELECT pg_reload_conf()")
		}
	}
	testPostgresOutageForAll(t, srv, "pgro", "read-only", set("on"), set("off"), false)
}

// testPostgresOutageForAll takes the database away from every node with
// down, under load, and brings it back with up. unreachable: the nodes'
// looks fail meanwhile, and they flag the task store unreachable.
func testPostgresOutageForAll(t *testing.T, srv *pgtest.Server, name, fault string, down, up func(context.Context) error, unreachable bool) {
	c, dest, l := busyCluster(t, name, 50*time.Millisecond, pgOptions(srv.URL("postgres")))
	testwait.ForErr(t, convergeTimout, "deliveries under way", func() error {
		if n := len(dest.Deliveries()); n < 20 {
			return fmt.Errorf("%d tasks delivered", n)
		}
		return nil
	})
	owners := func() map[int]string {
		t.Helper()
		ld := c.WaitForLeader(t, leaderTimeout)
		m, _, err := shardMap(ld)
		if err != nil {
			t.Fatal(err)
		}
		out := map[int]string{}
		for s, a := range m {
			out[s] = a.Owner
		}
		return out
	}
	before := owners()
	downAt := time.Now()
	if err := down(t.Context()); err != nil {
		t.Fatal(err)
	}
	testwait.ForErr(t, convergeTimout, "a node's /readyz to report the database unusable", func() error {
		body, code, err := readyz(c.Procs[0])
		if err != nil {
			return err
		}
		if code != http.StatusServiceUnavailable || !strings.Contains(body, "task_store_error") {
			return fmt.Errorf("/readyz %d %s", code, body)
		}
		return nil
	})
	accDown := l.Stats().Accepted
	time.Sleep(2 * time.Second) // dwell: the outage (a fault's duration, not a wait for a state)
	if err := up(t.Context()); err != nil {
		t.Fatal(err)
	}
	upAt := time.Now()
	testwait.ForErr(t, convergeTimout, "a delivery after PostgreSQL's return", func() error {
		if dest.CallsBetween(upAt, time.Now().Add(time.Hour)) == 0 {
			return errors.New("no call since the database came back")
		}
		return nil
	})
	resumed := time.Since(upAt)
	testwait.ForErr(t, convergeTimout, "20 more tasks accepted after the return", func() error {
		if s := l.Stats(); s.Accepted < accDown+20 {
			return fmt.Errorf("%d accepted since the outage (last error %v)", s.Accepted-accDown, s.LastErr)
		}
		return nil
	})
	rep := l.Check(t, 2*convergeTimout)
	t.Logf("PostgreSQL down %v (%s); delivery resumed %v after its return; %v; submits %v",
		upAt.Sub(downAt).Round(time.Millisecond), fault, resumed.Round(time.Millisecond), rep, l.Stats())
	if rep.Succeeded != rep.Accepted {
		t.Errorf("%d of %d accepted tasks succeeded", rep.Succeeded, rep.Accepted)
	}
	firstAt := map[string]time.Time{}
	for _, call := range dest.Calls() {
		if _, ok := firstAt[call.RequestID]; !ok && call.Delivered() {
			firstAt[call.RequestID] = call.Arrived
		}
	}
	var late []string
	for _, id := range rep.DupTasks {
		if firstAt[id].After(upAt) {
			late = append(late, id)
		}
	}
	if len(late) > 0 {
		t.Errorf("%d of %d duplicated tasks were first delivered after the database returned: %v", len(late), len(rep.DupTasks), first(late, 10))
	}
	// Every node lost the database, and each said so in its gossip
	// metadata (node/pghealth.go): no shard moved for it, neither while it
	// was down nor as the flags cleared after its return.
	flagged := 0
	for _, p := range c.Procs {
		if strings.Contains(lastRun(p), "the task store is unreachable from this node") {
			flagged++
		}
	}
	if after := owners(); !maps.Equal(before, after) {
		t.Errorf("shards moved for an outage of the database for every node (%d nodes flagged it): before %v, after %v", flagged, before, after)
	}
	t.Logf("%d of %d nodes advertised the task store unreachable during the outage", flagged, len(c.Procs))
	if !unreachable && flagged > 0 {
		t.Errorf("%d nodes advertised the task store unreachable while it answered", flagged)
	}
	if unreachable && flagged == 0 {
		t.Errorf("no node advertised the task store unreachable in a %v outage: the check above tested nothing", upAt.Sub(downAt).Round(time.Millisecond))
	}
	c.CheckInvariants(t, convergeTimout)
	c.StopAll(t)
}

// TestPostgresUnreachableAtStart: a node started while its database is
// down comes up, its /readyz is 503 naming the task store and the error
// (the URL's password hidden), a submit gets 503 and no 202; once the
// database is up the node turns ready by itself and delivers.
func TestPostgresUnreachableAtStart(t *testing.T) {
	srv := pgServer(t)
	if err := srv.StopImmediate(t.Context()); err != nil {
		t.Fatal(err)
	}
	url := strings.Replace(srv.URL("postgres"), "postgres@", "postgres:s3cret-pw@", 1)
	cfg := ProcessConfig{NodeID: "n1", BootstrapExpect: 1, ExtraArgs: []string{"--task-store", "postgres"},
		Env: []string{"FUSEBOX_POSTGRES_URL=" + url}}
	if err := assignPorts(&cfg, "127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	p := NewProcess(t, cfg)
	if err := p.Launch(); err != nil {
		t.Fatal(err)
	}
	testwait.ForErr(t, convergeTimout, "/readyz to name the unreachable task store", func() error {
		body, code, err := readyz(p)
		if err != nil {
			return err
		}
		if code != http.StatusServiceUnavailable || !strings.Contains(body, "postgres task store not open") || !strings.Contains(body, `"raft_leader":"n1"`) {
			return fmt.Errorf("/readyz %d %s", code, body)
		}
		if strings.Contains(body, "s3cret-pw") {
			t.Fatalf("/readyz shows the password: %s", body)
		}
		return nil
	})
	dest := NewDest(t)
	for i := range 3 {
		_, err := p.Client().SubmitTask(t.Context(), callbackTask("ns", "wf", dest.CallbackURL(), i))
		var ae *api.Error
		if !errors.As(err, &ae) || ae.Status != http.StatusServiceUnavailable || ae.Code != api.CodeUnavailable {
			t.Fatalf("submit with the database down = %v, want a 503 unavailable", err)
		}
	}
	if p.LogContains("s3cret-pw") {
		t.Fatal("the node logged the database password")
	}
	if err := srv.StartAgain(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := p.WaitReady(t.Context()); err != nil {
		t.Fatal(err)
	}
	acc, err := p.Client().SubmitTask(t.Context(), callbackTask("ns", "wf", dest.CallbackURL(), 9))
	if err != nil {
		t.Fatal(err)
	}
	testwait.ForErr(t, convergeTimout, "the task delivered", func() error {
		if dest.Deliveries()[acc.TaskID] == 0 {
			return fmt.Errorf("task %s not delivered", acc.TaskID)
		}
		return nil
	})
	if n := len(dest.Deliveries()); n != 1 {
		t.Fatalf("%d tasks delivered, want only the one accepted", n)
	}
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
}

// readyz returns p's /readyz body and status.
func readyz(p *Process) (string, int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.baseURL()+"/readyz", nil)
	if err != nil {
		return "", 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), resp.StatusCode, err
}

// TestPostgresNewClusterOnOldDatabase: every node of a cluster loses its
// data dir (SIGKILL, new data dirs: the Raft state is gone) while tasks
// wait in the database for a destination that hangs; a cluster started
// afresh on that database, with the same node names, delivers every one of
// them once the destination is back. The database's fences (owner and
// epoch of each shard's last acquire, raised by the old cluster's moves)
// are ahead of the new cluster's first shard map; its leader raises the
// map's epochs past them (ownership/fences.go). Before, every acquire was
// refused and those shards' tasks waited for ever.
func TestPostgresNewClusterOnOldDatabase(t *testing.T) {
	srv := pgServer(t)
	opts := pgOptions(srv.URL("postgres"))
	old := newTaskCluster(t, 3, opts)
	dest := NewDest(t)
	// The destination holds every call, past the kill: no call of the old
	// cluster ends, so no breaker opens and no task is written back for
	// later (an open breaker's refused tasks are written back at their
	// turns, up to a minute out here, and the new cluster, whose breakers
	// are closed, would wait for those times: 70 s in some runs, more
	// than the test's wait in one).
	dest.SetMode(t, transporttest.ModeSlow)
	setConfig(t, old, dynconfig.KeyCallbackRequestTimeout, transport.BreakerDestination(breakerpool.TaskGroupCallback, dest.CallbackURL()), `"5m"`)
	// Callbacks: they need nothing of the Raft state (a Nexus endpoint
	// would have to be registered on the new cluster before its first call).
	l := NewTaskLoad(old, "olddb", func(i int) (api.TaskSubmit, *Dest) {
		return callbackTask(fmt.Sprintf("ns-%d", i%4), fmt.Sprintf("wf-%d", i), dest.CallbackURL(), i), dest
	})
	if n := l.SubmitBatch(200); n != 200 {
		t.Fatalf("%d of 200 accepted: %v", n, l.Stats().LastErr)
	}
	// Raise the old cluster's epochs: a node's restart moves its shards
	// away and back.
	if err := old.Procs[1].Restart(t.Context()); err != nil {
		t.Fatal(err)
	}
	testwait.ForErr(t, convergeTimout, "an agreed shard map with every shard owned after the restart", old.sameShardMap)
	top := highestEpoch(t, old)
	for _, p := range old.Procs {
		if err := p.Kill(); err != nil {
			t.Fatal(err)
		}
	}

	dest.SetMode(t, transporttest.ModeUp)
	c := newTaskCluster(t, 3, opts)
	l.c = c
	rep := l.Check(t, 2*convergeTimout)
	newTop := highestEpoch(t, c)
	t.Logf("old cluster's highest epoch %d, new cluster's %d; %v", top, newTop, rep)
	if rep.Succeeded != rep.Accepted {
		t.Errorf("%d of %d accepted tasks succeeded on the new cluster", rep.Succeeded, rep.Accepted)
	}
	if top < 2 {
		t.Errorf("the old cluster's epochs stayed at %d: the restart raised none, and the test tested less than it says", top)
	}
}

// highestEpoch is the highest shard epoch of c's committed map.
func highestEpoch(t *testing.T, c *Cluster) uint64 {
	t.Helper()
	m, _, err := shardMap(c.WaitForLeader(t, leaderTimeout))
	if err != nil {
		t.Fatal(err)
	}
	top := uint64(0)
	for _, a := range m {
		top = max(top, a.Epoch)
	}
	return top
}
