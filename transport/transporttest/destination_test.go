package transporttest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"fusebox/breakerpool"
	"fusebox/internal/testwait"
	"fusebox/transport"
	"fusebox/transport/transporttest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newExecutor(t *testing.T) *transport.Executor {
	t.Helper()
	e, err := transport.New(transport.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e
}

func start(d *transporttest.Destination, op, id string) transport.Request {
	return transport.Request{TaskGroup: breakerpool.TaskGroupNexusInvocation, URL: d.NexusURL(),
		Service: transporttest.Service, Operation: op, RequestID: id, Input: json.RawMessage(`{"n":1}`)}
}

func cancelReq(d *transporttest.Destination, token string) transport.Request {
	return transport.Request{TaskGroup: breakerpool.TaskGroupNexusCancelation, URL: d.NexusURL(),
		Service: transporttest.Service, Operation: transporttest.OpAsync, OperationID: token, RequestID: "cancel-" + token}
}

func rawCallback(d *transporttest.Destination, id string) transport.Request {
	return transport.Request{TaskGroup: breakerpool.TaskGroupCallback, URL: d.CallbackURL(),
		Body: []byte("raw " + id), ContentType: "text/plain", RequestID: id}
}

func completion(d *transporttest.Destination, id string) transport.Request {
	return transport.Request{TaskGroup: breakerpool.TaskGroupCallback, URL: d.CallbackURL(), RequestID: id,
		Completion: &transport.Completion{State: transport.CompletionSucceeded, Result: json.RawMessage(`[1,2]`), OperationToken: "op-x"}}
}

func TestUp(t *testing.T) {
	d := transporttest.NewDestination(t)
	e := newExecutor(t)
	ctx := context.Background()

	res, err := e.Execute(ctx, start(d, transporttest.OpEcho, "r1"))
	if err != nil || res.Outcome != transport.OutcomeSucceeded || string(res.Output) != `{"n":1}` {
		t.Fatalf("echo: %+v, %v", res, err)
	}
	res, err = e.Execute(ctx, start(d, transporttest.OpAsync, "r2"))
	if err != nil || res.Outcome != transport.OutcomeStarted || res.OperationID != "op-r2" {
		t.Fatalf("async: %+v, %v", res, err)
	}
	if res, err = e.Execute(ctx, cancelReq(d, res.OperationID)); err != nil || res.Outcome != transport.OutcomeSucceeded {
		t.Fatalf("cancel: %+v, %v", res, err)
	}
	res, err = e.Execute(ctx, start(d, transporttest.OpFail, "r3"))
	if res.Outcome != transport.OutcomeFailed || res.Status != 424 || breakerpool.IsDestinationDown(err) {
		t.Fatalf("fail: %+v, %v", res, err)
	}
	if res, err = e.Execute(ctx, rawCallback(d, "r4")); err != nil || res.Outcome != transport.OutcomeSucceeded {
		t.Fatalf("raw callback: %+v, %v", res, err)
	}
	if res, err = e.Execute(ctx, completion(d, "r5")); err != nil || res.Outcome != transport.OutcomeSucceeded {
		t.Fatalf("completion: %+v, %v", res, err)
	}

	calls := d.Calls()
	want := []struct {
		kind   transporttest.Kind
		id     string
		status int
	}{
		{transporttest.KindStart, "r1", 200}, {transporttest.KindStart, "r2", 201},
		{transporttest.KindCancel, "cancel-op-r2", 202}, {transporttest.KindStart, "r3", 424},
		{transporttest.KindCallback, "r4", 200}, {transporttest.KindCallback, "r5", 200},
	}
	if len(calls) != len(want) {
		t.Fatalf("%d calls recorded, want %d: %+v", len(calls), len(want), calls)
	}
	for i, w := range want {
		c := calls[i]
		if c.Kind != w.kind || c.RequestID != w.id || c.Status != w.status || c.Mode != transporttest.ModeUp {
			t.Errorf("call %d = %s %q %d %v, want %+v", i, c.Kind, c.RequestID, c.Status, c.Mode, w)
		}
	}
	if c := calls[0]; c.Service != transporttest.Service || c.Operation != transporttest.OpEcho || string(c.Body) != `{"n":1}` {
		t.Errorf("start call = %+v", c)
	}
	if c := calls[2]; c.OperationToken != "op-r2" {
		t.Errorf("cancel token = %q", c.OperationToken)
	}
	if c := calls[4]; string(c.Body) != "raw r4" || c.ContentType != "text/plain" || c.State != "" {
		t.Errorf("raw callback = %+v", c)
	}
	if c := calls[5]; c.State != "succeeded" || c.OperationToken != "op-x" || string(c.Body) != "[1,2]" {
		t.Errorf("completion = %+v", c)
	}
	if n := d.Count(transporttest.KindStart); n != 3 {
		t.Errorf("Count(start) = %d", n)
	}
	if got := d.CallsWithRequestID("r4"); len(got) != 1 {
		t.Errorf("CallsWithRequestID = %+v", got)
	}
	d.Reset()
	if d.Count("") != 0 {
		t.Error("Reset kept calls")
	}
}

