package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"fusebox/api"
	"fusebox/internal/testwait"
	"fusebox/transport/transporttest"
)

// TestMoveTasksToPostgres is the documented move (docs/scaling.md,
// "Moving to the postgres store") on real processes through the real CLI:
// a raft cluster holds 300 pending tasks (its destination answers 503);
// `fusebox admin tasks export` writes them (mode 0600, progress on stderr,
// the secret note); the raft cluster stops; a postgres cluster gets the
// endpoint, and `fusebox admin tasks import` inserts them, a second run
// adding none; once the destination is up every task is delivered exactly
// once, with its original task id as Nexus-Request-Id.
func TestMoveTasksToPostgres(t *testing.T) {
	srv := pgServer(t)
	testMoveTasks(t, newTaskCluster(t, 1), func() *Cluster { return newTaskCluster(t, 1, pgOptions(srv.URL("postgres"))) })
}

// TestMoveTasksToRaft is the way back: from a postgres cluster into a new
// three-node Raft-store cluster (import_tasks, replicated to every node).
func TestMoveTasksToRaft(t *testing.T) {
	srv := pgServer(t)
	testMoveTasks(t, newTaskCluster(t, 1, pgOptions(srv.URL("postgres"))), func() *Cluster { return newTaskCluster(t, 3) })
}

// testMoveTasks moves old's pending tasks to the cluster next starts.
func testMoveTasks(t *testing.T, old *Cluster, next func() *Cluster) {
	const n = 300
	dest := NewDest(t)
	dest.SetMode(t, transporttest.ModeUnavailable)
	prepare := func(c *Cluster) {
		putEndpoint(t, c, "ep-move", dest.NexusURL())
		setConfig(t, c, "history.outboundQueue.circuitBreakerSettings", "", `{"Timeout":"1s"}`)
	}

	prepare(old)
	cl := old.Procs[0].Client()
	ids := map[string]bool{}
	for b := 0; b < n; b += 100 {
		var batch []api.TaskSubmit
		for i := b; i < b+100; i++ {
			ts := nexusTask("ns-move", fmt.Sprintf("wf-%d", i), "ep-move", i)
			if i%3 == 0 {
				ts.RequestID = fmt.Sprintf("rid-%d", i)
			}
			batch = append(batch, ts)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		acc, err := cl.SubmitTasks(ctx, batch)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range acc.Results {
			ids[r.TaskID] = true
		}
	}
	testwait.ForErr(t, convergeTimout, "calls refused on the old cluster", func() error {
		if got := len(dest.Calls()); got < 10 {
			return fmt.Errorf("%d calls", got)
		}
		return nil
	})

	file := filepath.Join(t.TempDir(), "pending.jsonl")
	out, code := runBin(t, nil, "admin", "--addr", old.Procs[0].HTTPAddr(), "tasks", "export", "--output", file, "--page-size", "64")
	if code != 0 || !strings.Contains(out, fmt.Sprintf("exported %d pending task(s) to %s", n, file)) ||
		!strings.Contains(out, "exported 64 so far") || !strings.Contains(out, "keep it like a credential") {
		t.Fatalf("tasks export: exit %d\n%s", code, out)
	}
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("export file: %v %v, want mode 0600", fi, err)
	}
	if got := countLines(t, file); got != n {
		t.Fatalf("export file has %d lines, want %d", got, n)
	}
	old.StopAll(t) // the old cluster delivers nothing more
	before := len(dest.Deliveries())

	c := next()
	prepare(c)
	addr := c.Procs[0].HTTPAddr()
	out, code = runBin(t, nil, "admin", "--addr", addr, "tasks", "import", "--input", file, "--batch", "128")
	if code != 0 || !strings.Contains(out, fmt.Sprintf("imported %d task(s): %d added, 0 already there", n, n)) {
		t.Fatalf("tasks import: exit %d\n%s", code, out)
	}
	out, code = runBin(t, nil, "admin", "--addr", addr, "tasks", "import", "--input", file)
	if code != 0 || !strings.Contains(out, fmt.Sprintf("imported %d task(s): 0 added, %d already there", n, n)) {
		t.Fatalf("second tasks import: exit %d\n%s", code, out)
	}

	dest.SetMode(t, transporttest.ModeUp)
	testwait.ForErr(t, 2*convergeTimout, "every moved task delivered", func() error {
		d := dest.Deliveries()
		missing := 0
		for id := range ids {
			if d[id] == 0 {
				missing++
			}
		}
		if missing > 0 {
			return fmt.Errorf("%d of %d tasks not delivered yet", missing, n)
		}
		return nil
	})
	d := dest.Deliveries()
	for id, k := range d {
		if !ids[id] {
			t.Errorf("delivered unknown request id %q", id)
		} else if k != 1 {
			t.Errorf("task %s delivered %d times", id, k)
		}
	}
	t.Logf("moved %d tasks; %d delivered before the move (want 0)", n, before)
	if before != 0 {
		t.Errorf("%d tasks were delivered by the old cluster", before)
	}
}

func countLines(t *testing.T, path string) int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	n := 0
	for sc.Scan() {
		n++
	}
	return n
}
