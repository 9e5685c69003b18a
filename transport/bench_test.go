package transport_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/nexus-rpc/sdk-go/nexus"
	"github.com/prometheus/client_golang/prometheus"

	"fusebox/breakerpool"
	"fusebox/transport"
)

// benchServer hosts a sync echo Nexus operation under /nexus and a plain
// 200 handler under /cb, on loopback.
func benchServer(b *testing.B) string {
	svc := nexus.NewService("svc")
	svc.MustRegister(nexus.NewSyncOperation("echo", func(_ context.Context, in json.RawMessage, _ nexus.StartOperationOptions) (json.RawMessage, error) {
		return in, nil
	}))
	reg := nexus.NewServiceRegistry()
	if err := reg.Register(svc); err != nil {
		b.Fatal(err)
	}
	h, err := reg.NewHandler()
	if err != nil {
		b.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/nexus/", http.StripPrefix("/nexus", nexus.NewHTTPHandler(nexus.HandlerOptions{Handler: h, Logger: quietLogger})))
	mux.HandleFunc("/cb", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusOK)
	})
	return newServer(b, mux).URL
}

// reportCPU reports the process's CPU time (user + system, every thread:
// the in-process destination's included, as it is in the baseline) per
// op as cpu-ns/op when the returned func runs. On a shared machine it moves
// far less than wall time, which waits for the CPU other jobs hold.
func reportCPU(b *testing.B) func() {
	start := cpuClock()
	return func() { b.ReportMetric(float64(cpuClock()-start)/float64(b.N), "cpu-ns/op") }
}

func cpuClock() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

var benchInput = json.RawMessage(`{"workflow":"wf-123","amount":42,"note":"benchmark payload"}`)

