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
	// Target: "ratio<=X", "ratio>=X", "value<=X" or "" (report only).
	Target string
	// Time is the -benchtime for the package run this row belongs to
	// (rows of one package share the slowest setting).
	Time      string
	QuickTime string
}

var rows = []row{
	// Breaker pool (foundation issue).
	{Issue: "#2", What: "pool lookup+Allow+done, 1 key, serial", Pkg: "./breakerpool", Bench: "BenchmarkPoolAllow/keys=1/serial", Metric: "ns/op",
		Baseline: "BenchmarkRawGobreaker/keys=1/serial", Target: "ratio<=1.25", Time: "1s", QuickTime: "200ms"},
	{Issue: "#2", What: "pool lookup+Allow+done, 1 key, parallel", Pkg: "./breakerpool", Bench: "BenchmarkPoolAllow/keys=1/parallel", Metric: "ns/op",
		Baseline: "BenchmarkRawGobreaker/keys=1/parallel", Target: "ratio<=1.25", Time: "1s", QuickTime: "200ms"},
	{Issue: "#2", What: "pool lookup+Allow+done, 10k keys, serial", Pkg: "./breakerpool", Bench: "BenchmarkPoolAllow/keys=10000/serial", Metric: "ns/op",
		Baseline: "BenchmarkRawGobreaker/keys=10000/serial", Target: "ratio<=1.25", Time: "1s", QuickTime: "200ms"},
	{Issue: "#2", What: "pool lookup+Allow+done, 10k keys, parallel", Pkg: "./breakerpool", Bench: "BenchmarkPoolAllow/keys=10000/parallel", Metric: "ns/op",
		Baseline: "BenchmarkRawGobreaker/keys=10000/parallel", Target: "ratio<=1.25", Time: "1s", QuickTime: "200ms"},
	{Issue: "#2", What: "Allow on an open breaker", Pkg: "./breakerpool", Bench: "BenchmarkAllowOpen", Metric: "ns/op", Target: "value<=100", Time: "1s", QuickTime: "200ms"},
	{Issue: "#2", What: "memory per idle breaker", Pkg: "./breakerpool", Bench: "BenchmarkIdleBreakerBytes", Metric: "bytes/breaker", Target: "value<=1024", Time: "1x", QuickTime: "1x"},
	{Issue: "#2", What: "1M keys streamed with eviction: peak entries", Pkg: "./breakerpool", Bench: "BenchmarkEvictionStream", Metric: "peak-entries", Time: "1x", QuickTime: "-"},
	{Issue: "#2", What: "1M keys streamed with eviction: peak heap MiB", Pkg: "./breakerpool", Bench: "BenchmarkEvictionStream", Metric: "peak-heap-MiB", Time: "1x", QuickTime: "-"},

	// Control plane.
	{Issue: "#3", What: "Raft apply, 3 nodes, 1 writer (ops/s)", Pkg: "./raftstore", Bench: "BenchmarkApply/writers=1", Metric: "ops/s", Time: "2000x", QuickTime: "300x"},
	{Issue: "#3", What: "Raft apply, 3 nodes, 64 writers (ops/s)", Pkg: "./raftstore", Bench: "BenchmarkApply/writers=64", Metric: "ops/s",
		Baseline: "BenchmarkApply/writers=1", Target: "ratio>=1", Time: "2000x", QuickTime: "300x"},
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

	// Shards.
	{Issue: "#5", What: "shard lookup (hash + snapshot owner)", Pkg: "./shardmap", Bench: "BenchmarkLookup", Metric: "ns/op", Time: "1s", QuickTime: "200ms"},
	{Issue: "#5", What: "shard lookup, parallel", Pkg: "./shardmap", Bench: "BenchmarkLookupParallel", Metric: "ns/op", Time: "1s", QuickTime: "200ms"},
	{Issue: "#5", What: "rebalance 1024 shards over 10 nodes", Pkg: "./shardmap", Bench: "BenchmarkRebalance/1024shards_10nodes", Metric: "ns/op", Time: "1s", QuickTime: "200ms"},

	// Outbound executors and the queue.
	{Issue: "#6", What: "callback POST through the executor", Pkg: "./transport/outbound", Bench: "BenchmarkOutbound/raw-callback", Metric: "ns/op",
		Baseline: "BenchmarkOutbound/baseline-post", Target: "ratio<=1.5", Time: "3000x", QuickTime: "500x"},
	{Issue: "#6", What: "Nexus sync start through the executor", Pkg: "./transport/outbound", Bench: "BenchmarkOutbound/nexus-sync-start", Metric: "ns/op",
		Baseline: "BenchmarkOutbound/baseline-nexus-post", Target: "ratio<=1.5", Time: "3000x", QuickTime: "500x"},
}
