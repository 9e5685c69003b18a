package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"fusebox/api"
	"fusebox/breakerpool"
	"fusebox/dynconfig"
	"fusebox/internal/testwait"
	"fusebox/raftstore/state"
	"fusebox/transport"
)

// buildStamped builds fusebox as a release of log version lv would be: the
// same code, told by the linker to advertise, propose and apply only the
// command types of lv (raftstore/logversion.go).
func buildStamped(t *testing.T, lv int) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), fmt.Sprintf("fusebox-logv%d", lv))
	cmd := exec.Command("go", "build", "-o", out,
		"-ldflags", "-X fusebox/raftstore/state.logVersionStamp="+strconv.Itoa(lv), "fusebox/cmd/node")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build (log version %d): %v\n%s", lv, err, b)
	}
	return out
}

// A rolling upgrade on real processes: n3 runs a build of the base log
// version, n1 and n2 the current one. While n3 is behind, a config write is
// proposed as the base type (set_config), which n3 applies: it stays up and
// sees every value. Had the proposer used set_config_value, n3's build
// would meet a type it does not know and halt (readyz: halted). Once n3
// runs the current build, the cluster's log version moves up and the write
// goes through with the new type on every node. Tasks are submitted and
// delivered (submit and complete entries) before and after the upgrade. A
// task import, which has no older type to fall back to, is refused with
// upgrade_pending while n3 is behind and goes through after.
func TestMixedVersionRollingUpgrade(t *testing.T) {
	if state.LogVersion <= state.LogVersionBase {
		t.Skip("this build has no command type newer than the base")
	}
	old := buildStamped(t, state.LogVersionBase)
	c := NewCluster(t, 3, ClusterOptions{Tweak: func(cfg *ProcessConfig) {
		if cfg.NodeID == "n3" {
			cfg.Bin = old
		}
	}})
	n3 := c.Node("n3")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	logVersions := func(want int) func() error {
		return func() error {
			for _, p := range c.Procs {
				info, err := p.Client().Raft(ctx)
				if err != nil {
					return fmt.Errorf("%s: %w", p.Name(), err)
				}
				if info.LogVersion != want {
					return fmt.Errorf("%s sees cluster log version %d (behind: %v), want %d", p.Name(), info.LogVersion, info.LogVersionBehind, want)
				}
			}
			return nil
		}
	}
	testwait.ForErr(t, 30*time.Second, "every node seeing the base log version", logVersions(state.LogVersionBase))
	info, err := c.Procs[0].Client().Raft(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("n3 (log version %d)", state.LogVersionBase); len(info.LogVersionBehind) != 1 || info.LogVersionBehind[0] != want {
		t.Fatalf("n1 reports behind %v, want [%s]", info.LogVersionBehind, want)
	}

	// A write while n3 is behind: applied everywhere, n3 stays up.
	setAndSee := func(value int) {
		t.Helper()
		if _, err := c.Procs[0].Client().ConfigSet(ctx, dynconfig.KeyOutboundTaskBatchSize, api.ConfigWrite{Value: json.RawMessage(strconv.Itoa(value))}); err != nil {
			t.Fatalf("config write %d: %v", value, err)
		}
		testwait.ForErr(t, 30*time.Second, fmt.Sprintf("every node applying batch size %d, and ready", value), func() error {
			for _, p := range c.Procs {
				entries, err := p.Client().ConfigGet(ctx, dynconfig.KeyOutboundTaskBatchSize)
				if err != nil {
					return fmt.Errorf("%s: %w", p.Name(), err)
				}
				if len(entries) != 1 || string(entries[0].Value) != strconv.Itoa(value) {
					return fmt.Errorf("%s has %+v", p.Name(), entries)
				}
				if st, err := p.get(ctx, "/readyz"); err != nil || st != http.StatusOK {
					return fmt.Errorf("%s not ready (HTTP %d, %v): halted?", p.Name(), st, err)
				}
			}
			return nil
		})
	}
	setAndSee(7)

	// Tasks while n3 is behind: submits and completions go as the JSON
	// types, which n3 applies; every node ends with the same terminal tasks.
	testwait.ForErr(t, convergeTimout, "an agreed shard map with every shard owned", c.sameShardMap)
	dest := NewDest(t)
	tasks := func(name string) {
		t.Helper()
		l := NewTaskLoad(c, name, func(i int) (api.TaskSubmit, *Dest) {
			return callbackTask(fmt.Sprintf("ns-%d", i%3), fmt.Sprintf("wf-%d", i), dest.CallbackURL(), i), dest
		})
		if got := l.SubmitBatch(60); got != 60 {
			t.Fatalf("%s: batch accepted %d of 60: %v", name, got, l.Stats())
		}
		rep := l.Check(t, convergeTimout)
		if rep.Succeeded != 60 {
			t.Fatalf("%s: %v", name, rep)
		}
		t.Logf("%s: %v", name, rep)
	}
	tasks("mixed-old")

	// An import (import_tasks, log version 6) has no older type to fall
	// back to: while n3 is behind it is refused before it is proposed.
	moved := movedTask(t, dest)
	var ae *api.Error
	if _, err := c.Procs[0].Client().ImportTasks(ctx, []api.TaskExport{moved}); !errors.As(err, &ae) ||
		ae.Status != http.StatusConflict || ae.Code != api.CodeUpgradePending {
		t.Fatalf("import while n3 is behind = %v, want 409 upgrade_pending", err)
	}

	// Upgrade n3 in place: same data dir, the current build.
	if err := n3.Stop(); err != nil {
		t.Fatal(err)
	}
	n3.cfg.Bin = ""
	if err := n3.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	testwait.ForErr(t, 30*time.Second, "every node seeing the current log version", logVersions(state.LogVersion))
	setAndSee(9)
	// And after the upgrade, as the binary task types (LogVersionTasksBin).
	tasks("mixed-new")
	// The import now goes through (n3 applies it too) and its task is
	// delivered with the id and attempts it brought.
	res, err := c.Procs[1].Client().ImportTasks(ctx, []api.TaskExport{moved})
	if err != nil || len(res.Results) != 1 || res.Results[0].Outcome != api.OutcomeAccepted {
		t.Fatalf("import after the upgrade = %+v, %v", res, err)
	}
	testwait.ForErr(t, convergeTimout, "the imported task delivered", func() error {
		tk, err := n3.Client().Task(ctx, moved.ID)
		if err != nil || tk.Status != state.TaskSucceeded || tk.Attempts != moved.Attempts+1 {
			return fmt.Errorf("task on n3: %+v, %v", tk, err)
		}
		return nil
	})
	setAndSee(11) // every node still ready: none met an entry it does not know
}

// movedTask is a pending callback task as another cluster's export holds
// it: its own id, two attempts made, created a minute ago.
func movedTask(t *testing.T, dest *Dest) api.TaskExport {
	t.Helper()
	req, err := json.Marshal(transport.Request{TaskGroup: breakerpool.TaskGroupCallback, URL: dest.CallbackURL(),
		Body: []byte(`{"moved":true}`), ContentType: "application/json"})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	return api.TaskExport{Version: api.TaskExportVersion, ID: state.NewTaskID(now), NamespaceID: "ns-0",
		WorkflowID: "wf-moved", TaskGroup: breakerpool.TaskGroupCallback, Destination: dest.CallbackURL(),
		Request: req, Attempts: 2, NextAttemptAt: now, CreatedAt: now.Add(-time.Minute)}
}

// A node downgraded below what its log holds: started with a build of the
// base log version on a data dir the current build wrote newer command
// types into (set_config_value, binary task entries), it halts at the
// first entry it does not know and stops — exit 1, the halt in its log —
// and the others deliver every task. It used to stay up, not ready, and
// after a crash (no drain mark from a graceful stop) placed as an owner:
// its shards' tasks waited for it (125 of 150 delivered in 45 s).
func TestDowngradedNodeStops(t *testing.T) {
	if state.LogVersion <= state.LogVersionBase {
		t.Skip("this build has no command type newer than the base")
	}
	old := buildStamped(t, state.LogVersionBase)
	c := NewCluster(t, 3, ClusterOptions{})
	n3 := c.Node("n3")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := c.Procs[0].Client().ConfigSet(ctx, dynconfig.KeyOutboundTaskBatchSize, api.ConfigWrite{Value: json.RawMessage("7")}); err != nil {
		t.Fatal(err)
	}
	testwait.ForErr(t, convergeTimout, "an agreed shard map with every shard owned", c.sameShardMap)
	dest := NewDest(t)
	l := NewTaskLoad(c, "downgrade", func(i int) (api.TaskSubmit, *Dest) {
		return callbackTask(fmt.Sprintf("ns-%d", i%3), fmt.Sprintf("wf-%d", i), dest.CallbackURL(), i), dest
	})
	if got := l.SubmitBatch(60); got != 60 {
		t.Fatalf("batch accepted %d of 60: %v", got, l.Stats())
	}
	if rep := l.Check(t, convergeTimout); rep.Succeeded != 60 {
		t.Fatalf("before the downgrade: %v", rep)
	}

	// A crash, then a rollback: no graceful stop marked n3 draining, so
	// its shards are still its own, or come back to it.
	if err := n3.Kill(); err != nil {
		t.Fatal(err)
	}
	n3.cfg.Bin = old
	if err := n3.Launch(); err != nil { // not Start: it stops before it is ready
		t.Fatal(err)
	}
	downAt := time.Now()
	testwait.ForErr(t, convergeTimout, "n3 stopped by itself", func() error {
		if !n3.Running() {
			return nil
		}
		return errors.New("n3 still running")
	})
	run := lastRun(n3)
	if n3.ExitErr() == nil || !strings.Contains(run, "halted at raft index") || !strings.Contains(run, "cannot follow the cluster and stops") {
		t.Fatalf("n3 exited (%v) without saying it halted; its run:\n%s", n3.ExitErr(), run)
	}
	t.Logf("n3 (log version %d) stopped %v after its start: %v", state.LogVersionBase, time.Since(downAt).Round(time.Millisecond), n3.ExitErr())

	// Without it, the others deliver every task: no shard stays with n3.
	if got := l.SubmitBatch(90); got != 90 {
		t.Fatalf("batch accepted %d of 90 with n3 down: %v", got, l.Stats())
	}
	rep := l.Check(t, convergeTimout)
	if rep.Succeeded != 150 {
		t.Fatalf("with n3 stopped: %v", rep)
	}
	t.Logf("with n3 stopped: %v", rep)
}