// TestCountOnly checks that a destination told to count only still answers
// every kind of call as before and counts it, keeping only the calls made
// before.
func TestCountOnly(t *testing.T) {
	d := transporttest.NewDestination(t)
	e := newExecutor(t)
	ctx := context.Background()
	if res, err := e.Execute(ctx, rawCallback(d, "kept")); err != nil || res.Outcome != transport.OutcomeSucceeded {
		t.Fatalf("raw callback: %+v, %v", res, err)
	}
	d.CountOnly()
	if res, err := e.Execute(ctx, start(d, transporttest.OpEcho, "c1")); err != nil || string(res.Output) != `{"n":1}` {
		t.Fatalf("echo: %+v, %v", res, err)
	}
	if res, err := e.Execute(ctx, completion(d, "c2")); err != nil || res.Outcome != transport.OutcomeSucceeded {
		t.Fatalf("completion: %+v, %v", res, err)
	}
	if res, err := e.Execute(ctx, start(d, transporttest.OpFail, "c3")); res.Outcome != transport.OutcomeFailed || res.Status != 424 {
		t.Fatalf("fail: %+v, %v", res, err)
	}
	if n, starts, callbacks := d.Count(""), d.Count(transporttest.KindStart), d.Count(transporttest.KindCallback); n != 4 || starts != 2 || callbacks != 2 {
		t.Fatalf("counts: all %d, start %d, callback %d; want 4, 2, 2", n, starts, callbacks)
	}
	if calls := d.Calls(); len(calls) != 1 || calls[0].RequestID != "kept" {
		t.Fatalf("calls kept: %+v, want the one before CountOnly", calls)
	}
}

func TestFailureModes(t *testing.T) {
	d := transporttest.NewDestination(t)
	e := newExecutor(t)
	reqs := map[string]func(string) transport.Request{
		"start":    func(id string) transport.Request { return start(d, transporttest.OpEcho, id) },
		"cancel":   func(id string) transport.Request { return cancelReq(d, id) },
		"raw":      func(id string) transport.Request { return rawCallback(d, id) },
		"complete": func(id string) transport.Request { return completion(d, id) },
	}
	modes := []struct {
		mode     transporttest.Mode
		down     bool
		status   int
		recorded bool
	}{
		{transporttest.ModeUnavailable, true, 503, true},
		{transporttest.ModeBadRequest, false, 400, true},
		{transporttest.ModeSlow, true, 0, true},
		{transporttest.ModeRefuse, true, 0, false},
	}
	for _, m := range modes {
		for name, mk := range reqs {
			t.Run(fmt.Sprintf("%v/%s", m.mode, name), func(t *testing.T) {
				if err := d.SetMode(m.mode); err != nil {
					t.Fatal(err)
				}
				id := fmt.Sprintf("%v-%s", m.mode, name)
				r := mk(id)
				r.Timeout = 100 * time.Millisecond
				res, err := e.Execute(context.Background(), r)
				if breakerpool.IsDestinationDown(err) != m.down || res.Status != m.status {
					t.Fatalf("got %+v, %v; want down=%v status %d", res, err, m.down, m.status)
				}
				if !m.recorded {
					if n := len(d.CallsWithRequestID(r.RequestID)); n != 0 {
						t.Fatalf("refused request was recorded %d times", n)
					}
					return
				}
				// The handler records after answering; a slow one after the client left.
				testwait.For(t, 10*time.Second, "the condition", func() bool { return len(d.CallsWithRequestID(r.RequestID)) == 1 })
				if c := d.CallsWithRequestID(r.RequestID)[0]; c.Mode != m.mode {
					t.Errorf("recorded mode %v", c.Mode)
				}
			})
		}
	}
	// Back up on the same address.
	addr := d.Addr()
	if err := d.SetMode(transporttest.ModeUp); err != nil {
		t.Fatal(err)
	}
	if d.Addr() != addr {
		t.Fatalf("address moved from %s to %s", addr, d.Addr())
	}
	if res, err := e.Execute(context.Background(), start(d, transporttest.OpEcho, "again")); err != nil || res.Outcome != transport.OutcomeSucceeded {
		t.Fatalf("after reopening: %+v, %v", res, err)
	}
}