// BenchmarkOutbound compares the executors with raw http.Client POSTs to the
// same server over the same transport settings (the baseline).
func BenchmarkOutbound(b *testing.B) {
	base := benchServer(b)
	e := newExecutor(b, transport.Options{})
	ctx := context.Background()

	b.Run("baseline-post", func(b *testing.B) {
		defer reportCPU(b)()
		client := transport.NewHTTPClient()
		defer client.CloseIdleConnections()
		b.ReportAllocs()
		for b.Loop() {
			if err := drained(client.Post(base+"/cb", "application/json", bytes.NewReader(benchInput))); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("raw-callback", func(b *testing.B) {
		defer reportCPU(b)()
		r := transport.Request{TaskGroup: breakerpool.TaskGroupCallback, URL: base + "/cb",
			Body: benchInput, ContentType: "application/json", RequestID: "rid"}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := e.Execute(ctx, r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("raw-callback-metered", func(b *testing.B) {
		defer reportCPU(b)()
		// raw-callback with every metric on: the request series (filtered by
		// a real pool, this key shown) and the attempt counters.
		pool, err := breakerpool.New(breakerpool.Config{}, nil, nil, nil)
		if err != nil {
			b.Fatal(err)
		}
		me := newExecutor(b, transport.Options{Registerer: prometheus.NewRegistry(), Series: pool})
		r := transport.Request{TaskGroup: breakerpool.TaskGroupCallback, URL: base + "/cb",
			Body: benchInput, ContentType: "application/json", RequestID: "rid", Namespace: "ns", Destination: "http://cb"}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := me.Execute(ctx, r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("baseline-nexus-post", func(b *testing.B) {
		defer reportCPU(b)()
		client := transport.NewHTTPClient()
		defer client.CloseIdleConnections()
		b.ReportAllocs()
		for b.Loop() {
			handNexusPost(b, client, base)
		}
	})
	b.Run("nexus-sync-start", func(b *testing.B) {
		defer reportCPU(b)()
		r := transport.Request{TaskGroup: breakerpool.TaskGroupNexusInvocation, URL: base + "/nexus",
			Service: "svc", Operation: "echo", RequestID: "rid", Input: benchInput}
		b.ReportAllocs()
		for b.Loop() {
			res, err := e.Execute(ctx, r)
			if err != nil || res.Outcome != transport.OutcomeSucceeded {
				b.Fatal(res, err)
			}
		}
	})
}

// handNexusPost sends what the executor's sync start sends, by hand: the
// floor for the sdk path.
func handNexusPost(b *testing.B, client *http.Client, base string) {
	req, _ := http.NewRequest(http.MethodPost, base+"/nexus/svc/echo", bytes.NewReader(benchInput))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Nexus-Request-Id", "rid")
	if err := drained(client.Do(req)); err != nil {
		b.Fatal(err)
	}
}

// drained reads and closes a response; anything but a 200 is an error.
func drained(resp *http.Response, err error) error {
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != 200 {
		return errors.New(resp.Status)
	}
	return nil
}

// BenchmarkNewSDKClient measures building an sdk client per call, which the
// executor does instead of caching clients per (URL, service).
func BenchmarkNewSDKClient(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := nexus.NewHTTPClient(nexus.HTTPClientOptions{BaseURL: "http://127.0.0.1:8080/nexus", Service: "svc"}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkOutboundInterleaved is BenchmarkOutbound's Nexus sync start
// against its hand-made POST, in alternating blocks of calls (the order
// swapped every pair), so that both sides see the same machine: run as two
// sub-benchmarks one after the other, the ratio moved 1.14–1.56 between
// runs of one binary on this shared box. cpu-ratio is the process's CPU time
// (client and in-process destination) over the blocks of each side.
func BenchmarkOutboundInterleaved(b *testing.B) {
	base := benchServer(b)
	e := newExecutor(b, transport.Options{})
	client := transport.NewHTTPClient()
	defer client.CloseIdleConnections()
	ctx := context.Background()
	post := func() { handNexusPost(b, client, base) }
	r := transport.Request{TaskGroup: breakerpool.TaskGroupNexusInvocation, URL: base + "/nexus",
		Service: "svc", Operation: "echo", RequestID: "rid", Input: benchInput}
	start := func() {
		res, err := e.Execute(ctx, r)
		if err != nil || res.Outcome != transport.OutcomeSucceeded {
			b.Fatal(res, err)
		}
	}
	cpu, calls := interleaved(b, post, start)
	b.ReportMetric(float64(cpu[0].Nanoseconds())/calls, "post-cpu-ns")
	b.ReportMetric(float64(cpu[1].Nanoseconds())/calls, "start-cpu-ns")
}

// BenchmarkSeriesInterleaved is BenchmarkOutbound's raw-callback against
// raw-callback-metered (the request series and attempt counters on) in
// alternating blocks, as BenchmarkOutboundInterleaved: what the metrics
// cost a call, both sides on the same machine (issue 20 §7).
func BenchmarkSeriesInterleaved(b *testing.B) {
	base := benchServer(b)
	ctx := context.Background()
	plain := newExecutor(b, transport.Options{})
	pool, err := breakerpool.New(breakerpool.Config{}, nil, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	metered := newExecutor(b, transport.Options{Registerer: prometheus.NewRegistry(), Series: pool})
	r := transport.Request{TaskGroup: breakerpool.TaskGroupCallback, URL: base + "/cb",
		Body: benchInput, ContentType: "application/json", RequestID: "rid", Namespace: "ns", Destination: "http://cb"}
	call := func(e *transport.Executor) func() {
		return func() {
			if _, err := e.Execute(ctx, r); err != nil {
				b.Fatal(err)
			}
		}
	}
	cpu, calls := interleaved(b, call(plain), call(metered))
	b.ReportMetric(float64(cpu[0].Nanoseconds())/calls, "plain-cpu-ns")
	b.ReportMetric(float64(cpu[1].Nanoseconds())/calls, "metered-cpu-ns")
}

// interleaved runs blocks of 500 calls of base and of other in turn, the
// order swapped every pair, until b.Loop ends, and reports cpu-ratio and
// wall-ratio (other over base). It returns each side's process CPU time and
// the calls each side made.
func interleaved(b *testing.B, base, other func()) (cpu [2]time.Duration, calls float64) {
	const block = 500
	var wall [2]time.Duration
	runBlock := func(side int) {
		f := base
		if side == 1 {
			f = other
		}
		c0, t0 := cpuClock(), time.Now()
		for range block {
			f()
		}
		cpu[side] += cpuClock() - c0
		wall[side] += time.Since(t0)
	}
	pairs := 0
	for b.Loop() {
		first := pairs % 2
		runBlock(first)
		runBlock(1 - first)
		pairs++
	}
	b.ReportMetric(float64(cpu[1])/float64(cpu[0]), "cpu-ratio")
	b.ReportMetric(float64(wall[1])/float64(wall[0]), "wall-ratio")
	return cpu, float64(pairs * block)
}
