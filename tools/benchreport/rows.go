package main

// row is one line of the report: a figure, optionally its baseline measured
// in the same run, and the target it is held to.
type row struct {
	Issue  string // which issue asked for it
	What   string
	Pkg    string
	Bench  string // full sub-benchmark name without the -N suffix
	Metric string // "ns/op", "B/op", or a b.ReportMetric unit
	// Baseline, when set, is measured in the same `go test` run; the ratio
	// is Bench/Baseline on the same Metric.
	Baseline string
	// Target: "ratio<=X", "ratio>=X", "value<=X", "value>=X" or "" (report only).
	Target string
	// Time is the -benchtime for the package run this row belongs to
	// (rows of one package share the slowest setting).
	Time      string
	QuickTime string
	// Runs, when > 1, repeats the row's run (and its baseline's) that many
	// times, interleaved with the other groups' runs, and reports the
	// medians; the quick profile runs once. For the figures a shared,
	// noisy machine moves the most.
	Runs int
}

// preamble is the hand-written part of docs/benchmarks.md: what the
// baselines are, so a ratio can be read without opening the benchmark.
const preamble = `## Reading the baselines

- **Pool rows**: the baseline is plain gobreaker (two-step Allow+done) in a map, same keys, same calls.
  The target is held by ` + "`BenchmarkPoolVsRaw`" + `, which alternates blocks of 20,000 pool and raw calls in one
  run and reports the ratio of their totals (median of three runs): on this machine it repeats within a
  few hundredths, with a rare outlier when another job takes a core mid-run, where separate runs (the
  "separate runs" rows, medians of five) put the same ratio anywhere in 1.04–1.35×.
- **Delivery and executor rows** (#6) are the medians of three runs.
- **Raft rows**: one writer, one entry per call, on the same 3-node loopback cluster (fsync on).
- **Log store**: nodes run Raft on hashicorp/raft-wal since 2026-12-02 07:30 UTC (before: raft-boltdb/v2).
  Rows re-measured before then (their section's date says) ran on raft-boltdb.
- **Raft write rows** (` + "`BenchmarkRaftWrite`" + `, #17): 64 writers, one entry per call, 3 voters on loopback,
  fsync on. The baseline is bare hashicorp/raft with the Store's raft config (fast preset, batched apply
  channel), transport settings, log store and 512-entry log cache, an FSM that only counts, and entries of
  the Store's size. ` + "`config`" + ` is ` + "`Store.Apply`" + ` of a set_config (its config row and history row); ` + "`submit`" + ` is one
  task per ` + "`SubmitTasks`" + ` with its own request id (no group commit), binary-encoded. The wal rows are the same
  workloads on raft-wal (` + "`Config.LogStore`" + `), the bolt row of the same workload their baseline.
  Separate runs meet different loads on a shared machine (bare-bolt alone swung 4.7k–10.4k entries/s
  between back-to-back runs), so the ` + "`interleaved`" + ` rows feed a bare group and a Store cluster side by side
  in alternating blocks of 1,000 entries and report the ratio of their totals (it understates the Store's
  gain a little: the GC work the Store's blocks leave lands in the bare blocks too). ` + "`cpu-us/entry`" + ` is the
  process's CPU time (three replicas, writers, GC) per entry.
- **Hint delay**: memberlist's stock broadcast queue with serf-style re-gossip, no direct send.
- **Outbound executor / queue alone**: the same POST from a bare ` + "`net/http`" + ` client, same
  concurrency, to the same loopback destination. The Nexus sync start's CPU target is held by
  ` + "`BenchmarkOutboundInterleaved`" + `, which alternates blocks of 500 starts and 500 hand-made POSTs
  (order swapped every pair) and divides the process CPU of each side's blocks: as two
  sub-benchmarks run one after the other, the same binary's ratio moved 1.14–1.56 with the machine.
  The request series' cost (#20) is held the same way by ` + "`BenchmarkSeriesInterleaved`" + ` (blocks of
  callbacks through an executor with the series and counters on, and through one without); its
  separate-runs row stays for reference.
- **Durable delivery** (` + "`BenchmarkDelivery`" + `): raw loopback POSTs from one Go client with the cluster's
  delivery concurrency (3 nodes × 100), no queue and no Raft: the ceiling the destination and the
  box allow. The cluster figure includes submit (Raft entry of up to 500 tasks), the owner's read,
  the call, and the acknowledgement (a second Raft entry); all three replicas share this machine.
  ` + "`cpu-cores`" + ` is the test process's CPU time over the run's wall time: at ~1.9 of 2 the run is CPU-bound.
  ` + "`BenchmarkDeliveryInterleaved`" + ` holds the ratio the way the executor's row is held: blocks of 20,000 tasks
  delivered by the cluster and 20,000 raw POSTs alternate in one run (order swapped every pair), each
  side's rate over its own blocks' wall time, so a slow minute of the machine costs both sides.
- **One replica's apply** (` + "`BenchmarkFSMTaskLifecycle`" + `, ` + "`BenchmarkFSMTaskMemory`" + `): the FSM alone, no Raft:
  a task's submit and completion as ApplyBatch receives them, and the heap a pending task holds.
  Every replica pays both for every task. ` + "`BenchmarkFSMApplyEntry`" + ` is one replica's apply of ` + "`BenchmarkRaftWrite`" + `'s entries
  (one command each, its own request id, 64 per batch, past the request window). The baseline of the binary row is the same history in
  JSON entries (log version 2 and before), same run; ` + "`cpu-ns/op`" + ` is the process's CPU time per task
  (GC included), which a shared machine moves far less than wall time.
  ` + "`BenchmarkFSMTaskShards`" + ` applies a loaded node's history (binary submits of 500, group-committed
  completes, a standing backlog) at 16 and 256 shards on two FSMs in alternating blocks.
- **Process rows** (` + "`test/e2e`" + `): the same workloads on three ` + "`fusebox serve`" + ` processes built from this tree, fed
  and measured from the test process (one clock). In-process rows share one Go scheduler and heap between
  the three nodes; process rows are the deployed shape, each node with its own runtime and GC. Since
  2026-12-03 a run ends when n1 shows none of its tasks pending, failed or dead-lettered; before, the
  test listed every task of the run (about 15 % of a 20,000-task run's time on three processes), and
  rows measured before then include that cost. Since ` + "`a99f766`" + ` (2026-12-04) the destination of
  the throughput rows counts its calls without keeping them (` + "`transporttest.Destination.CountOnly`" + `);
  before, it kept each call with its headers and body, about 10 µs of the load process's CPU per
  call, paid by the cluster and the raw-HTTP side alike (the twenty-fifth session's section).
- **Postgres nodes rows** (#18): ` + "`BenchmarkProcessPostgresNodes`" + ` draws the 1 / 3 / 5-process curve, a fresh
  server and cluster per size, one after the other. ` + "`BenchmarkProcessPostgresNodesInterleaved`" + ` holds the
  targets: clusters of one, three and five processes on one server (a database each) take turns in
  blocks of 20,000 tasks, the others stopped (SIGSTOP) during a turn, every side warmed by one uncounted
  turn first; each side's rate is over its own blocks' wall time. Its ` + "`slices/task`" + ` rows count how
  often the nodes' threads were put on a CPU (` + "`/proc/<pid>/task/*/schedstat`" + `), about their context switches.
- **Sick egress** (` + "`BenchmarkSickEgress`" + `): three in-process nodes, one whose calls leave from 127.0.0.2, which one
  destination resets (its egress to it is cut) while another takes every node's calls; blocks of 6,000 tasks to
  each alternate in one run. The cut destination's tasks on that node's shards (about a third) go through a peer;
  the ratio is the cut destination's delivery rate over the healthy one's.
- **Beside a dead destination**: the same run with both destinations healthy; the ratio is the
  healthy destination's throughput kept. Each mode runs on a fresh cluster (a cluster slows as it
  retains tasks, which would favour whichever mode ran first).
- **Confirm rows** (#19): the same scenario and run under policy ` + "`probe`" + ` (the safe baseline) or
  ` + "`adopt`" + ` (the cheap one). "Calls until all open" counts a node as open once it is settled, not
  while paused for a confirmation round. The sick node's calls all fail at its own egress; the figure is
  the other four nodes' delivered tasks over their tasks in 10 s.
- **Fleet budget rows** (#19): the same fleet, backlog and per-host rate (200 calls/s, equal to the
  budget) with ` + "`fusebox.destination.fleetRPS`" + ` unset: every node sends at its own rate, up to N × the budget.
  "Busiest second" is the most calls the destination received in any sliding 1 s window; "budget used"
  is the calls from the end of the submits to the last call over budget × that time.
- **Growth rows**: the smallest size (16 shards, N=3) or, for dead-destination calls, policy ` + "`off`" + `
  (no hints, every node on its own) at the same N.

`