func TestRefuseDropsPooledConnections(t *testing.T) {
	d := transporttest.NewDestination(t)
	e := newExecutor(t)
	// Warm a keep-alive connection, then refuse: the pooled connection must not
	// keep working.
	if _, err := e.Execute(context.Background(), rawCallback(d, "warm")); err != nil {
		t.Fatal(err)
	}
	if err := d.SetMode(transporttest.ModeRefuse); err != nil {
		t.Fatal(err)
	}
	_, err := e.Execute(context.Background(), rawCallback(d, "refused"))
	if !breakerpool.IsDestinationDown(err) {
		t.Fatalf("err = %v, want down", err)
	}
	if d.Mode() != transporttest.ModeRefuse {
		t.Errorf("Mode() = %v", d.Mode())
	}
}

func TestConcurrentUseWhileSwitching(t *testing.T) {
	d := transporttest.NewDestination(t)
	e := newExecutor(t)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var mu sync.Mutex
	outcomes := map[transport.Outcome]int{}
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				r := rawCallback(d, fmt.Sprintf("w%d-%d", w, i))
				r.Timeout = 50 * time.Millisecond
				res, _ := e.Execute(ctx, r)
				mu.Lock()
				outcomes[res.Outcome]++
				mu.Unlock()
			}
		}()
	}
	count := func(o transport.Outcome) int {
		mu.Lock()
		defer mu.Unlock()
		return outcomes[o]
	}
	steps := []struct {
		mode transporttest.Mode
		want transport.Outcome
	}{
		{transporttest.ModeUnavailable, transport.OutcomeDown},
		{transporttest.ModeRefuse, transport.OutcomeDown},
		{transporttest.ModeBadRequest, transport.OutcomeFailed},
		{transporttest.ModeSlow, transport.OutcomeDown},
		{transporttest.ModeRefuse, transport.OutcomeDown},
		{transporttest.ModeUp, transport.OutcomeSucceeded},
	}
	for _, st := range steps {
		if err := d.SetMode(st.mode); err != nil {
			t.Fatal(err)
		}
		// Let traffic see each mode: the mode's own outcome must keep coming.
		before := count(st.want)
		testwait.For(t, 10*time.Second, "the condition", func() bool { return count(st.want) > before+10 })
	}
	cancel()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if outcomes[transport.OutcomeSucceeded] == 0 || outcomes[transport.OutcomeDown] == 0 || outcomes[transport.OutcomeFailed] == 0 {
		t.Errorf("outcomes = %v, want successes, downs and failures", outcomes)
	}
}

func TestCloseReleasesSlowRequests(t *testing.T) {
	d, err := transporttest.New()
	if err != nil {
		t.Fatal(err)
	}
	if err := d.SetMode(transporttest.ModeSlow); err != nil {
		t.Fatal(err)
	}
	e := newExecutor(t)
	done := make(chan error, 1)
	go func() {
		r := rawCallback(d, "held")
		r.Timeout = time.Minute
		_, err := e.Execute(context.Background(), r)
		done <- err
	}()
	testwait.For(t, 10*time.Second, "the condition", func() bool { return d.InFlight() == 1 })
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal("second Close:", err)
	}
	if err := <-done; !breakerpool.IsDestinationDown(err) {
		t.Fatalf("held request: %v, want down", err)
	}
	if err := d.SetMode(transporttest.ModeUp); err == nil {
		t.Error("SetMode after Close succeeded")
	}
	if err := d.SetMode(transporttest.Mode(42)); err == nil {
		t.Error("unknown mode accepted")
	}
}

