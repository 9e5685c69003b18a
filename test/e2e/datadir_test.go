package e2e

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"fusebox/api"
	"fusebox/internal/testwait"
)

// refusedRun launches p, waits for it to exit, and requires a non-zero exit
// status and a log (of this run) that says every one of want and never
// "panic".
func refusedRun(t *testing.T, p *Process, want ...string) {
	t.Helper()
	if err := p.Launch(); err != nil {
		t.Fatal(err)
	}
	err := p.Wait(readyTimeout)
	var ee *exec.ExitError
	if err == nil {
		t.Fatalf("%s exited 0; want a refusal", p.Name())
	} else if !asExitError(err, &ee) {
		_ = p.Kill()
		t.Fatalf("%s did not exit: %v", p.Name(), err)
	}
	run := lastRun(p)
	for _, w := range want {
		if !strings.Contains(run, w) {
			t.Errorf("%s: exit %d, but the log does not say %q:\n%s", p.Name(), ee.ExitCode(), w, run)
		}
	}
	if strings.Contains(strings.ToLower(run), "panic") {
		t.Errorf("%s: the log mentions a panic:\n%s", p.Name(), run)
	}
}

func asExitError(err error, ee **exec.ExitError) bool {
	e, ok := err.(*exec.ExitError)
	if ok {
		*ee = e
	}
	return ok && e.ExitCode() != 0
}

// lastRun is the log of p's latest run (after its "==== e2e: run" header).
func lastRun(p *Process) string {
	b, _ := os.ReadFile(p.LogPath())
	s := string(b)
	if i := strings.LastIndex(s, "==== e2e: run #"); i >= 0 {
		s = s[i:]
	}
	return s
}

// stoppedSingleWithState runs a one-node cluster, writes to it, stops it
// (exit 0) and returns it: its data dir holds a Raft log.
func stoppedSingleWithState(t *testing.T) *Process {
	t.Helper()
	p := startSingle(t)
	if _, err := p.Client().PutEndpoint(context.Background(), api.Endpoint{Name: "ep-1", URL: "http://127.0.0.1:1/"}); err != nil {
		t.Fatal(err)
	}
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLostRaftLogRefused(t *testing.T) {
	p := stoppedSingleWithState(t)
	spare := p.cfg.DataDir + "-copy"
	if err := os.CopyFS(spare, os.DirFS(p.cfg.DataDir)); err != nil {
		t.Fatal(err)
	}
	// The log store (raft-wal): its directory deleted.
	wal := filepath.Join(p.cfg.DataDir, "wal")
	if err := os.RemoveAll(wal); err != nil {
		t.Fatal(err)
	}
	refusedRun(t, p, filepath.Join(wal, walMetaFile)+" is missing", "--rejoin-empty", "refusing to start", "Restore "+wal+" from a backup")
	if _, err := os.Stat(wal); err == nil {
		t.Error("the refused start created a fresh log store")
	}

	// Its meta file, which holds the term and vote, emptied (zero bytes).
	p.cfg.DataDir = spare
	meta := filepath.Join(spare, "wal", walMetaFile)
	if err := os.Truncate(meta, 0); err != nil {
		t.Fatal(err)
	}
	refusedRun(t, p, meta+" is empty (0 bytes)", "--rejoin-empty")
}

// walMetaFile is raft-wal's meta file (metadb.FileName) in the data dir's
// wal/ directory.
const walMetaFile = "wal-meta.db"

// addSnapshot writes a snapshot into a stopped node's data dir with raft's
// own FileSnapshotStore (a real node snapshots only after 8192 entries) and
// returns its directory. It is newer than anything in the log, so raft would
// pick it first.
func addSnapshot(t *testing.T, dataDir, node string) string {
	t.Helper()
	fs, err := raft.NewFileSnapshotStore(dataDir, 2, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	_, trans := raft.NewInmemTransport("")
	conf := raft.Configuration{Servers: []raft.Server{{ID: raft.ServerID(node), Address: "127.0.0.1:1", Suffrage: raft.Voter}}}
	sink, err := fs.Create(raft.SnapshotVersionMax, 1_000_000, 1_000, conf, 1, trans)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sink.Write([]byte(`{"format":"fusebox-raftstore","version":1,"applied":1000000}` + "\n")); err != nil {
		t.Fatal(err)
	}
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dataDir, "snapshots", sink.ID())
}

func TestDamagedSnapshotRefused(t *testing.T) {
	p := stoppedSingleWithState(t)
	base := p.cfg.DataDir
	for i, tc := range []struct {
		name, file, want string
		damage           func(path string) error
	}{
		{"meta.json missing", "meta.json", "is missing", os.Remove},
		{"meta.json garbled", "meta.json", "is not valid snapshot metadata JSON", func(path string) error {
			return os.WriteFile(path, []byte("{\"Version\":1,\"ID\":\x00garbage"), 0o600)
		}},
		{"meta.json empty", "meta.json", "is empty", func(path string) error { return os.Truncate(path, 0) }},
		{"state.bin missing", "state.bin", "is missing", os.Remove},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := fmt.Sprintf("%s-%d", base, i)
			if err := os.CopyFS(dir, os.DirFS(base)); err != nil {
				t.Fatal(err)
			}
			snap := addSnapshot(t, dir, p.Name())
			path := filepath.Join(snap, tc.file)
			if err := tc.damage(path); err != nil {
				t.Fatal(err)
			}
			p.cfg.DataDir = dir
			refusedRun(t, p, "snapshot file "+path+" "+tc.want, "--data-dir")
		})
	}
}