var rows = []row{
	// Breaker pool (foundation issue).
	{Issue: "#2", What: "pool vs raw gobreaker, interleaved: 1 key, serial", Pkg: "./breakerpool", Bench: "BenchmarkPoolVsRaw/keys=1/serial", Metric: "ratio", Target: "value<=1.25", Time: "150x", QuickTime: "30x", Runs: 3},
	{Issue: "#2", What: "pool vs raw gobreaker, interleaved: 1 key, parallel", Pkg: "./breakerpool", Bench: "BenchmarkPoolVsRaw/keys=1/parallel", Metric: "ratio", Target: "value<=1.25", Time: "150x", QuickTime: "30x", Runs: 3},
	{Issue: "#2", What: "pool vs raw gobreaker, interleaved: 10k keys, serial", Pkg: "./breakerpool", Bench: "BenchmarkPoolVsRaw/keys=10000/serial", Metric: "ratio", Target: "value<=1.25", Time: "150x", QuickTime: "30x", Runs: 3},
	{Issue: "#2", What: "pool vs raw gobreaker, interleaved: 10k keys, parallel", Pkg: "./breakerpool", Bench: "BenchmarkPoolVsRaw/keys=10000/parallel", Metric: "ratio", Target: "value<=1.25", Time: "150x", QuickTime: "30x", Runs: 3},
	{Issue: "#2", What: "  pool ns per call, 1 key, serial (interleaved)", Pkg: "./breakerpool", Bench: "BenchmarkPoolVsRaw/keys=1/serial", Metric: "pool-ns", Time: "150x", QuickTime: "30x", Runs: 3},
	{Issue: "#2", What: "  raw gobreaker ns per call, 1 key, serial (interleaved)", Pkg: "./breakerpool", Bench: "BenchmarkPoolVsRaw/keys=1/serial", Metric: "raw-ns", Time: "150x", QuickTime: "30x", Runs: 3},
	{Issue: "#2", What: "pool lookup+Allow+done, 1 key, serial (separate runs)", Pkg: "./breakerpool", Bench: "BenchmarkPoolAllow/keys=1/serial", Metric: "ns/op",
		Baseline: "BenchmarkRawGobreaker/keys=1/serial", Time: "1s", QuickTime: "200ms", Runs: 5},
	{Issue: "#2", What: "pool lookup+Allow+done, 1 key, parallel (separate runs)", Pkg: "./breakerpool", Bench: "BenchmarkPoolAllow/keys=1/parallel", Metric: "ns/op",
		Baseline: "BenchmarkRawGobreaker/keys=1/parallel", Time: "1s", QuickTime: "200ms", Runs: 5},
	{Issue: "#2", What: "pool lookup+Allow+done, 10k keys, serial (separate runs)", Pkg: "./breakerpool", Bench: "BenchmarkPoolAllow/keys=10000/serial", Metric: "ns/op",
		Baseline: "BenchmarkRawGobreaker/keys=10000/serial", Time: "1s", QuickTime: "200ms", Runs: 5},
	{Issue: "#2", What: "pool lookup+Allow+done, 10k keys, parallel (separate runs)", Pkg: "./breakerpool", Bench: "BenchmarkPoolAllow/keys=10000/parallel", Metric: "ns/op",
		Baseline: "BenchmarkRawGobreaker/keys=10000/parallel", Time: "1s", QuickTime: "200ms", Runs: 5},
	{Issue: "#2", What: "Allow on an open breaker", Pkg: "./breakerpool", Bench: "BenchmarkAllowOpen", Metric: "ns/op", Target: "value<=100", Time: "1s", QuickTime: "200ms"},
	{Issue: "#2", What: "memory per idle breaker", Pkg: "./breakerpool", Bench: "BenchmarkIdleBreakerBytes", Metric: "bytes/breaker", Target: "value<=1024", Time: "1x", QuickTime: "1x"},
	{Issue: "#2", What: "1M keys streamed with eviction: peak entries", Pkg: "./breakerpool", Bench: "BenchmarkEvictionStream", Metric: "peak-entries", Time: "1x", QuickTime: "-"},
	{Issue: "#2", What: "1M keys streamed with eviction: peak heap MiB", Pkg: "./breakerpool", Bench: "BenchmarkEvictionStream", Metric: "peak-heap-MiB", Time: "1x", QuickTime: "-"},

	// Control plane.
	{Issue: "#3", What: "Raft apply, 3 nodes, 1 writer (ops/s)", Pkg: "./raftstore", Bench: "BenchmarkApply/writers=1", Metric: "ops/s", Time: "2000x", QuickTime: "300x"},
	{Issue: "#3", What: "Raft apply, 3 nodes, 64 writers (ops/s)", Pkg: "./raftstore", Bench: "BenchmarkApply/writers=64", Metric: "ops/s",
		Baseline: "BenchmarkApply/writers=1", Target: "ratio>=1", Time: "2000x", QuickTime: "300x"},
	// The Raft write path against bare hashicorp/raft, and the log store
	// decision (issue 17 §3): 64 writers, 3 voters, one entry per call.
	{Issue: "#17", What: "Raft apply, 64 writers: Store set_config vs bare hashicorp/raft + raft-boltdb (entries/s)", Pkg: "./raftstore", Bench: "BenchmarkRaftWrite/config-bolt", Metric: "entries/s",
		Baseline: "BenchmarkRaftWrite/bare-bolt", Target: "ratio>=0.8", Time: "5000x", QuickTime: "1000x", Runs: 3},
	{Issue: "#17", What: "Raft apply, 64 writers: Store one-task submit vs bare hashicorp/raft + raft-boltdb (entries/s)", Pkg: "./raftstore", Bench: "BenchmarkRaftWrite/submit-bolt", Metric: "entries/s",
		Baseline: "BenchmarkRaftWrite/bare-bolt", Target: "ratio>=0.8", Time: "5000x", QuickTime: "1000x", Runs: 3},
	{Issue: "#17", What: "  the same, alternating blocks in one run: Store set_config / bare (entries/s)", Pkg: "./raftstore", Bench: "BenchmarkRaftWrite/interleaved-config-bolt", Metric: "store/bare",
		Target: "value>=0.8", Time: "5000x", QuickTime: "1000x", Runs: 3},
	{Issue: "#17", What: "  the same, alternating blocks in one run: Store one-task submit / bare (entries/s)", Pkg: "./raftstore", Bench: "BenchmarkRaftWrite/interleaved-submit-bolt", Metric: "store/bare",
		Target: "value>=0.8", Time: "5000x", QuickTime: "1000x", Runs: 3},
	{Issue: "#17", What: "  process CPU per entry, Store set_config (vs bare, separate runs; µs)", Pkg: "./raftstore", Bench: "BenchmarkRaftWrite/config-bolt", Metric: "cpu-us/entry",
		Baseline: "BenchmarkRaftWrite/bare-bolt", Time: "5000x", QuickTime: "1000x", Runs: 3},
	{Issue: "#17", What: "  process CPU per entry, Store one-task submit (vs bare, separate runs; µs)", Pkg: "./raftstore", Bench: "BenchmarkRaftWrite/submit-bolt", Metric: "cpu-us/entry",
		Baseline: "BenchmarkRaftWrite/bare-bolt", Time: "5000x", QuickTime: "1000x", Runs: 3},
	{Issue: "#17", What: "Raft log store, Store one-task submit, 64 writers: raft-wal vs raft-boltdb/v2 (entries/s)", Pkg: "./raftstore", Bench: "BenchmarkRaftWrite/submit-wal", Metric: "entries/s",
		Baseline: "BenchmarkRaftWrite/submit-bolt", Time: "5000x", QuickTime: "1000x", Runs: 3},
	{Issue: "#17", What: "Raft log store, Store set_config, 64 writers: raft-wal vs raft-boltdb/v2 (entries/s)", Pkg: "./raftstore", Bench: "BenchmarkRaftWrite/config-wal", Metric: "entries/s",
		Baseline: "BenchmarkRaftWrite/config-bolt", Time: "5000x", QuickTime: "1000x", Runs: 3},
	{Issue: "#17", What: "Raft apply, 64 writers: Store one-task submit vs bare hashicorp/raft, both on raft-wal (entries/s)", Pkg: "./raftstore", Bench: "BenchmarkRaftWrite/submit-wal", Metric: "entries/s",
		Baseline: "BenchmarkRaftWrite/bare-wal", Time: "5000x", QuickTime: "1000x", Runs: 3},
	{Issue: "#17", What: "Raft log store, bare hashicorp/raft, 64 writers: raft-wal vs raft-boltdb/v2 (entries/s)", Pkg: "./raftstore", Bench: "BenchmarkRaftWrite/bare-wal", Metric: "entries/s",
		Baseline: "BenchmarkRaftWrite/bare-bolt", Time: "5000x", QuickTime: "1000x", Runs: 3},
	{Issue: "#17", What: "single submits at 2,000/s, Raft side alone (group commit, forward, commit, local apply), accept p99 ms", Pkg: "./raftstore", Bench: "BenchmarkPacedSubmits/bolt", Metric: "accept-p99-ms",
		Time: "6000x", QuickTime: "2000x", Runs: 3},
	{Issue: "#17", What: "  the same on raft-wal (vs raft-boltdb), accept p99 ms", Pkg: "./raftstore", Bench: "BenchmarkPacedSubmits/wal", Metric: "accept-p99-ms",
		Baseline: "BenchmarkPacedSubmits/bolt", Time: "6000x", QuickTime: "2000x", Runs: 3},
	{Issue: "#17", What: "upgrade: a full raft.db (18,432 entries of 16 KB, 302 MB) copied into raft-wal on first start, s", Pkg: "./raftstore", Bench: "BenchmarkLogStoreMigration/entries=18432/bytes=16384", Metric: "s/migration",
		Time: "3x", QuickTime: "1x"},
	{Issue: "#3", What: "config write → applied on all 3 nodes, p50 ms", Pkg: "./raftstore", Bench: "BenchmarkConfigVisibleEverywhere", Metric: "p50-ms", Time: "2000x", QuickTime: "300x"},
	{Issue: "#3", What: "config write → applied on all 3 nodes, p99 ms", Pkg: "./raftstore", Bench: "BenchmarkConfigVisibleEverywhere", Metric: "p99-ms", Target: "value<=50", Time: "2000x", QuickTime: "300x"},

	// Gossip hints.
	{Issue: "#4", What: "hint reaches every peer, N=3, p99 ms", Pkg: "./cluster", Bench: "BenchmarkHintDelay/N=3/publish", Metric: "p99-ms",
		Baseline: "BenchmarkHintDelay/N=3/gossip-only", Target: "value<=10", Time: "30x", QuickTime: "10x"},
	{Issue: "#4", What: "hint reaches every peer, N=5, p99 ms", Pkg: "./cluster", Bench: "BenchmarkHintDelay/N=5/publish", Metric: "p99-ms",
		Baseline: "BenchmarkHintDelay/N=5/gossip-only", Target: "value<=10", Time: "30x", QuickTime: "10x"},
	{Issue: "#4", What: "hint reaches every peer, N=9, p99 ms", Pkg: "./cluster", Bench: "BenchmarkHintDelay/N=9/publish", Metric: "p99-ms",
		Baseline: "BenchmarkHintDelay/N=9/gossip-only", Target: "value<=10", Time: "30x", QuickTime: "10x"},
	{Issue: "#4", What: "hint reaches every peer, N=9, p50 ms", Pkg: "./cluster", Bench: "BenchmarkHintDelay/N=9/publish", Metric: "p50-ms",
		Baseline: "BenchmarkHintDelay/N=9/gossip-only", Time: "30x", QuickTime: "10x"},
	// Issue 17 §3: N = 50 in one process (every node's work on the same
	// cores, so the fleet's CPU per hint bounds the delay: cpu-ms/op).
	{Issue: "#17", What: "hint reaches every peer, N=50, p99 ms", Pkg: "./cluster", Bench: "BenchmarkHintDelay/N=50/publish", Metric: "p99-ms",
		Baseline: "BenchmarkHintDelay/N=50/gossip-only", Target: "value<=10", Time: "30x", QuickTime: "10x", Runs: 3},
	{Issue: "#17", What: "hint reaches every peer, N=50, p50 ms", Pkg: "./cluster", Bench: "BenchmarkHintDelay/N=50/publish", Metric: "p50-ms",
		Baseline: "BenchmarkHintDelay/N=50/gossip-only", Time: "30x", QuickTime: "10x"},
	{Issue: "#17", What: "  process CPU per hint, N=50 (all 50 nodes and their membership traffic), ms", Pkg: "./cluster", Bench: "BenchmarkHintDelay/N=50/publish", Metric: "cpu-ms/op",
		Baseline: "BenchmarkHintDelay/N=50/gossip-only", Time: "30x", QuickTime: "10x"},

	// Shards.
	{Issue: "#5", What: "shard lookup (hash + snapshot owner)", Pkg: "./shardmap", Bench: "BenchmarkLookup", Metric: "ns/op", Time: "1s", QuickTime: "200ms"},
	{Issue: "#5", What: "shard lookup, parallel", Pkg: "./shardmap", Bench: "BenchmarkLookupParallel", Metric: "ns/op", Time: "1s", QuickTime: "200ms"},
	// Bounded-load placement (issue 20 §3) beside rendezvous placement, same run.
	{Issue: "#20", What: "placement S=16 N=3: max/mean (baseline: rendezvous)", Pkg: "./shardmap", Bench: "BenchmarkPlacement/S=16/N=3/bounded", Metric: "max/mean",
		Baseline: "BenchmarkPlacement/S=16/N=3/hrw", Target: "value<=1.1500", Time: "20x", QuickTime: "5x"},
	{Issue: "#20", What: "placement S=16 N=5: max/mean (baseline: rendezvous)", Pkg: "./shardmap", Bench: "BenchmarkPlacement/S=16/N=5/bounded", Metric: "max/mean",
		Baseline: "BenchmarkPlacement/S=16/N=5/hrw", Target: "value<=1.2500", Time: "20x", QuickTime: "5x"},
	{Issue: "#20", What: "placement S=16 N=9: max/mean (baseline: rendezvous)", Pkg: "./shardmap", Bench: "BenchmarkPlacement/S=16/N=9/bounded", Metric: "max/mean",
		Baseline: "BenchmarkPlacement/S=16/N=9/hrw", Target: "value<=1.1250", Time: "20x", QuickTime: "5x"},
	{Issue: "#20", What: "placement S=16 N=17: max/mean (baseline: rendezvous)", Pkg: "./shardmap", Bench: "BenchmarkPlacement/S=16/N=17/bounded", Metric: "max/mean",
		Baseline: "BenchmarkPlacement/S=16/N=17/hrw", Target: "value<=1.0625", Time: "20x", QuickTime: "5x"},
	{Issue: "#20", What: "placement S=16 N=3: join moves / ideal", Pkg: "./shardmap", Bench: "BenchmarkPlacement/S=16/N=3/bounded", Metric: "join/ideal",
		Baseline: "BenchmarkPlacement/S=16/N=3/hrw", Target: "value<=1.1", Time: "20x", QuickTime: "5x"},
	{Issue: "#20", What: "placement S=16 N=3: leave moves / ideal", Pkg: "./shardmap", Bench: "BenchmarkPlacement/S=16/N=3/bounded", Metric: "leave/ideal",
		Baseline: "BenchmarkPlacement/S=16/N=3/hrw", Target: "value<=1.1", Time: "20x", QuickTime: "5x"},
	{Issue: "#20", What: "placement S=16 N=17: join moves / ideal", Pkg: "./shardmap", Bench: "BenchmarkPlacement/S=16/N=17/bounded", Metric: "join/ideal",
		Baseline: "BenchmarkPlacement/S=16/N=17/hrw", Target: "value<=1.1", Time: "20x", QuickTime: "5x"},
	{Issue: "#20", What: "placement S=16 N=17: leave moves / ideal", Pkg: "./shardmap", Bench: "BenchmarkPlacement/S=16/N=17/bounded", Metric: "leave/ideal",
		Baseline: "BenchmarkPlacement/S=16/N=17/hrw", Target: "value<=1.1", Time: "20x", QuickTime: "5x"},
	{Issue: "#20", What: "placement S=64 N=3: max/mean (baseline: rendezvous)", Pkg: "./shardmap", Bench: "BenchmarkPlacement/S=64/N=3/bounded", Metric: "max/mean",
		Baseline: "BenchmarkPlacement/S=64/N=3/hrw", Target: "value<=1.1500", Time: "20x", QuickTime: "5x"},
	{Issue: "#20", What: "placement S=64 N=5: max/mean (baseline: rendezvous)", Pkg: "./shardmap", Bench: "BenchmarkPlacement/S=64/N=5/bounded", Metric: "max/mean",
		Baseline: "BenchmarkPlacement/S=64/N=5/hrw", Target: "value<=1.1500", Time: "20x", QuickTime: "5x"},
	{Issue: "#20", What: "placement S=64 N=9: max/mean (baseline: rendezvous)", Pkg: "./shardmap", Bench: "BenchmarkPlacement/S=64/N=9/bounded", Metric: "max/mean",
		Baseline: "BenchmarkPlacement/S=64/N=9/hrw", Target: "value<=1.1500", Time: "20x", QuickTime: "5x"},
	{Issue: "#20", What: "placement S=64 N=17: max/mean (baseline: rendezvous)", Pkg: "./shardmap", Bench: "BenchmarkPlacement/S=64/N=17/bounded", Metric: "max/mean",
		Baseline: "BenchmarkPlacement/S=64/N=17/hrw", Target: "value<=1.0625", Time: "20x", QuickTime: "5x"},
	{Issue: "#20", What: "placement S=64 N=3: join moves / ideal", Pkg: "./shardmap", Bench: "BenchmarkPlacement/S=64/N=3/bounded", Metric: "join/ideal",
		Baseline: "BenchmarkPlacement/S=64/N=3/hrw", Target: "value<=1.1", Time: "20x", QuickTime: "5x"},
	{Issue: "#20", What: "placement S=64 N=3: leave moves / ideal", Pkg: "./shardmap", Bench: "BenchmarkPlacement/S=64/N=3/bounded", Metric: "leave/ideal",
		Baseline: "BenchmarkPlacement/S=64/N=3/hrw", Target: "value<=1.1", Time: "20x", QuickTime: "5x"},
	{Issue: "#20", What: "placement S=64 N=17: join moves / ideal", Pkg: "./shardmap", Bench: "BenchmarkPlacement/S=64/N=17/bounded", Metric: "join/ideal",
		Baseline: "BenchmarkPlacement/S=64/N=17/hrw", Target: "value<=1.1", Time: "20x", QuickTime: "5x"},
	{Issue: "#20", What: "placement S=64 N=17: leave moves / ideal", Pkg: "./shardmap", Bench: "BenchmarkPlacement/S=64/N=17/bounded", Metric: "leave/ideal",
		Baseline: "BenchmarkPlacement/S=64/N=17/hrw", Target: "value<=1.1", Time: "20x", QuickTime: "5x"},
	{Issue: "#20", What: "placement S=256 N=3: max/mean (baseline: rendezvous)", Pkg: "./shardmap", Bench: "BenchmarkPlacement/S=256/N=3/bounded", Metric: "max/mean",
		Baseline: "BenchmarkPlacement/S=256/N=3/hrw", Target: "value<=1.1500", Time: "20x", QuickTime: "5x"},
	{Issue: "#20", What: "placement S=256 N=5: max/mean (baseline: rendezvous)", Pkg: "./shardmap", Bench: "BenchmarkPlacement/S=256/N=5/bounded", Metric: "max/mean",
		Baseline: "BenchmarkPlacement/S=256/N=5/hrw", Target: "value<=1.1500", Time: "20x", QuickTime: "5x"},
	{Issue: "#20", What: "placement S=256 N=9: max/mean (baseline: rendezvous)", Pkg: "./shardmap", Bench: "BenchmarkPlacement/S=256/N=9/bounded", Metric: "max/mean",
		Baseline: "BenchmarkPlacement/S=256/N=9/hrw", Target: "value<=1.1500", Time: "20x", QuickTime: "5x"},
	{Issue: "#20", What: "placement S=256 N=17: max/mean (baseline: rendezvous)", Pkg: "./shardmap", Bench: "BenchmarkPlacement/S=256/N=17/bounded", Metric: "max/mean",
		Baseline: "BenchmarkPlacement/S=256/N=17/hrw", Target: "value<=1.1500", Time: "20x", QuickTime: "5x"},
	{Issue: "#20", What: "placement S=256 N=3: join moves / ideal", Pkg: "./shardmap", Bench: "BenchmarkPlacement/S=256/N=3/bounded", Metric: "join/ideal",
		Baseline: "BenchmarkPlacement/S=256/N=3/hrw", Target: "value<=1.1", Time: "20x", QuickTime: "5x"},
	{Issue: "#20", What: "placement S=256 N=3: leave moves / ideal", Pkg: "./shardmap", Bench: "BenchmarkPlacement/S=256/N=3/bounded", Metric: "leave/ideal",
		Baseline: "BenchmarkPlacement/S=256/N=3/hrw", Target: "value<=1.1", Time: "20x", QuickTime: "5x"},
	{Issue: "#20", What: "placement S=256 N=17: join moves / ideal", Pkg: "./shardmap", Bench: "BenchmarkPlacement/S=256/N=17/bounded", Metric: "join/ideal",
		Baseline: "BenchmarkPlacement/S=256/N=17/hrw", Target: "value<=1.1", Time: "20x", QuickTime: "5x"},
	{Issue: "#20", What: "placement S=256 N=17: leave moves / ideal", Pkg: "./shardmap", Bench: "BenchmarkPlacement/S=256/N=17/bounded", Metric: "leave/ideal",
		Baseline: "BenchmarkPlacement/S=256/N=17/hrw", Target: "value<=1.1", Time: "20x", QuickTime: "5x"},
	{Issue: "#20", What: "placement S=1024 N=3: max/mean (baseline: rendezvous)", Pkg: "./shardmap", Bench: "BenchmarkPlacement/S=1024/N=3/bounded", Metric: "max/mean",
		Baseline: "BenchmarkPlacement/S=1024/N=3/hrw", Target: "value<=1.1500", Time: "20x", QuickTime: "5x"},
	{Issue: "#20", What: "placement S=1024 N=5: max/mean (baseline: rendezvous)", Pkg: "./shardmap", Bench: "BenchmarkPlacement/S=1024/N=5/bounded", Metric: "max/mean",
		Baseline: "BenchmarkPlacement/S=1024/N=5/hrw", Target: "value<=1.1500", Time: "20x", QuickTime: "5x"},
	{Issue: "#20", What: "placement S=1024 N=9: max/mean (baseline: rendezvous)", Pkg: "./shardmap", Bench: "BenchmarkPlacement/S=1024/N=9/bounded", Metric: "max/mean",
		Baseline: "BenchmarkPlacement/S=1024/N=9/hrw", Target: "value<=1.1500", Time: "20x", QuickTime: "5x"},
	{Issue: "#20", What: "placement S=1024 N=17: max/mean (baseline: rendezvous)", Pkg: "./shardmap", Bench: "BenchmarkPlacement/S=1024/N=17/bounded", Metric: "max/mean",
		Baseline: "BenchmarkPlacement/S=1024/N=17/hrw", Target: "value<=1.1500", Time: "20x", QuickTime: "5x"},
	{Issue: "#20", What: "placement S=1024 N=3: join moves / ideal", Pkg: "./shardmap", Bench: "BenchmarkPlacement/S=1024/N=3/bounded", Metric: "join/ideal",
		Baseline: "BenchmarkPlacement/S=1024/N=3/hrw", Target: "value<=1.1", Time: "20x", QuickTime: "5x"},
	{Issue: "#20", What: "placement S=1024 N=3: leave moves / ideal", Pkg: "./shardmap", Bench: "BenchmarkPlacement/S=1024/N=3/bounded", Metric: "leave/ideal",
		Baseline: "BenchmarkPlacement/S=1024/N=3/hrw", Target: "value<=1.1", Time: "20x", QuickTime: "5x"},
	{Issue: "#20", What: "placement S=1024 N=17: join moves / ideal", Pkg: "./shardmap", Bench: "BenchmarkPlacement/S=1024/N=17/bounded", Metric: "join/ideal",
		Baseline: "BenchmarkPlacement/S=1024/N=17/hrw", Target: "value<=1.1", Time: "20x", QuickTime: "5x"},
	{Issue: "#20", What: "placement S=1024 N=17: leave moves / ideal", Pkg: "./shardmap", Bench: "BenchmarkPlacement/S=1024/N=17/bounded", Metric: "leave/ideal",
		Baseline: "BenchmarkPlacement/S=1024/N=17/hrw", Target: "value<=1.1", Time: "20x", QuickTime: "5x"},
	{Issue: "#5", What: "rebalance 1024 shards over 10 nodes", Pkg: "./shardmap", Bench: "BenchmarkRebalance/1024shards_10nodes", Metric: "ns/op", Time: "1s", QuickTime: "200ms"},

	// Outbound executors and the queue.
	{Issue: "#6", What: "callback POST through the executor", Pkg: "./transport", Bench: "BenchmarkOutbound/raw-callback", Metric: "ns/op",
		Baseline: "BenchmarkOutbound/baseline-post", Target: "ratio<=1.5", Time: "10000x", QuickTime: "500x", Runs: 3},
	{Issue: "#6", What: "Nexus sync start through the executor", Pkg: "./transport", Bench: "BenchmarkOutbound/nexus-sync-start", Metric: "ns/op",
		Baseline: "BenchmarkOutbound/baseline-nexus-post", Target: "ratio<=1.5", Time: "10000x", QuickTime: "500x", Runs: 3},
	{Issue: "#17", What: "  the same, process CPU per call, interleaved with the hand-made POST (ratio)", Pkg: "./transport", Bench: "BenchmarkOutboundInterleaved", Metric: "cpu-ratio",
		Target: "value<=1.3", Time: "20x", QuickTime: "4x", Runs: 3},
	{Issue: "#17", What: "  the same, process CPU per call (vs the hand-made POST, separate runs)", Pkg: "./transport", Bench: "BenchmarkOutbound/nexus-sync-start", Metric: "cpu-ns/op",
		Baseline: "BenchmarkOutbound/baseline-nexus-post", Time: "10000x", QuickTime: "500x", Runs: 3},
	// Durable task table and the queue (issue "The outbound task queue").
	{Issue: "#6", What: "task submit, 3 nodes, 64 writers × 1 task/entry (tasks/s)", Pkg: "./raftstore", Bench: "BenchmarkSubmitTasks/nodes=3/writers=64/batch=1", Metric: "tasks/s",
		Baseline: "BenchmarkSubmitTasks/nodes=3/writers=1/batch=1", Time: "500x", QuickTime: "100x"},
	{Issue: "#6", What: "task submit, 3 nodes, 8 writers × 100 tasks/entry (tasks/s)", Pkg: "./raftstore", Bench: "BenchmarkSubmitTasks/nodes=3/writers=8/batch=100", Metric: "tasks/s",
		Baseline: "BenchmarkSubmitTasks/nodes=3/writers=1/batch=1", Time: "500x", QuickTime: "100x"},
	{Issue: "#6", What: "one replica's apply per task (submit + complete, no Raft), JSON entries, ns", Pkg: "./raftstore/state", Bench: "BenchmarkFSMTaskLifecycle/json", Metric: "ns/op", Time: "200000x", QuickTime: "20000x", Runs: 3},
	{Issue: "#17", What: "one replica's apply per task, binary entries (vs JSON), ns", Pkg: "./raftstore/state", Bench: "BenchmarkFSMTaskLifecycle/binary", Metric: "ns/op",
		Baseline: "BenchmarkFSMTaskLifecycle/json", Target: "value<=8000", Time: "200000x", QuickTime: "20000x", Runs: 3},
	{Issue: "#17", What: "  the same, process CPU per task (vs JSON), ns", Pkg: "./raftstore/state", Bench: "BenchmarkFSMTaskLifecycle/binary", Metric: "cpu-ns/op",
		Baseline: "BenchmarkFSMTaskLifecycle/json", Time: "200000x", QuickTime: "20000x", Runs: 3},
	{Issue: "#17", What: "  the same, time in ApplyBatch only (vs JSON), ns", Pkg: "./raftstore/state", Bench: "BenchmarkFSMTaskLifecycle/binary", Metric: "apply-ns/op",
		Baseline: "BenchmarkFSMTaskLifecycle/json", Time: "200000x", QuickTime: "20000x", Runs: 3},
	{Issue: "#17", What: "  binary / JSON, alternating blocks of 500 tasks in one run", Pkg: "./raftstore/state", Bench: "BenchmarkFSMTaskLifecycle/interleaved", Metric: "binary/json",
		Time: "200000x", QuickTime: "20000x", Runs: 3},
	// p99 beside one CPU-bound neighbour process (a shell busy loop), each
	// against the same cluster shape alone in the same run.
	{Issue: "#17", What: "enqueue → delivered p99 at 1,000/s beside a CPU-bound neighbour, in process (vs alone)", Pkg: "./node", Bench: "BenchmarkDeliveryLatencyNeighbour/neighbour=on", Metric: "p99-ms",
		Baseline: "BenchmarkDeliveryLatencyNeighbour/neighbour=off", Target: "ratio<=3", Time: "5000x", QuickTime: "2000x", Runs: 3},
	{Issue: "#17", What: "  the same, 3 processes (vs alone)", Pkg: "./test/e2e", Bench: "BenchmarkProcessDeliveryLatencyNeighbour/neighbour=on", Metric: "p99-ms",
		Baseline: "BenchmarkProcessDeliveryLatencyNeighbour/neighbour=off", Target: "ratio<=3", Time: "5000x", QuickTime: "2000x", Runs: 3},
	{Issue: "#17", What: "one replica's apply per BenchmarkRaftWrite entry (no Raft): set_config, ns", Pkg: "./raftstore/state", Bench: "BenchmarkFSMApplyEntry/config", Metric: "ns/op",
		Time: "20000x", QuickTime: "5000x", Runs: 3},
	{Issue: "#17", What: "  the same, allocations per set_config entry", Pkg: "./raftstore/state", Bench: "BenchmarkFSMApplyEntry/config", Metric: "allocs/op",
		Time: "20000x", QuickTime: "5000x", Runs: 3},
	{Issue: "#17", What: "  the same, one-task binary submit, ns", Pkg: "./raftstore/state", Bench: "BenchmarkFSMApplyEntry/submit", Metric: "ns/op",
		Time: "20000x", QuickTime: "5000x", Runs: 3},
	{Issue: "#17", What: "  the same, allocations per submit entry", Pkg: "./raftstore/state", Bench: "BenchmarkFSMApplyEntry/submit", Metric: "allocs/op",
		Time: "20000x", QuickTime: "5000x", Runs: 3},
	{Issue: "#6", What: "heap per retained task, one replica, binary entries (vs JSON; bytes)", Pkg: "./raftstore/state", Bench: "BenchmarkFSMTaskMemory/binary", Metric: "bytes/task",
		Baseline: "BenchmarkFSMTaskMemory/json", Time: "100000x", QuickTime: "10000x"},
	{Issue: "#6", What: "queue alone (in-memory store), ns per task", Pkg: "./queue", Bench: "BenchmarkThroughput/queue", Metric: "ns/op",
		Baseline: "BenchmarkThroughput/raw_http", Time: "8000x", QuickTime: "2000x"},
	{Issue: "#6", What: "queue alone: healthy dest beside a dead one, ns per task", Pkg: "./queue", Bench: "BenchmarkHealthyBesideDead/other_dead", Metric: "ns/op",
		Baseline: "BenchmarkHealthyBesideDead/both_healthy", Target: "ratio<=1.053", Time: "8000x", QuickTime: "2000x"},
	{Issue: "#6", What: "queue alone: a dead destination's backlog of 20,000, result writes per task in 6 s of open breaker (rate 1,000/s vs no rate bound)", Pkg: "./queue", Bench: "BenchmarkDeadBacklogWrites/rate=1000", Metric: "writes/task",
		Baseline: "BenchmarkDeadBacklogWrites/rate=unlimited", Time: "20000x", QuickTime: "20000x"},
	{Issue: "#6", What: "3 nodes: a dead destination's backlog of 20,000, result writes/s after 12 s of open breaker (rate 100/s per host vs no rate bound)", Pkg: "./node", Bench: "BenchmarkDeadBacklog/rate=100", Metric: "writes/s",
		Baseline: "BenchmarkDeadBacklog/rate=unlimited", Time: "20000x", QuickTime: "-"},
	{Issue: "#6", What: "  the same, Raft entries/s", Pkg: "./node", Bench: "BenchmarkDeadBacklog/rate=100", Metric: "raft-entries/s",
		Baseline: "BenchmarkDeadBacklog/rate=unlimited", Time: "20000x", QuickTime: "-"},
	{Issue: "#6", What: "shard failover after a kill, fast preset (ms)", Pkg: "./node", Bench: "BenchmarkShardFailover/preset=fast", Metric: "ms/failover", Time: "3x", QuickTime: "1x"},
	{Issue: "#6", What: "shard failover after a kill, lan preset (ms)", Pkg: "./node", Bench: "BenchmarkShardFailover/preset=lan", Metric: "ms/failover", Time: "1x", QuickTime: "-"},
	{Issue: "#6", What: "durable delivery, 3 nodes, batches of 500 (tasks/s)", Pkg: "./node", Bench: "BenchmarkDelivery/cluster", Metric: "tasks/s",
		Baseline: "BenchmarkDelivery/raw_http", Target: "value>=5000", Time: "20000x", QuickTime: "3000x", Runs: 3},
	{Issue: "#17", What: "durable delivery, 3 in-process nodes vs raw HTTP, alternating blocks of 20,000 in one run (ratio)", Pkg: "./node", Bench: "BenchmarkDeliveryInterleaved", Metric: "ratio",
		Target: "value>=0.6", Time: "2x", QuickTime: "1x", Runs: 3},
	{Issue: "#17", What: "  the same, process CPU per task during the cluster's blocks, µs", Pkg: "./node", Bench: "BenchmarkDeliveryInterleaved", Metric: "cluster-cpu-us/task",
		Time: "2x", QuickTime: "1x", Runs: 3},
	{Issue: "#17", What: "  the same, process CPU per call during raw HTTP's blocks, µs", Pkg: "./node", Bench: "BenchmarkDeliveryInterleaved", Metric: "raw-cpu-us/task",
		Time: "2x", QuickTime: "1x", Runs: 3},
	{Issue: "bench", What: "one node's egress to the destination cut, its shards' tasks through a peer: delivery vs a healthy destination, alternating blocks of 6,000 (ratio)", Pkg: "./node", Bench: "BenchmarkSickEgress", Metric: "ratio",
		Time: "3x", QuickTime: "1x"},
	{Issue: "bench", What: "  the same, requests to a peer per task of the cut destination", Pkg: "./node", Bench: "BenchmarkSickEgress", Metric: "peer-requests/task",
		Time: "3x", QuickTime: "1x"},
	{Issue: "#6", What: "durable delivery: destination calls per task", Pkg: "./node", Bench: "BenchmarkDelivery/cluster", Metric: "calls/task",
		Baseline: "BenchmarkDelivery/raw_http", Target: "value<=1.01", Time: "20000x", QuickTime: "3000x", Runs: 3},
	{Issue: "#6", What: "  CPU the test process used during the run, cores (of 2)", Pkg: "./node", Bench: "BenchmarkDelivery/cluster", Metric: "cpu-cores",
		Time: "20000x", QuickTime: "3000x", Runs: 3},
	{Issue: "#6", What: "enqueue → delivered at 1,000 tasks/s, p50 ms", Pkg: "./node", Bench: "BenchmarkDeliveryLatency/rate=1000", Metric: "p50-ms", Time: "5000x", QuickTime: "2000x", Runs: 3},
	{Issue: "#6", What: "enqueue → delivered at 1,000 tasks/s, p99 ms", Pkg: "./node", Bench: "BenchmarkDeliveryLatency/rate=1000", Metric: "p99-ms", Target: "value<=50", Time: "5000x", QuickTime: "2000x", Runs: 3},
	{Issue: "#6", What: "  of which submit accepted (Raft commit), p99 ms", Pkg: "./node", Bench: "BenchmarkDeliveryLatency/rate=1000", Metric: "accept-p99-ms", Time: "5000x", QuickTime: "2000x", Runs: 3},
	{Issue: "#6", What: "  paced rate actually reached (tasks/s)", Pkg: "./node", Bench: "BenchmarkDeliveryLatency/rate=1000", Metric: "tasks/s", Target: "value>=950", Time: "5000x", QuickTime: "2000x", Runs: 3},
	{Issue: "#6", What: "quiet cluster (lan preset, 10 tasks/s): enqueue → delivered, p99 ms", Pkg: "./node", Bench: "BenchmarkDeliveryLatencyQuiet", Metric: "p99-ms", Time: "150x", QuickTime: "-"},
	{Issue: "#6", What: "single submits at 2,000 tasks/s (group commit), p99 ms", Pkg: "./node", Bench: "BenchmarkDeliveryLatency/rate=2000", Metric: "p99-ms", Time: "5000x", QuickTime: "2000x", Runs: 3},
	{Issue: "#17", What: "  of which submit accepted (Raft commit), p99 ms", Pkg: "./node", Bench: "BenchmarkDeliveryLatency/rate=2000", Metric: "accept-p99-ms", Time: "5000x", QuickTime: "2000x", Runs: 3},
	{Issue: "#17", What: "  paced rate actually reached (tasks/s)", Pkg: "./node", Bench: "BenchmarkDeliveryLatency/rate=2000", Metric: "tasks/s", Time: "5000x", QuickTime: "2000x", Runs: 3},
	// The same three workloads on three real processes (test/e2e): each node
	// with its own runtime and GC, as deployed.
	{Issue: "#6", What: "durable delivery, 3 processes, batches of 500 (tasks/s)", Pkg: "./test/e2e", Bench: "BenchmarkProcessDelivery/cluster", Metric: "tasks/s",
		Baseline: "BenchmarkProcessDelivery/raw_http", Target: "value>=5000", Time: "20000x", QuickTime: "3000x", Runs: 3},
	{Issue: "#6", What: "3 processes: enqueue → delivered at 1,000 tasks/s, p50 ms", Pkg: "./test/e2e", Bench: "BenchmarkProcessDeliveryLatency/rate=1000", Metric: "p50-ms", Time: "5000x", QuickTime: "2000x", Runs: 3},
	{Issue: "#6", What: "3 processes: enqueue → delivered at 1,000 tasks/s, p99 ms", Pkg: "./test/e2e", Bench: "BenchmarkProcessDeliveryLatency/rate=1000", Metric: "p99-ms", Target: "value<=50", Time: "5000x", QuickTime: "2000x", Runs: 3},
	{Issue: "#6", What: "3 processes: healthy dest's tasks/s beside a dead one", Pkg: "./test/e2e", Bench: "BenchmarkProcessDeliveryBesideDead/other_dead", Metric: "tasks/s",
		Baseline: "BenchmarkProcessDeliveryBesideDead/both_healthy", Target: "ratio>=0.95", Time: "5000x", QuickTime: "2000x", Runs: 3},
	// What security costs (issue 15): the same cluster with TLS (HTTPS API,
	// mutual-TLS Raft and forwarding), encrypted gossip and named tokens,
	// beside a plain one in the same run.
	{Issue: "#15", What: "3 processes, TLS + tokens: durable delivery (tasks/s)", Pkg: "./test/e2e", Bench: "BenchmarkProcessSecurity/secure/delivery", Metric: "tasks/s",
		Baseline: "BenchmarkProcessSecurity/plain/delivery", Target: "ratio>=0.9", Time: "10000x", QuickTime: "2000x", Runs: 3},
	{Issue: "#15", What: "3 processes, TLS + tokens: enqueue → delivered at 1,000 tasks/s, p99 ms", Pkg: "./test/e2e", Bench: "BenchmarkProcessSecurity/secure/latency", Metric: "p99-ms",
		Baseline: "BenchmarkProcessSecurity/plain/latency", Target: "value<=50", Time: "10000x", QuickTime: "2000x", Runs: 3},
	{Issue: "#6", What: "healthy dest's tasks/s beside a dead one (cluster)", Pkg: "./node", Bench: "BenchmarkDeliveryBesideDead/other_dead", Metric: "tasks/s",
		Baseline: "BenchmarkDeliveryBesideDead/both_healthy", Target: "ratio>=0.95", Time: "5000x", QuickTime: "2000x", Runs: 3},
	{Issue: "#20", What: "recovery: last backlog task after the destination is back, over Timeout + backlog/rate + 2 s", Pkg: "./node", Bench: "BenchmarkRecoveryDrain/outage", Metric: "drain/target",
		Baseline: "BenchmarkRecoveryDrain/no_outage", Target: "value<=1", Time: "1x", QuickTime: "1x"},
	{Issue: "#20", What: "recovery: whole schedule's last delivery (s), vs the same schedule without the outage", Pkg: "./node", Bench: "BenchmarkRecoveryDrain/outage", Metric: "total-s",
		Baseline: "BenchmarkRecoveryDrain/no_outage", Target: "ratio<=1.2", Time: "1x", QuickTime: "1x"},
	// Staged recovery (issue 19 §2): 3,000 tasks backlogged behind an open breaker, ramp 50 → 100/host over 5 s.
	{Issue: "#19", What: "recovery ramp: calls in the first second after the close / rampStartRPS (baseline: ramp off)", Pkg: "./node", Bench: "BenchmarkRecoveryRamp/ramp", Metric: "first-second/start",
		Baseline: "BenchmarkRecoveryRamp/no_ramp", Target: "value<=1.1", Time: "1x", QuickTime: "1x", Runs: 3},
	{Issue: "#19", What: "recovery ramp: backlog drained after the close, over rampDuration + backlog/rate + 2 s", Pkg: "./node", Bench: "BenchmarkRecoveryRamp/ramp", Metric: "drain/target",
		Baseline: "BenchmarkRecoveryRamp/no_ramp", Target: "value<=1", Time: "1x", QuickTime: "1x", Runs: 3},
	// Fleet rate budget (issue 19 §3): 2,000 tasks skewed 80/10/10 (N=3) or 80/5/5/5/5 (N=5), budget 200 calls/s = the per-host rate.
	{Issue: "#19", What: "fleet budget, N=3, 80/10/10: busiest second / budget (baseline: fleetRPS unset)", Pkg: "./node", Bench: "BenchmarkFleetBudget/n=3/budget", Metric: "fleet-rate/budget",
		Baseline: "BenchmarkFleetBudget/n=3/no_budget", Target: "value<=1.05", Time: "1x", QuickTime: "1x"},
	{Issue: "#19", What: "fleet budget, N=3, 80/10/10: budget used while the backlog lasts", Pkg: "./node", Bench: "BenchmarkFleetBudget/n=3/budget", Metric: "utilisation",
		Baseline: "BenchmarkFleetBudget/n=3/no_budget", Target: "value>=0.9", Time: "1x", QuickTime: "1x"},
	{Issue: "#19", What: "fleet budget, N=5, 80/5/5/5/5: busiest second / budget (baseline: fleetRPS unset)", Pkg: "./node", Bench: "BenchmarkFleetBudget/n=5/budget", Metric: "fleet-rate/budget",
		Baseline: "BenchmarkFleetBudget/n=5/no_budget", Target: "value<=1.05", Time: "1x", QuickTime: "1x"},
	{Issue: "#19", What: "fleet budget, N=5, 80/5/5/5/5: budget used while the backlog lasts", Pkg: "./node", Bench: "BenchmarkFleetBudget/n=5/budget", Metric: "utilisation",
		Baseline: "BenchmarkFleetBudget/n=5/no_budget", Target: "value>=0.9", Time: "1x", QuickTime: "1x"},
	{Issue: "#4", What: "hint opens every peer (adopt, N=5), p99 ms", Pkg: "./hintpolicy", Bench: "BenchmarkHintApplied", Metric: "p99-ms", Time: "30x", QuickTime: "10x"},
	// Early warning ("failing" hints): simultaneous onset costs about 2N+1 (probe) and 6+small (adopt) instead of 6N.
	{Issue: "#4", What: "dead destination, N=5, probe: calls until all open", Pkg: "./hintpolicy", Bench: "BenchmarkDeadDestination/policy=probe", Metric: "trip-calls",
		Baseline: "BenchmarkDeadDestination/policy=off", Target: "ratio<=0.5", Time: "1x", QuickTime: "-"},
	{Issue: "#4", What: "dead destination, N=5, adopt: calls until all open", Pkg: "./hintpolicy", Bench: "BenchmarkDeadDestination/policy=adopt", Metric: "trip-calls",
		Baseline: "BenchmarkDeadDestination/policy=off", Target: "ratio<=0.4", Time: "1x", QuickTime: "-"},
	{Issue: "#4", What: "dead destination, N=5, probe: calls per Timeout", Pkg: "./hintpolicy", Bench: "BenchmarkDeadDestination/policy=probe", Metric: "probes/timeout",
		Baseline: "BenchmarkDeadDestination/policy=off", Target: "ratio<=0.5", Time: "1x", QuickTime: "-"},
	{Issue: "#4", What: "dead destination, N=5, probe: recovery ms", Pkg: "./hintpolicy", Bench: "BenchmarkDeadDestination/policy=probe", Metric: "recovery-ms",
		Baseline: "BenchmarkDeadDestination/policy=off", Time: "1x", QuickTime: "-"},

	// Growth curves (issue "make bench"): cost as keys, shards and N grow.
	{Issue: "bench", What: "pool bytes/breaker, 10³ keys", Pkg: "./breakerpool", Bench: "BenchmarkPoolGrowth/keys=1000/pool", Metric: "bytes/breaker",
		Baseline: "BenchmarkPoolGrowth/keys=1000/gobreaker", Target: "value<=1024", Time: "1x", QuickTime: "1x"},
	{Issue: "bench", What: "pool bytes/breaker, 10⁴ keys", Pkg: "./breakerpool", Bench: "BenchmarkPoolGrowth/keys=10000/pool", Metric: "bytes/breaker",
		Baseline: "BenchmarkPoolGrowth/keys=10000/gobreaker", Target: "value<=1024", Time: "1x", QuickTime: "1x"},
	{Issue: "bench", What: "pool bytes/breaker, 10⁵ keys", Pkg: "./breakerpool", Bench: "BenchmarkPoolGrowth/keys=100000/pool", Metric: "bytes/breaker",
		Baseline: "BenchmarkPoolGrowth/keys=100000/gobreaker", Target: "value<=1024", Time: "1x", QuickTime: "1x"},
	{Issue: "bench", What: "pool bytes/breaker, 10⁶ keys", Pkg: "./breakerpool", Bench: "BenchmarkPoolGrowth/keys=1000000/pool", Metric: "bytes/breaker",
		Baseline: "BenchmarkPoolGrowth/keys=1000000/gobreaker", Target: "value<=1024", Time: "1x", QuickTime: "-"},
	{Issue: "bench", What: "pool total heap MiB, 10⁵ keys", Pkg: "./breakerpool", Bench: "BenchmarkPoolGrowth/keys=100000/pool", Metric: "heap-MiB",
		Baseline: "BenchmarkPoolGrowth/keys=100000/gobreaker", Time: "1x", QuickTime: "1x"},
	{Issue: "bench", What: "pool total heap MiB, 10⁶ keys", Pkg: "./breakerpool", Bench: "BenchmarkPoolGrowth/keys=1000000/pool", Metric: "heap-MiB",
		Baseline: "BenchmarkPoolGrowth/keys=1000000/gobreaker", Time: "1x", QuickTime: "-"},
	{Issue: "bench", What: "durable delivery, 64 shards (tasks/s)", Pkg: "./node", Bench: "BenchmarkDeliveryShards/shards=64", Metric: "tasks/s",
		Baseline: "BenchmarkDeliveryShards/shards=16", Time: "5000x", QuickTime: "2000x"},
	{Issue: "#17", What: "durable delivery, 256 shards (tasks/s)", Pkg: "./node", Bench: "BenchmarkDeliveryShards/shards=256", Metric: "tasks/s",
		Baseline: "BenchmarkDeliveryShards/shards=16", Target: "ratio>=0.9", Time: "5000x", QuickTime: "-", Runs: 3},
	{Issue: "#17", What: "  256 shards: process CPU per task (vs 16 shards), µs", Pkg: "./node", Bench: "BenchmarkDeliveryShards/shards=256", Metric: "cpu-us/task",
		Baseline: "BenchmarkDeliveryShards/shards=16", Time: "5000x", QuickTime: "-"},
	{Issue: "#17", What: "  256 shards: result writes (one shard's flush each) per task (vs 16 shards)", Pkg: "./node", Bench: "BenchmarkDeliveryShards/shards=256", Metric: "writes/task",
		Baseline: "BenchmarkDeliveryShards/shards=16", Time: "5000x", QuickTime: "-"},
	{Issue: "#17", What: "  256 shards: Raft entries of those writes per task (vs 16 shards)", Pkg: "./node", Bench: "BenchmarkDeliveryShards/shards=256", Metric: "entries/task",
		Baseline: "BenchmarkDeliveryShards/shards=16", Time: "5000x", QuickTime: "-"},
	{Issue: "#17", What: "  256 shards, runs of 100,000 tasks, whose backlog fills the group buffers (tasks/s)", Pkg: "./node", Bench: "BenchmarkDeliveryShardsBacklog/shards=256", Metric: "tasks/s",
		Baseline: "BenchmarkDeliveryShardsBacklog/shards=16", Time: "100000x", QuickTime: "-", Runs: 3},
	{Issue: "#17", What: "    the same, process CPU per task (vs 16 shards), µs", Pkg: "./node", Bench: "BenchmarkDeliveryShardsBacklog/shards=256", Metric: "cpu-us/task",
		Baseline: "BenchmarkDeliveryShardsBacklog/shards=16", Time: "100000x", QuickTime: "-"},
	{Issue: "#17", What: "  256 shards: one replica's apply per task, 256 vs 16 shards, alternating blocks (ratio)", Pkg: "./raftstore/state", Bench: "BenchmarkFSMTaskShards", Metric: "256/16",
		Time: "100000x", QuickTime: "20000x", Runs: 3},
	{Issue: "bench", What: "dead dest, N=3, probe: calls per Timeout", Pkg: "./hintpolicy", Bench: "BenchmarkDeadDestinationGrowth/N=3/policy=probe", Metric: "probes/timeout",
		Baseline: "BenchmarkDeadDestinationGrowth/N=3/policy=off", Time: "1x", QuickTime: "-"},
	{Issue: "bench", What: "dead dest, N=5, probe: calls per Timeout", Pkg: "./hintpolicy", Bench: "BenchmarkDeadDestinationGrowth/N=5/policy=probe", Metric: "probes/timeout",
		Baseline: "BenchmarkDeadDestinationGrowth/N=5/policy=off", Time: "1x", QuickTime: "-"},
	{Issue: "bench", What: "dead dest, N=9, probe: calls per Timeout", Pkg: "./hintpolicy", Bench: "BenchmarkDeadDestinationGrowth/N=9/policy=probe", Metric: "probes/timeout",
		Baseline: "BenchmarkDeadDestinationGrowth/N=9/policy=off", Time: "1x", QuickTime: "-"},
	{Issue: "bench", What: "dead dest, N=3, probe: wasted calls per node", Pkg: "./hintpolicy", Bench: "BenchmarkDeadDestinationGrowth/N=3/policy=probe", Metric: "wasted-calls/node",
		Baseline: "BenchmarkDeadDestinationGrowth/N=3/policy=off", Time: "1x", QuickTime: "-"},
	{Issue: "bench", What: "dead dest, N=9, probe: wasted calls per node", Pkg: "./hintpolicy", Bench: "BenchmarkDeadDestinationGrowth/N=9/policy=probe", Metric: "wasted-calls/node",
		Baseline: "BenchmarkDeadDestinationGrowth/N=9/policy=off", Time: "1x", QuickTime: "-"},
	{Issue: "bench", What: "dead dest, N=9, probe: calls until all open", Pkg: "./hintpolicy", Bench: "BenchmarkDeadDestinationGrowth/N=9/policy=probe", Metric: "trip-calls",
		Baseline: "BenchmarkDeadDestinationGrowth/N=3/policy=probe", Time: "1x", QuickTime: "-"},
	{Issue: "bench", What: "dead dest, N=9, probe vs off: calls until all open", Pkg: "./hintpolicy", Bench: "BenchmarkDeadDestinationGrowth/N=9/policy=probe", Metric: "trip-calls",
		Baseline: "BenchmarkDeadDestinationGrowth/N=9/policy=off", Time: "1x", QuickTime: "-"},

	// Tasks on PostgreSQL (issue 18): one node's store alone, fsync on for both, batches of 100
	// submitted then acked (fenced).
	{Issue: "#18", What: "task store alone, submit+ack (tasks/s): postgres vs raft, 1 node", Pkg: "./taskstore/pgstore", Bench: "BenchmarkTaskLifecycle/postgres", Metric: "tasks/s",
		Baseline: "BenchmarkTaskLifecycle/raft", Time: "20000x", QuickTime: "2000x", Runs: 3},
	// A per-task cost that grew with the cluster: the submit's check that a callback URL is no
	// member's listener, parsed once per membership version instead of at every check.
	{Issue: "#18", What: "callback URL member check at submit, 5 members (ns): per version vs per check", Pkg: "./transport", Bench: "BenchmarkPolicyCheck/members=5/versioned", Metric: "ns/op",
		Baseline: "BenchmarkPolicyCheck/members=5/per-check", Time: "1s", QuickTime: "200ms"},
	{Issue: "#18", What: "callback URL member check at submit, 50 members (ns): per version vs per check", Pkg: "./transport", Bench: "BenchmarkPolicyCheck/members=50/versioned", Metric: "ns/op",
		Baseline: "BenchmarkPolicyCheck/members=50/per-check", Time: "1s", QuickTime: "200ms"},
	// The node wired to it: 3 nodes in one process, batches of 500 through the three APIs,
	// delivered and acknowledged; one local PostgreSQL (fsync on) shared by the three nodes.
	{Issue: "#18", What: "durable delivery, 3 nodes (tasks/s): postgres vs raft store", Pkg: "./node", Bench: "BenchmarkDeliveryStore/postgres", Metric: "tasks/s",
		Baseline: "BenchmarkDeliveryStore/raft", Target: "ratio>=0.7", Time: "20000x", QuickTime: "3000x", Runs: 3},
	// CPU per task of the same runs: steadier than tasks/s when other jobs share the machine.
	{Issue: "#18", What: "  CPU per task in the test process (3 nodes, load, destination; µs): postgres vs raft", Pkg: "./node", Bench: "BenchmarkDeliveryStore/postgres", Metric: "proc-cpu-us/task",
		Baseline: "BenchmarkDeliveryStore/raft", Time: "20000x", QuickTime: "3000x", Runs: 3},
	{Issue: "#18", What: "  PostgreSQL server CPU per task (µs), the same runs", Pkg: "./node", Bench: "BenchmarkDeliveryStore/postgres", Metric: "db-cpu-us/task",
		Time: "20000x", QuickTime: "3000x", Runs: 3},
	// The postgres store on real processes (issue 18): `fusebox serve --task-store postgres`
	// sharing one durable PostgreSQL (fsync on), a fresh server and cluster per node count / store.
	{Issue: "#18", What: "postgres store, 1 process: durable delivery, batches of 500 (tasks/s)", Pkg: "./test/e2e", Bench: "BenchmarkProcessPostgresNodes/nodes=1", Metric: "tasks/s",
		Time: "20000x", QuickTime: "3000x", Runs: 3},
	{Issue: "#18", What: "postgres store: durable delivery, 3 processes vs 1 (tasks/s)", Pkg: "./test/e2e", Bench: "BenchmarkProcessPostgresNodes/nodes=3", Metric: "tasks/s",
		Baseline: "BenchmarkProcessPostgresNodes/nodes=1", Time: "20000x", QuickTime: "3000x", Runs: 3},
	{Issue: "#18", What: "postgres store: durable delivery, 5 processes vs 1 (tasks/s)", Pkg: "./test/e2e", Bench: "BenchmarkProcessPostgresNodes/nodes=5", Metric: "tasks/s",
		Baseline: "BenchmarkProcessPostgresNodes/nodes=1", Time: "20000x", QuickTime: "3000x", Runs: 3},
	{Issue: "#18", What: "postgres store: durable delivery, 5 processes vs 3 (tasks/s)", Pkg: "./test/e2e", Bench: "BenchmarkProcessPostgresNodes/nodes=5", Metric: "tasks/s",
		Baseline: "BenchmarkProcessPostgresNodes/nodes=3", Time: "20000x", QuickTime: "3000x", Runs: 3},
	{Issue: "#18", What: "postgres store: durable delivery, 5 processes vs 1, warm clusters of 1, 3 and 5 taking turns in blocks of 20,000 (ratio)", Pkg: "./test/e2e", Bench: "BenchmarkProcessPostgresNodesInterleaved/nodes=1-3-5", Metric: "ratio",
		Target: "value>=0.9", Time: "3x", QuickTime: "1x", Runs: 3},
	{Issue: "#18", What: "  the same, 3 processes vs 1 (ratio)", Pkg: "./test/e2e", Bench: "BenchmarkProcessPostgresNodesInterleaved/nodes=1-3-5", Metric: "ratio-3v1",
		Target: "value>=0.9", Time: "3x", QuickTime: "1x", Runs: 3},
	{Issue: "#18", What: "  the same, 5 processes vs 3 (ratio)", Pkg: "./test/e2e", Bench: "BenchmarkProcessPostgresNodesInterleaved/nodes=1-3-5", Metric: "ratio-5v3",
		Target: "value>=0.9", Time: "3x", QuickTime: "1x", Runs: 3},
	{Issue: "#18", What: "  the same, fusebox CPU per task, 1 process (µs)", Pkg: "./test/e2e", Bench: "BenchmarkProcessPostgresNodesInterleaved/nodes=1-3-5", Metric: "nodes1-cpu-us/task",
		Time: "3x", QuickTime: "1x", Runs: 3},
	{Issue: "#18", What: "  the same, fusebox CPU per task, 5 processes (µs)", Pkg: "./test/e2e", Bench: "BenchmarkProcessPostgresNodesInterleaved/nodes=1-3-5", Metric: "nodes5-cpu-us/task",
		Time: "3x", QuickTime: "1x", Runs: 3},
	{Issue: "#18", What: "  the same, database server CPU per task, 1 process (µs)", Pkg: "./test/e2e", Bench: "BenchmarkProcessPostgresNodesInterleaved/nodes=1-3-5", Metric: "nodes1-db-cpu-us/task",
		Time: "3x", QuickTime: "1x", Runs: 3},
	{Issue: "#18", What: "  the same, database server CPU per task, 5 processes (µs)", Pkg: "./test/e2e", Bench: "BenchmarkProcessPostgresNodesInterleaved/nodes=1-3-5", Metric: "nodes5-db-cpu-us/task",
		Time: "3x", QuickTime: "1x", Runs: 3},
	{Issue: "#18", What: "  warm clusters taking turns: fusebox threads' timeslices on a CPU per task (about their context switches), 1 process", Pkg: "./test/e2e", Bench: "BenchmarkProcessPostgresNodesInterleaved/nodes=1-3-5", Metric: "nodes1-slices/task",
		Time: "3x", QuickTime: "1x", Runs: 3},
	{Issue: "#18", What: "  the same, 5 processes", Pkg: "./test/e2e", Bench: "BenchmarkProcessPostgresNodesInterleaved/nodes=1-3-5", Metric: "nodes5-slices/task",
		Time: "3x", QuickTime: "1x", Runs: 3},
	{Issue: "#18", What: "  page faults per task in the fusebox processes: 5 processes vs 1 (sequential runs, cold clusters)", Pkg: "./test/e2e", Bench: "BenchmarkProcessPostgresNodes/nodes=5", Metric: "node-faults/task",
		Baseline: "BenchmarkProcessPostgresNodes/nodes=1", Time: "20000x", QuickTime: "3000x", Runs: 3},
	{Issue: "#18", What: "  fusebox CPU per task (µs, all processes): 5 processes vs 1", Pkg: "./test/e2e", Bench: "BenchmarkProcessPostgresNodes/nodes=5", Metric: "node-cpu-us/task",
		Baseline: "BenchmarkProcessPostgresNodes/nodes=1", Time: "20000x", QuickTime: "3000x", Runs: 3},
	{Issue: "#18", What: "  fusebox CPU per task (µs, all processes): 3 processes vs 1", Pkg: "./test/e2e", Bench: "BenchmarkProcessPostgresNodes/nodes=3", Metric: "node-cpu-us/task",
		Baseline: "BenchmarkProcessPostgresNodes/nodes=1", Time: "20000x", QuickTime: "3000x", Runs: 3},
	{Issue: "#18", What: "  fusebox CPU per task beyond the cluster's idle cost (µs): 5 processes vs 1", Pkg: "./test/e2e", Bench: "BenchmarkProcessPostgresNodes/nodes=5", Metric: "node-work-cpu-us/task",
		Baseline: "BenchmarkProcessPostgresNodes/nodes=1", Time: "20000x", QuickTime: "3000x", Runs: 3},
	{Issue: "#18", What: "  the same clusters idle, just before the load (cores): 5 processes vs 1", Pkg: "./test/e2e", Bench: "BenchmarkProcessPostgresNodes/nodes=5", Metric: "node-idle-cores",
		Baseline: "BenchmarkProcessPostgresNodes/nodes=1", Time: "20000x", QuickTime: "3000x", Runs: 3},
	{Issue: "#18", What: "  the database server's CPU per task (µs): 5 processes vs 1", Pkg: "./test/e2e", Bench: "BenchmarkProcessPostgresNodes/nodes=5", Metric: "db-cpu-us/task",
		Baseline: "BenchmarkProcessPostgresNodes/nodes=1", Time: "20000x", QuickTime: "3000x", Runs: 3},
	{Issue: "#18", What: "  the database server's CPU per task (µs): 3 processes vs 1", Pkg: "./test/e2e", Bench: "BenchmarkProcessPostgresNodes/nodes=3", Metric: "db-cpu-us/task",
		Baseline: "BenchmarkProcessPostgresNodes/nodes=1", Time: "20000x", QuickTime: "3000x", Runs: 3},
	{Issue: "#18", What: "postgres store alone: submit call at 1,000 single submits/s over 3 pools, durable, p99 ms", Pkg: "./taskstore/pgstore", Bench: "BenchmarkSubmitLatency", Metric: "accept-p99-ms",
		Time: "3000x", QuickTime: "1000x", Runs: 3},
	{Issue: "#18", What: "5 idle processes (cores): postgres store vs raft store", Pkg: "./test/e2e", Bench: "BenchmarkProcessPostgresIdle/store=postgres/nodes=5", Metric: "node-cpu-cores",
		Baseline: "BenchmarkProcessPostgresIdle/store=raft/nodes=5", Time: "1000x", QuickTime: "300x"},
	{Issue: "#18", What: "  the database's CPU with them idle (cores)", Pkg: "./test/e2e", Bench: "BenchmarkProcessPostgresIdle/store=postgres/nodes=5", Metric: "db-cpu-cores",
		Time: "1000x", QuickTime: "300x"},
	{Issue: "#18", What: "RSS per node, 1M pending tasks, 3 processes (MB): postgres (measured at 1M) vs raft (200k, extrapolated)", Pkg: "./test/e2e",
		Bench: "BenchmarkProcessPendingRSS/store=postgres", Metric: "rss-MB@1M", Baseline: "BenchmarkProcessPendingRSS/store=raft", Target: "value<=150", Time: "1000000x", QuickTime: "-"},
	{Issue: "#18", What: "  peak RSS per node (VmHWM) with 1M pending tasks, postgres store (MB)", Pkg: "./test/e2e", Bench: "BenchmarkProcessPendingRSS/store=postgres", Metric: "hwm-MB",
		Target: "value<=150", Time: "1000000x", QuickTime: "-"},
	{Issue: "#18", What: "  RSS per pending task, per node (bytes): postgres vs raft", Pkg: "./test/e2e", Bench: "BenchmarkProcessPendingRSS/store=postgres", Metric: "rss-B/task",
		Baseline: "BenchmarkProcessPendingRSS/store=raft", Time: "1000000x", QuickTime: "-"},
	{Issue: "#18", What: "  submit rate filling the backlog, batches of 500 (tasks/s): postgres vs raft", Pkg: "./test/e2e", Bench: "BenchmarkProcessPendingRSS/store=postgres", Metric: "submit-tasks/s",
		Baseline: "BenchmarkProcessPendingRSS/store=raft", Time: "1000000x", QuickTime: "-"},
	{Issue: "#18", What: "postgres store, 3 processes: enqueue → delivered at 1,000 tasks/s, p99 ms (vs raft)", Pkg: "./test/e2e", Bench: "BenchmarkProcessPostgresLatency/store=postgres/rate=1000", Metric: "p99-ms",
		Baseline: "BenchmarkProcessPostgresLatency/store=raft/rate=1000", Target: "value<=50", Time: "5000x", QuickTime: "2000x", Runs: 3},
	{Issue: "#18", What: "  the same, p50 ms (vs raft)", Pkg: "./test/e2e", Bench: "BenchmarkProcessPostgresLatency/store=postgres/rate=1000", Metric: "p50-ms",
		Baseline: "BenchmarkProcessPostgresLatency/store=raft/rate=1000", Time: "5000x", QuickTime: "2000x", Runs: 3},
	{Issue: "#18", What: "  the same, submit call alone, p99 ms (vs raft)", Pkg: "./test/e2e", Bench: "BenchmarkProcessPostgresLatency/store=postgres/rate=1000", Metric: "accept-p99-ms",
		Baseline: "BenchmarkProcessPostgresLatency/store=raft/rate=1000", Time: "5000x", QuickTime: "2000x", Runs: 3},
	{Issue: "#18", What: "  the same, rate reached (tasks/s, vs raft)", Pkg: "./test/e2e", Bench: "BenchmarkProcessPostgresLatency/store=postgres/rate=1000", Metric: "tasks/s",
		Baseline: "BenchmarkProcessPostgresLatency/store=raft/rate=1000", Time: "5000x", QuickTime: "2000x", Runs: 3},
	// The confirm hint policy (issue 19 §5): adopt's cost, probe's safety.
	{Issue: "#19", What: "dead dest, N=3, confirm vs probe: calls until all open", Pkg: "./hintpolicy", Bench: "BenchmarkDeadDestinationGrowth/N=3/policy=confirm", Metric: "trip-calls",
		Baseline: "BenchmarkDeadDestinationGrowth/N=3/policy=probe", Target: "value<=8", Time: "1x", QuickTime: "-"},
	{Issue: "#19", What: "dead dest, N=5, confirm vs probe: calls until all open", Pkg: "./hintpolicy", Bench: "BenchmarkDeadDestinationGrowth/N=5/policy=confirm", Metric: "trip-calls",
		Baseline: "BenchmarkDeadDestinationGrowth/N=5/policy=probe", Target: "value<=8", Time: "1x", QuickTime: "-"},
	{Issue: "#19", What: "dead dest, N=9, confirm vs probe: calls until all open", Pkg: "./hintpolicy", Bench: "BenchmarkDeadDestinationGrowth/N=9/policy=confirm", Metric: "trip-calls",
		Baseline: "BenchmarkDeadDestinationGrowth/N=9/policy=probe", Target: "value<=8", Time: "1x", QuickTime: "-"},
	{Issue: "#19", What: "dead dest, N=17, confirm vs probe: calls until all open", Pkg: "./hintpolicy", Bench: "BenchmarkDeadDestinationGrowth/N=17/policy=confirm", Metric: "trip-calls",
		Baseline: "BenchmarkDeadDestinationGrowth/N=17/policy=probe", Target: "value<=8", Time: "1x", QuickTime: "-"},
	{Issue: "#19", What: "dead dest, N=17, confirm vs adopt: calls until all open", Pkg: "./hintpolicy", Bench: "BenchmarkDeadDestinationGrowth/N=17/policy=confirm", Metric: "trip-calls",
		Baseline: "BenchmarkDeadDestinationGrowth/N=17/policy=adopt", Time: "1x", QuickTime: "-"},
	{Issue: "#19", What: "one sick node, N=5, confirm vs probe: healthy nodes' tasks delivered", Pkg: "./hintpolicy", Bench: "BenchmarkSickNode/policy=confirm", Metric: "healthy-delivered",
		Baseline: "BenchmarkSickNode/policy=probe", Target: "value>=0.95", Time: "1x", QuickTime: "-", Runs: 3},
	{Issue: "#19", What: "one sick node, N=5, adopt vs probe: healthy nodes' tasks delivered", Pkg: "./hintpolicy", Bench: "BenchmarkSickNode/policy=adopt", Metric: "healthy-delivered",
		Baseline: "BenchmarkSickNode/policy=probe", Time: "1x", QuickTime: "-", Runs: 3},
	{Issue: "#19", What: "dead destination, N=5, confirm vs probe: recovery ms", Pkg: "./hintpolicy", Bench: "BenchmarkDeadDestination/policy=confirm", Metric: "recovery-ms",
		Baseline: "BenchmarkDeadDestination/policy=probe", Target: "ratio<=1", Time: "1x", QuickTime: "-", Runs: 3},
	{Issue: "#19", What: "dead destination, N=5, confirm vs probe: calls until all open", Pkg: "./hintpolicy", Bench: "BenchmarkDeadDestination/policy=confirm", Metric: "trip-calls",
		Baseline: "BenchmarkDeadDestination/policy=probe", Target: "value<=8", Time: "1x", QuickTime: "-", Runs: 3},
	// Active health checks (issue 19 §4): a 10 s outage of a Nexus endpoint with 300 tasks waiting,
	// N=3, breaker Timeout = health interval = 1 s; baseline: the same fleet, an endpoint without one.
	{Issue: "#19", What: "health check, N=3: real tasks spent probing while every breaker was open (vs none)", Pkg: "./node", Bench: "BenchmarkHealthCheckOutage/health", Metric: "probe-calls",
		Baseline: "BenchmarkHealthCheckOutage/no_health", Target: "value<=0", Time: "1x", QuickTime: "-", Runs: 3},
	{Issue: "#19", What: "health check, N=3: real tasks the destination got during the outage (vs none)", Pkg: "./node", Bench: "BenchmarkHealthCheckOutage/health", Metric: "outage-calls",
		Baseline: "BenchmarkHealthCheckOutage/no_health", Time: "1x", QuickTime: "-", Runs: 3},
	{Issue: "#19", What: "health check, N=3: every node closed after the recovery (s), target interval + 0.25 s", Pkg: "./node", Bench: "BenchmarkHealthCheckOutage/health", Metric: "all-closed-s",
		Baseline: "BenchmarkHealthCheckOutage/no_health", Target: "value<=1.25", Time: "1x", QuickTime: "-", Runs: 3},
	{Issue: "#19", What: "health check, N=3: first task delivered after the recovery (s)", Pkg: "./node", Bench: "BenchmarkHealthCheckOutage/health", Metric: "first-delivery-s",
		Baseline: "BenchmarkHealthCheckOutage/no_health", Time: "1x", QuickTime: "-", Runs: 3},

	// Bounded metric cardinality (issue 20 §7): a scrape of 20,000 destinations.
	{Issue: "#20", What: "scrape of 20k destinations, capped: bytes (vs cap off)", Pkg: "./breakerpool", Bench: "BenchmarkScrape20k/cap=100", Metric: "bytes/scrape",
		Baseline: "BenchmarkScrape20k/cap=off", Target: "value<=1048576", Time: "5x", QuickTime: "2x"},
	{Issue: "#20", What: "callback through the executor with request series on, process CPU per call, interleaved with series off (ratio)", Pkg: "./transport", Bench: "BenchmarkSeriesInterleaved", Metric: "cpu-ratio",
		Target: "value<=1.10", Time: "20x", QuickTime: "4x", Runs: 3},
	{Issue: "#20", What: "  the same, wall time (vs off, separate runs)", Pkg: "./transport", Bench: "BenchmarkOutbound/raw-callback-metered", Metric: "ns/op",
		Baseline: "BenchmarkOutbound/raw-callback", Time: "10000x", QuickTime: "500x", Runs: 3},
	{Issue: "#20", What: "scrape of 20k destinations, capped: ns (vs cap off)", Pkg: "./breakerpool", Bench: "BenchmarkScrape20k/cap=100", Metric: "ns/op",
		Baseline: "BenchmarkScrape20k/cap=off", Target: "value<=250000000", Time: "5x", QuickTime: "2x"},
	{Issue: "#19", What: "429 Retry-After 5 s, N=3: calls in the 5 s (vs maxRetryAfter 0)", Pkg: "./hintpolicy", Bench: "BenchmarkRetryAfterFleet/N=3/feature=on", Metric: "calls-in-window",
		Baseline: "BenchmarkRetryAfterFleet/N=3/feature=off", Target: "value<=1", Time: "1x", QuickTime: "-", Runs: 3},
	{Issue: "#19", What: "429 Retry-After 5 s, N=5: calls in the 5 s (vs maxRetryAfter 0)", Pkg: "./hintpolicy", Bench: "BenchmarkRetryAfterFleet/N=5/feature=on", Metric: "calls-in-window",
		Baseline: "BenchmarkRetryAfterFleet/N=5/feature=off", Target: "value<=1", Time: "1x", QuickTime: "-", Runs: 3},
}