// clientFrom is an HTTP client whose connections leave from source ip, its
// idle connections closed at the end of the test.
func clientFrom(t *testing.T, ip string) *http.Client {
	t.Helper()
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	tr := &http.Transport{DialContext: dialer.DialContext}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// get GETs the destination's health URL; it returns the status or the error.
func get(c *http.Client, d *transporttest.Destination) (int, error) {
	resp, err := c.Get(d.HealthURL())
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}

// RefuseFrom resets the connections of one source IP — new ones as they
// are accepted, pooled ones at once — with no call recorded, while other
// sources are served; RefuseFrom("") serves everyone again.
func TestRefuseFrom(t *testing.T) {
	if ln, err := net.Listen("tcp", "127.0.0.2:0"); err != nil {
		t.Skipf("cannot bind 127.0.0.2 on this host: %v", err)
	} else {
		_ = ln.Close()
	}
	d := transporttest.NewDestination(t)
	from1, from2 := clientFrom(t, "127.0.0.1"), clientFrom(t, "127.0.0.2")

	// A keep-alive connection from 127.0.0.2, pooled in from2.
	if st, err := get(from2, d); err != nil || st != http.StatusOK {
		t.Fatalf("from 127.0.0.2 before RefuseFrom: %d, %v", st, err)
	}
	d.RefuseFrom("127.0.0.2")
	before := d.Count("")
	for i := range 5 { // the pooled connection, then new ones
		_, err := get(from2, d)
		if err == nil {
			t.Fatalf("request %d from 127.0.0.2 succeeded; want a connection error", i)
		}
		if c := transport.ConnClass(err); c != transport.ConnReset {
			t.Errorf("request %d from 127.0.0.2: %v (class %q); want a reset", i, err, c)
		}
	}
	if n, calls := d.Count("")-before, len(d.Calls()); n != 0 || calls != 1 {
		t.Errorf("refused requests recorded: %d counted, %d calls kept; want 0 and the one before", n, calls)
	}
	if n := d.RefusedConns(); n < 5 {
		t.Errorf("RefusedConns = %d; want at least 5", n)
	}
	if st, err := get(from1, d); err != nil || st != http.StatusOK {
		t.Fatalf("from 127.0.0.1 while 127.0.0.2 is refused: %d, %v", st, err)
	}

	// Through executors: the refused source's call is a destination
	// failure (down), the other source's succeeds.
	exec := func(src string) (transport.Result, error) {
		e, err := transport.New(transport.Options{LocalAddr: src})
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = e.Close() }()
		return e.Execute(context.Background(), rawCallback(d, "via-"+src))
	}
	if res, err := exec("127.0.0.2"); !breakerpool.IsDestinationDown(err) || res.Outcome != transport.OutcomeDown {
		t.Errorf("executor from 127.0.0.2: %+v, %v; want down", res, err)
	}
	if res, err := exec("127.0.0.1"); err != nil || res.Outcome != transport.OutcomeSucceeded {
		t.Errorf("executor from 127.0.0.1: %+v, %v; want succeeded", res, err)
	}
	if n := len(d.CallsWithRequestID("via-127.0.0.2")); n != 0 {
		t.Errorf("the refused executor's call was recorded %d times", n)
	}

	// The refusal survives the listener being reopened.
	if err := d.SetMode(transporttest.ModeRefuse); err != nil {
		t.Fatal(err)
	}
	if err := d.SetMode(transporttest.ModeUp); err != nil {
		t.Fatal(err)
	}
	if _, err := get(from2, d); err == nil {
		t.Error("from 127.0.0.2 after reopening: succeeded; want refused")
	}

	d.RefuseFrom("")
	if st, err := get(from2, d); err != nil || st != http.StatusOK {
		t.Fatalf("from 127.0.0.2 after RefuseFrom(\"\"): %d, %v", st, err)
	}
	if n := d.Count(transporttest.KindHealth); n != 3 {
		t.Errorf("Count(health) = %d; want 3 (before, from 127.0.0.1, after clearing)", n)
	}
}

func TestRefuseFromPanicsOnANonIP(t *testing.T) {
	d := transporttest.NewDestination(t)
	defer func() {
		if recover() == nil {
			t.Error("RefuseFrom(\"127.0.0.2:80\") did not panic")
		}
	}()
	d.RefuseFrom("127.0.0.2:80")
}