// TestRejoinEmpty: a follower of a 3-node cluster loses its Raft log. A
// plain restart is refused; with --rejoin-empty it asks the leader to drop
// its old entry, rejoins as a non-voter, is promoted, and ends with every
// task accepted before. A writer runs throughout and must never fail: the
// cluster keeps its quorum the whole time.
func TestRejoinEmpty(t *testing.T) {
	c := newTaskCluster(t, 3)
	dest := NewDest(t)
	l := NewTaskLoad(c, "rejoin", func(i int) (api.TaskSubmit, *Dest) {
		return callbackTask(fmt.Sprintf("ns-%d", i%3), fmt.Sprintf("wf-%d", i), dest.CallbackURL(), i), dest
	})
	n := pick2(600, 3000)
	for done := 0; done < n; done += 200 {
		if got := l.SubmitBatch(min(200, n-done)); got != min(200, n-done) {
			t.Fatalf("batch accepted %d of %d: %v", got, min(200, n-done), l.Stats())
		}
	}
	accepted := l.Accepted()

	w := NewWriter(c, "rejoin-ep-", dest.NexusURL())
	w.Run(50 * time.Millisecond)
	defer w.Stop()

	victim := c.Followers(t)[0]
	if err := victim.Kill(); err != nil { // a crash: it is still a voter
		t.Fatal(err)
	}
	wal := filepath.Join(victim.cfg.DataDir, "wal")
	if err := os.RemoveAll(wal); err != nil {
		t.Fatal(err)
	}
	refusedRun(t, victim, filepath.Join(wal, walMetaFile)+" is missing", "--rejoin-empty")

	victim.cfg.Env = append(victim.cfg.Env, "FUSEBOX_REJOIN_EMPTY=true")
	begin := time.Now()
	if err := victim.Restart(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s rejoined and ready in %v", victim.Name(), time.Since(begin).Round(time.Millisecond))
	run := lastRun(victim)
	i := strings.Index(run, "the leader dropped this node's old raft entry")
	if i < 0 {
		t.Fatalf("%s: no sign that the leader dropped its old entry:\n%s", victim.Name(), run)
	}
	t.Logf("%s", run[i:i+strings.IndexByte(run[i:], '\n')])
	testwait.ForErr(t, convergeTimout, "3 voters on every node", func() error { return c.CheckMembership(3) })
	testwait.ForErr(t, convergeTimout, "every accepted task on the rejoined node", func() error {
		have, err := listAllTasks(victim, "rejoin-")
		if err != nil {
			return err
		}
		for _, a := range accepted {
			if _, ok := have[a.ID]; !ok {
				return fmt.Errorf("%s lacks task %s (%d of %d present)", victim.Name(), a.ID, len(have), len(accepted))
			}
		}
		return nil
	})
	w.Stop()
	if s := w.Stats(); s.Failed != 0 || w.Acked() == 0 {
		t.Errorf("writes during the rejoin: %v; want none failed (quorum kept throughout)", s)
	}
	w.WaitVerified(t, convergeTimout, c.Live())
	t.Logf("%d tasks on the rejoined node; writer %v", len(accepted), w.Stats())
	c.CheckInvariants(t, convergeTimout)
	c.StopAll(t)
}
