package raftstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"fusebox/internal/testwait"
	"fusebox/raftstore/state"
)

// Raft write path (issue 17 §3): entries/s with 64 concurrent writers on a
// 3-voter loopback group, each write one small entry, fsync on.
//
//   - bare-bolt, bare-wal: hashicorp/raft alone — the same raft config as the
//     Store's fast preset (timings, BatchApplyCh, CommitTimeout), the same
//     transport settings, the same log store with the same 512-entry log
//     cache, a file snapshot store, and an FSM that only counts. Each writer
//     calls raft.Apply with a payload the size of the Store's entry.
//
//   - config-bolt, config-wal: fusebox's Store with Config.LogStore set,
//     each writer calling Store.Apply with a set_config of a ~128-byte value
//     (BenchmarkApply's command): request id, version gate, FSM apply into
//     go-memdb with its config history row.
//
//   - submit-bolt, submit-wal: the same Store, each writer submitting one
//     ~200-byte task with its own request id (SubmitTasks: one entry per
//     call, no group commit), binary-encoded: the task write path.
//
//   - interleaved-config-bolt, interleaved-submit-bolt: a bare group and a
//     Store cluster side by side, fed in alternating blocks of
//     raftWriteBlock entries (64 writers each), reporting each side's
//     entries/s over its blocks and store/bare. Separate runs on a shared
//     machine meet different loads (bare-bolt alone swung 4.7k–10.4k
//     entries/s between back-to-back runs of one binary); alternating
//     blocks meet the same one.
//
// tools/benchreport holds the Store to ≥ 0.8× bare-bolt and reports the
// wal modes against the bolt ones (the log store decision).
const (
	raftWriteWriters = 64
	raftWriteBlock   = 1000
)

func BenchmarkRaftWrite(b *testing.B) {
	for _, mode := range []string{"bare-bolt", "config-bolt", "submit-bolt", "submit-wal", "config-wal", "bare-wal",
		"interleaved-config-bolt", "interleaved-submit-bolt"} {
		b.Run(mode, func(b *testing.B) {
			if rest, ok := strings.CutPrefix(mode, "interleaved-"); ok {
				what, kind, _ := strings.Cut(rest, "-")
				bare, store := raftWriteApply(b, "bare", kind), raftWriteApply(b, what, kind)
				var took, cpu [2]time.Duration
				b.ResetTimer()
				for done := 0; done < b.N; done += raftWriteBlock {
					n := min(raftWriteBlock, b.N-done)
					for side, apply := range []func(w, i int) error{bare, store} {
						cpu0 := processCPU()
						took[side] += runBlock(b, raftWriteWriters, done, n, apply)
						cpu[side] += processCPU() - cpu0
					}
				}
				b.StopTimer()
				b.ReportMetric(float64(b.N)/took[0].Seconds(), "bare-entries/s")
				b.ReportMetric(float64(b.N)/took[1].Seconds(), "store-entries/s")
				b.ReportMetric(float64(took[0])/float64(took[1]), "store/bare")
				b.ReportMetric(float64(cpu[0].Microseconds())/float64(b.N), "bare-cpu-us/entry")
				b.ReportMetric(float64(cpu[1].Microseconds())/float64(b.N), "store-cpu-us/entry")
				return
			}
			what, kind, _ := strings.Cut(mode, "-")
			runWriters(b, raftWriteWriters, raftWriteApply(b, what, kind))
		})
	}
}

