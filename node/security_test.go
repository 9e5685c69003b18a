package node

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"fusebox/api"
	"fusebox/breakerpool"
	"fusebox/dynconfig"
	"fusebox/internal/testwait"
	"fusebox/raftstore/state"
	"fusebox/transport"
	"fusebox/transport/transporttest"
)

// logBuffer collects every log record of a node, for asserting what logs
// never contain.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// secureNode starts a one-node cluster on loopback whose logs (debug level
// included) go to the returned buffer.
func secureNode(t *testing.T) (*testNode, *logBuffer) {
	t.Helper()
	logs := &logBuffer{}
	cfg := testConfig(t, "s1", 1, nil)
	n, err := New(cfg, slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(ctxT(t)); err != nil {
		_ = n.Close(context.Background())
		t.Fatal(err)
	}
	tn := &testNode{t: t, cfg: cfg, Node: n}
	t.Cleanup(tn.stop)
	c := &testCluster{t: t, nodes: []*testNode{tn}}
	c.waitReady(30 * time.Second)
	testwait.For(t, 30*time.Second, "shards placed", func() bool { return shardsSettled(t, []*Node{n}) })
	return tn, logs
}

// getRaw GETs path on the node and returns the body.
func getRaw(t *testing.T, n *testNode, path string) string {
	t.Helper()
	resp, err := http.Get("http://" + n.HTTPAddr() + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	return string(b)
}

func configSet(t *testing.T, n *testNode, key, namespace, value string) {
	t.Helper()
	res, err := n.client().ConfigSet(ctxT(t), key, api.ConfigWrite{Namespace: namespace, Value: json.RawMessage(value)})
	if err != nil {
		t.Fatalf("config %s=%s: %v", key, value, err)
	}
	if err := n.store.WaitForApplied(ctxT(t), res.Index); err != nil {
		t.Fatal(err)
	}
	want, err := dynconfig.Canonical(dynconfig.Entry{Key: key, Namespace: namespace, Value: json.RawMessage(value)})
	if err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 5*time.Second, key+" live", func() bool {
		raw, _, _ := n.config.Current().Lookup(key, namespace, "")
		return bytes.Equal(raw, want)
	})
}

// wantField asserts err is the API's 400 naming field.
func wantField(t *testing.T, err error, field string) {
	t.Helper()
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || ae.Field != field {
		t.Fatalf("error = %v; want a 400 naming %q", err, field)
	}
}

func waitTask(t *testing.T, n *testNode, id, what string, cond func(api.Task) bool) api.Task {
	t.Helper()
	var tk api.Task
	testwait.For(t, 30*time.Second, "task "+id+" "+what, func() bool {
		var err error
		tk, err = n.client().Task(ctxT(t), id)
		return err == nil && cond(tk)
	})
	return tk
}

// Secrets submitted with a task are sent to the destination and never shown
// back: not by task get, list or DLQ, not in breaker views, forced
// breakers, the status page's data, metric labels or logs.
func TestSecretsNeverShownBack(t *testing.T) {
	n, logs := secureNode(t)
	dest := transporttest.NewDestination(t)
	configSet(t, n, dynconfig.KeyRedactHeaderNames, "", `["X-Tenant-Id"]`)
	secrets := []string{"tok-AAA", "key-BBB", "tenant-CCC", "s3cr3t-sig"}
	cbURL := dest.CallbackURL() + "?sig=s3cr3t-sig"
	host := "http://" + dest.Addr()

	ts := callbackTask(cbURL, "wf-secret", "secret-1")
	ts.Request.Header = map[string]string{"Authorization": "Bearer tok-AAA", "X-Api-Key": "key-BBB", "X-Tenant-Id": "tenant-CCC", "X-Plain": "plain-DDD"}
	acc, err := n.client().SubmitTask(ctxT(t), ts)
	if err != nil {
		t.Fatal(err)
	}
	waitTask(t, n, acc.TaskID, "succeeded", func(tk api.Task) bool { return tk.Status == state.TaskSucceeded })
	calls := dest.CallsWithRequestID(acc.TaskID)
	if len(calls) == 0 || calls[0].Header.Get("Authorization") != "Bearer tok-AAA" || calls[0].Header.Get("X-Tenant-Id") != "tenant-CCC" {
		t.Fatalf("the destination did not receive the real header values: %+v", calls)
	}

	// Task get: header values redacted, names and other values kept.
	tk, err := n.client().Task(ctxT(t), acc.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	var req transport.Request
	if err := json.Unmarshal(tk.Request, &req); err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"Authorization", "X-Api-Key", "X-Tenant-Id"} {
		if req.Header[h] != transport.Redacted {
			t.Errorf("GET task: header %s = %q, want %q", h, req.Header[h], transport.Redacted)
		}
	}
	if req.Header["X-Plain"] != "plain-DDD" || tk.Destination != dest.CallbackURL()+"?"+transport.Redacted || req.URL != tk.Destination {
		t.Errorf("GET task: destination %q url %q headers %v", tk.Destination, req.URL, req.Header)
	}

	// A breaker forced through the full URL forces its host's key, and
	// shows no query; the status page's timeline records it.
	if _, err := n.client().ForceBreaker(ctxT(t), api.BreakerForce{TaskGroup: breakerpool.TaskGroupCallback,
		Namespace: deliveryNS, Destination: cbURL, Mode: "open", Duration: "1m"}); err != nil {
		t.Fatal(err)
	}
	fb, err := n.client().ForcedBreakers(ctxT(t))
	if err != nil || len(fb) != 1 || fb[0].Destination != host {
		t.Fatalf("forced breakers = %+v, %v; want one for %s", fb, err, host)
	}
	testwait.For(t, 10*time.Second, "the forced open on the status page's timeline", func() bool {
		return strings.Contains(getRaw(t, n, "/ui/api/transitions?scope=cluster"), `"destination":"`+host+`"`)
	})

	reads := map[string]string{
		"task get":          getRaw(t, n, "/v1/tasks/"+acc.TaskID),
		"task list":         getRaw(t, n, "/v1/tasks"),
		"breakers":          getRaw(t, n, "/v1/breakers?scope=cluster"),
		"forced breakers":   getRaw(t, n, "/v1/breakers/forced"),
		"status page data":  getRaw(t, n, "/ui/api/transitions?scope=cluster"),
		"metrics":           getRaw(t, n, "/metrics"),
		"logs (debug too)":  logs.String(),
		"status page (raw)": getRaw(t, n, "/ui/"),
	}
	for what, body := range reads {
		for _, s := range secrets {
			if strings.Contains(body, s) {
				t.Errorf("%s shows %q", what, s)
			}
		}
	}
	// The reads that must name the destination do, in its redacted form.
	if !strings.Contains(reads["metrics"], `destination="`+host+`"`) {
		t.Errorf("metrics have no series for the callback's host %s", host)
	}
	if !strings.Contains(reads["task list"], `/callback?\u003credacted\u003e`) && !strings.Contains(reads["task list"], "/callback?<redacted>") {
		t.Errorf("task list does not show the redacted destination: %.300s", reads["task list"])
	}
	if !strings.Contains(reads["logs (debug too)"], `"msg":"outbound attempt"`) || !strings.Contains(reads["logs (debug too)"], `"destination":"`+host+`"`) {
		t.Errorf("no outbound attempt log naming %s: the log assertions above would prove nothing", host)
	}
	if _, err := n.client().ForceBreaker(ctxT(t), api.BreakerForce{TaskGroup: breakerpool.TaskGroupCallback,
		Namespace: deliveryNS, Destination: host, Mode: "auto"}); err != nil {
		t.Fatal(err)
	}
}

// K callback URLs with distinct paths on one dead host share one breaker
// (and one series per metric), as Temporal keys callbacks by scheme://host.
func TestCallbackPathsShareOneBreaker(t *testing.T) {
	n, _ := secureNode(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + l.Addr().String()
	_ = l.Close()
	const k = 12
	for i := range k {
		url := dead + "/cb/" + string(rune('a'+i)) + "?sig=per-task-" + string(rune('a'+i))
		if _, err := n.client().SubmitTask(ctxT(t), callbackTask(url, "wf-dead-"+string(rune('a'+i)), "dead-"+string(rune('a'+i)))); err != nil {
			t.Fatal(err)
		}
	}
	key := breakerpool.Key{TaskGroup: breakerpool.TaskGroupCallback, NamespaceID: deliveryNS, Destination: dead}
	testwait.For(t, 20*time.Second, "the host's breaker open", func() bool {
		b, ok := n.pool.Lookup(key)
		return ok && b.Status().State == 2
	})
	keys := 0
	for _, st := range n.pool.List() {
		if strings.HasPrefix(st.Key.Destination, dead) {
			keys++
			if st.Key.Destination != dead {
				t.Errorf("breaker key %q is not the host", st.Key.Destination)
			}
		}
	}
	if keys != 1 {
		t.Fatalf("%d breakers for one dead host called through %d paths; want 1", keys, k)
	}
	series, failures := 0, 0.0
	for _, line := range strings.Split(getRaw(t, n, "/metrics"), "\n") {
		if !strings.Contains(line, `destination="`+dead) {
			continue
		}
		if strings.HasPrefix(line, "fusebox_breaker_state{") {
			series++
		}
		if strings.HasPrefix(line, "fusebox_breaker_requests_total{") && strings.Contains(line, `outcome="failure"`) {
			f := strings.Fields(line)
			failures, _ = strconv.ParseFloat(f[len(f)-1], 64)
		}
	}
	// One breaker: at most one failure per task before it opened (they may
	// all be in flight together), where a breaker per path would take six
	// failures from each.
	t.Logf("%d paths on one dead host: 1 breaker, %v failures before it opened", k, failures)
	if failures < 1 || failures > k {
		t.Errorf("the dead host cost %v failures through %d paths; want 1..%d", failures, k, k)
	}
	if series != 1 {
		t.Fatalf("fusebox_breaker_state has %d series for the dead host; want 1", series)
	}
}

// A forced breaker stored with a full callback URL (before callback keys
// were scheme://host) applies to its host's breaker, is listed as the host
// (no query), and "auto" on the host clears it. The config history never
// shows the URL's query, neither in a row's destination nor in its value
// (the forced row as JSON): not for the legacy write, nor for the clear,
// which has to name the full URL to delete the row.
func TestLegacyForcedBreakerAppliesToHost(t *testing.T) {
	n, _ := secureNode(t)
	host := "http://127.0.0.1:9"
	if _, _, err := n.store.ForceBreaker(ctxT(t), state.ForceBreakerCommand{TaskGroup: breakerpool.TaskGroupCallback,
		NamespaceID: deliveryNS, Destination: host + "/cb/7?sig=SECRET123", Mode: state.ForceOpen}); err != nil {
		t.Fatal(err)
	}
	key := breakerpool.Key{TaskGroup: breakerpool.TaskGroupCallback, NamespaceID: deliveryNS, Destination: host}
	testwait.For(t, 10*time.Second, "the host's breaker forced open", func() bool {
		b, ok := n.pool.Lookup(key)
		return ok && b.Status().Mode == breakerpool.ModeForcedOpen
	})
	fb, err := n.client().ForcedBreakers(ctxT(t))
	if err != nil || len(fb) != 1 || fb[0].Destination != host {
		t.Fatalf("forced = %+v, %v; want the legacy row listed as %s", fb, err, host)
	}
	if _, err := n.client().ForceBreaker(ctxT(t), api.BreakerForce{TaskGroup: breakerpool.TaskGroupCallback,
		Namespace: deliveryNS, Destination: host, Mode: "auto"}); err != nil {
		t.Fatal(err)
	}
	if fb, err := n.client().ForcedBreakers(ctxT(t)); err != nil || len(fb) != 0 {
		t.Fatalf("forced after auto = %+v, %v; want none", fb, err)
	}
	body := getRaw(t, n, "/v1/config/_history?limit=100")
	if strings.Contains(body, "SECRET123") || strings.Contains(body, "sig=") {
		t.Errorf("the config history shows the legacy URL's query: %s", body)
	}
	hist, err := n.client().ConfigHistory(ctxT(t), 100)
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	for _, h := range hist {
		if h.Key != state.ForceBreakerHistoryKey {
			continue
		}
		var v state.ForcedBreaker
		if err := json.Unmarshal(h.Value, &v); err != nil {
			t.Fatalf("history value %s: %v", h.Value, err)
		}
		rows = append(rows, h.Op+" "+h.Destination+" "+v.Destination)
	}
	legacy := host + "/cb/7?" + transport.Redacted
	want := []string{"delete " + host + " " + host, "delete " + legacy + " " + legacy, "set " + legacy + " " + legacy}
	if !slices.Equal(rows, want) {
		t.Errorf("forced-breaker history (op, destination, value's destination) %q; want %q", rows, want)
	}
	testwait.For(t, 10*time.Second, "the host's breaker back to auto", func() bool {
		b, ok := n.pool.Lookup(key)
		return ok && b.Status().Mode == breakerpool.ModeAuto
	})
}

// A config value constrained to a full callback URL (written before callback
// keys were scheme://host) applies to its host; one written for the host
// itself wins over it.
func TestLegacyConfigDestinationAppliesToHost(t *testing.T) {
	key := dynconfig.KeyGroupLimiterConcurrency
	c := dynconfig.NewCollection(nil)
	defer c.Close()
	c.Update(configEntries([]state.ConfigEntry{
		{Key: key, Destination: "http://h:1", Value: json.RawMessage(`7`)},
		{Key: key, Destination: "http://H:1/cb?sig=x", Value: json.RawMessage(`3`)},
		{Key: key, Destination: "https://other/cb", Value: json.RawMessage(`5`)},
	}))
	s := c.Current()
	if err := s.Invalid(); err == nil || !strings.Contains(err.Error(), "more than once") {
		t.Errorf("the shadowed legacy value is not reported: %v", err)
	}
	if got := s.Concurrency("", "http://h:1"); got != 7 {
		t.Errorf("host value = %d, want the host's own 7", got)
	}
	if got := s.Concurrency("", "https://other"); got != 5 {
		t.Errorf("legacy value for https://other = %d, want 5", got)
	}
}

// TestConfigDestinationIsTheHost: a config value constrained to a full
// callback URL is stored under its breaker key, scheme://host, so no path
// or query (where a signature may sit) reaches the config table, its
// history or a listing; deleting through the same URL finds it.
func TestConfigDestinationIsTheHost(t *testing.T) {
	n, _ := secureNode(t)
	full := "HTTPS://Hooks.Example.com:8443/cb/42?sig=s3cr3t-sig"
	res, err := n.client().ConfigSet(ctxT(t), dynconfig.KeyHostSchedulerMaxTaskRPS, api.ConfigWrite{Destination: full, Value: json.RawMessage(`7`)})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.store.WaitForApplied(ctxT(t), res.Index); err != nil {
		t.Fatal(err)
	}
	es, err := n.client().ConfigGet(ctxT(t), dynconfig.KeyHostSchedulerMaxTaskRPS)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 1 || es[0].Destination != "https://hooks.example.com:8443" {
		t.Fatalf("config entries %+v, want one for https://hooks.example.com:8443", es)
	}
	hist, err := n.client().ConfigHistory(ctxT(t), 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hist {
		if strings.Contains(h.Destination, "s3cr3t") || strings.Contains(h.Destination, "/cb/42") {
			t.Fatalf("history shows %q", h.Destination)
		}
	}
	if _, err := n.client().ConfigDelete(ctxT(t), dynconfig.KeyHostSchedulerMaxTaskRPS, "", full); err != nil {
		t.Fatalf("delete through the full URL: %v", err)
	}
	if es, _ := n.client().ConfigGet(ctxT(t), dynconfig.KeyHostSchedulerMaxTaskRPS); len(es) != 0 {
		t.Fatalf("after delete: %+v", es)
	}
}