// raftWriteApply starts what ("bare", "config", "submit") on kind's log
// store and returns one writer's call.
func raftWriteApply(b *testing.B, what, kind string) func(w, i int) error {
	switch what {
	case "bare":
		g := bareRaftCluster(b, kind)
		payload := make([]byte, len(storeWriteCmd(b, 0, 0))+34) // + the entry frame and request id
		return func(int, int) error { return g.apply(payload) }
	case "config":
		leader := benchStoreCluster(b, kind)
		return func(w, i int) error {
			_, err := leader.Apply(context.Background(), storeWriteCmd(b, w, i), "")
			return err
		}
	case "submit":
		leader := benchStoreCluster(b, kind)
		req := json.RawMessage(`{"task_group":"callbacks.Invocation","url":"http://127.0.0.1:1/cb","body":"` + strings.Repeat("x", 120) + `"}`)
		return func(w, i int) error {
			c := state.SubmitTasksCommand{CommandMeta: state.CommandMeta{RequestID: NewRequestID()}, Tasks: []state.NewTask{{NamespaceID: "ns",
				WorkflowID: fmt.Sprintf("wf-%d", i), TaskGroup: "callbacks.Invocation", Destination: "http://127.0.0.1:1/cb", Request: req}}}
			_, _, err := leader.SubmitTasks(context.Background(), c)
			return err
		}
	}
	b.Fatalf("unknown raft write mode %q", what)
	return nil
}

// runBlock makes calls from..from+n-1 of apply over writers goroutines and
// returns the time they took.
func runBlock(b *testing.B, writers, from, n int, apply func(w, i int) error) time.Duration {
	var wg sync.WaitGroup
	var next atomic.Int64
	start := time.Now()
	for w := range writers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := apply(w, from+i); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return time.Since(start)
}

// benchStoreCluster is benchTaskCluster's 3-node cluster (16 shards, a
// settled map) on kind's log store.
func benchStoreCluster(b *testing.B, kind string) *Store {
	return benchTaskClusterWith(b, 3, func(cfg *Config) { cfg.LogStore = kind })
}

// storeWriteCmd is the config writers' command: BenchmarkApply's set_config.
func storeWriteCmd(b *testing.B, w, i int) []byte {
	value := json.RawMessage(`{"pad":"` + strings.Repeat("x", 100) + `"}`)
	cmd, err := state.EncodeCommand(state.MsgSetConfig, state.SetConfigCommand{CommandMeta: state.CommandMeta{At: time.Now()}, Key: fmt.Sprintf("w%d.k%d", w, i%16), Value: value})
	if err != nil {
		b.Fatal(err)
	}
	return cmd
}

// runWriters runs b.N calls of apply spread over writers goroutines and
// reports entries/s and the per-call latency quantiles.
func runWriters(b *testing.B, writers int, apply func(w, i int) error) {
	var mu sync.Mutex
	lat := make([]time.Duration, 0, b.N)
	var wg sync.WaitGroup
	var next atomic.Int64
	b.ResetTimer()
	cpu0 := processCPU()
	start := time.Now()
	for w := range writers {
		wg.Go(func() {
			mine := make([]time.Duration, 0, b.N/writers+1)
			defer func() {
				mu.Lock()
				lat = append(lat, mine...)
				mu.Unlock()
			}()
			for {
				i := int(next.Add(1)) - 1
				if i >= b.N {
					return
				}
				t := time.Now()
				if err := apply(w, i); err != nil {
					b.Error(err)
					return
				}
				mine = append(mine, time.Since(t))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu := processCPU() - cpu0
	b.StopTimer()
	b.ReportMetric(float64(len(lat))/elapsed.Seconds(), "entries/s")
	b.ReportMetric(float64(cpu.Microseconds())/float64(max(len(lat), 1)), "cpu-us/entry")
	reportLatencies(b, lat, elapsed)
}

// countFSM is the bare baseline's FSM: it counts entries.
type countFSM struct{ n atomic.Uint64 }

func (f *countFSM) Apply(*raft.Log) any                 { f.n.Add(1); return nil }
func (f *countFSM) Snapshot() (raft.FSMSnapshot, error) { return countSnap{}, nil }
func (f *countFSM) Restore(rc io.ReadCloser) error      { return rc.Close() }

type countSnap struct{}

func (countSnap) Persist(sink raft.SnapshotSink) error { return sink.Close() }
func (countSnap) Release()                             {}

// bareGroup is the baseline's three raft voters.
type bareGroup struct {
	rafts  []*raft.Raft
	leader atomic.Pointer[raft.Raft]
}

// apply applies data on the leader, and like Store.Apply retries on
// another leader when leadership moved (a loaded 2-core machine can lapse
// the fast preset's 100 ms lease), for up to 10 s.
func (g *bareGroup) apply(data []byte) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := g.leader.Load()
		err := r.Apply(data, 10*time.Second).Error()
		if err == nil || time.Now().After(deadline) ||
			!(errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) || errors.Is(err, raft.ErrLeadershipTransferInProgress)) {
			return err
		}
		for time.Now().Before(deadline) {
			if l := g.findLeader(); l != nil {
				g.leader.CompareAndSwap(r, l)
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

func (g *bareGroup) findLeader() *raft.Raft {
	for _, r := range g.rafts {
		if r.State() == raft.Leader {
			return r
		}
	}
	return nil
}

// bareRaftCluster starts three hashicorp/raft voters on loopback with the
// Store's fast-preset raft config and kind's log store, once a leader is
// elected. Everything is shut down in b's cleanup.
func bareRaftCluster(b *testing.B, kind string) *bareGroup {
	b.Helper()
	hl := hclog.NewNullLogger()
	type peer struct {
		r     *raft.Raft
		trans *raft.NetworkTransport
		logs  logStore
	}
	var peers []peer
	b.Cleanup(func() {
		for _, p := range peers {
			_ = p.r.Shutdown().Error()
			p.trans.CloseStreams()
			_ = p.trans.Close()
			_ = p.logs.Close()
		}
	})
	var conf raft.Configuration
	var pending []func() (*raft.Raft, error)
	for i := range 3 {
		id := fmt.Sprintf("b%d", i+1)
		dir := b.TempDir()
		logs, err := openLogStore(dir, kind, hl)
		if err != nil {
			b.Fatal(err)
		}
		snaps, err := raft.NewFileSnapshotStoreWithLogger(dir, 2, hl)
		if err != nil {
			b.Fatal(err)
		}
		trans, err := raft.NewTCPTransportWithConfig("127.0.0.1:0", nil, transportConfig(hl))
		if err != nil {
			b.Fatal(err)
		}
		cfg := Config{NodeID: id, Preset: PresetFast}
		rc := cfg.raftConfig()
		rc.Logger = hl
		cache, err := raft.NewLogCache(raftLogCacheSize, logs)
		if err != nil {
			b.Fatal(err)
		}
		conf.Servers = append(conf.Servers, raft.Server{ID: raft.ServerID(id), Address: trans.LocalAddr(), Suffrage: raft.Voter})
		pending = append(pending, func() (*raft.Raft, error) {
			r, err := raft.NewRaft(rc, &countFSM{}, cache, logs, snaps, trans)
			if err == nil {
				peers = append(peers, peer{r, trans, logs})
			} else {
				_ = trans.Close()
				_ = logs.Close()
			}
			return r, err
		})
	}
	g := &bareGroup{}
	for _, start := range pending {
		r, err := start()
		if err != nil {
			b.Fatal(err)
		}
		g.rafts = append(g.rafts, r)
	}
	if err := g.rafts[0].BootstrapCluster(conf).Error(); err != nil {
		b.Fatal(err)
	}
	testwait.For(b, 15*time.Second, "a bare raft leader", func() bool { return g.findLeader() != nil })
	l := g.findLeader()
	if err := l.Barrier(10 * time.Second).Error(); err != nil {
		b.Fatal(err)
	}
	g.leader.Store(l)
	return g
}

// processCPU is this process's CPU time (user + system, every thread: the
// three replicas, the writers, the GC). On a machine shared with other
// work, CPU per entry moves far less than entries/s.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
