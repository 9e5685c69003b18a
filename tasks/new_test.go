package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"fusebox/breakerpool"
	"fusebox/errcode"
	"fusebox/raftstore/state"
	"fusebox/shardmap"
	"fusebox/transport"
)

// env is an Env over an in-memory endpoint registry and a real
// transport.Policy. late holds endpoints this replica only sees after Sync
// (a lagging replica).
type env struct {
	endpoints, late map[string]string
	syncErr         error
	synced          int
	policy          *transport.Policy
	shards          int
	perDest, total  int
	limitsFor       [2]string // the namespace and destination SubmitLimits was asked for
}

func newEnv() *env {
	return &env{
		endpoints: map[string]string{"orders": "http://orders.example:8080/nexus"},
		policy:    &transport.Policy{DefaultAllow: true},
		shards:    16, perDest: 1000, total: 50000,
	}
}

func (e *env) Endpoint(name string) (state.Endpoint, bool) {
	u, ok := e.endpoints[name]
	return state.Endpoint{Name: name, URL: u}, ok
}

func (e *env) Sync(context.Context) error {
	e.synced++
	if e.syncErr != nil {
		return e.syncErr
	}
	for k, v := range e.late {
		e.endpoints[k] = v
	}
	return nil
}

func (e *env) CheckDestination(ctx context.Context, ns, raw string, allowlist bool) error {
	if !allowlist {
		return e.policy.CheckMembers(ctx, raw)
	}
	return e.policy.Check(ctx, ns, raw)
}

func (e *env) ShardCount() int { return e.shards }

func (e *env) SubmitLimits(ns, dest string) (int, int) {
	e.limitsFor = [2]string{ns, dest}
	return e.perDest, e.total
}

// timeoutEnv resolves schedule-to-close as dynamic config would: the
// request, or a default of one hour.
type timeoutEnv struct{ *env }

func (timeoutEnv) ScheduleToClose(_, _, _ string, requested time.Duration) time.Duration {
	if requested > 0 {
		return requested
	}
	return time.Hour
}

// matcher is a namespace allowlist: hosts allowed over any scheme.
type matcher []string

func (m matcher) Allows(_, host string) bool {
	for _, h := range m {
		if h == host {
			return true
		}
	}
	return false
}

// localhost resolves without DNS, so the member check runs offline.
const callbackURL = "http://127.0.0.1:9/cb?sig=s3cret"

func callbackSubmit() Submit {
	return Submit{NamespaceID: "ns", WorkflowID: "wf", TaskGroup: breakerpool.TaskGroupCallback, Destination: callbackURL,
		Request: Request{Completion: &transport.Completion{State: transport.CompletionSucceeded}}}
}

func startSubmit() Submit {
	return Submit{NamespaceID: "ns", WorkflowID: "wf", TaskGroup: breakerpool.TaskGroupNexusInvocation, Destination: "orders",
		Request: Request{Service: "svc", Operation: "op", Input: json.RawMessage(`{"a":1}`)}}
}

var at = time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)

func TestNewRefusesEachBadField(t *testing.T) {
	long := strings.Repeat("x", MaxIDBytes+1)
	for _, c := range []struct {
		name  string
		in    func() Submit
		env   func(*env)
		code  string
		field string
	}{
		{"namespace missing", func() Submit { s := callbackSubmit(); s.NamespaceID = " "; return s }, nil, errcode.InvalidArgument, "namespace_id"},
		{"namespace too long", func() Submit { s := callbackSubmit(); s.NamespaceID = long; return s }, nil, errcode.InvalidArgument, "namespace_id"},
		{"workflow missing", func() Submit { s := callbackSubmit(); s.WorkflowID = ""; return s }, nil, errcode.InvalidArgument, "workflow_id"},
		{"workflow control character", func() Submit { s := callbackSubmit(); s.WorkflowID = "wf\n"; return s }, nil, errcode.InvalidArgument, "workflow_id"},
		{"destination missing", func() Submit { s := callbackSubmit(); s.Destination = ""; return s }, nil, errcode.InvalidArgument, "destination"},
		{"destination too long", func() Submit {
			s := callbackSubmit()
			s.Destination = "http://h/" + strings.Repeat("p", MaxDestinationBytes)
			return s
		}, nil, errcode.InvalidArgument, "destination"},
		{"request id too long", func() Submit { s := callbackSubmit(); s.RequestID = long; return s }, nil, errcode.InvalidArgument, "request_id"},
		{"task group missing", func() Submit { s := callbackSubmit(); s.TaskGroup = ""; return s }, nil, errcode.InvalidArgument, "task_group"},
		{"task group unknown", func() Submit { s := callbackSubmit(); s.TaskGroup = "timers"; return s }, nil, errcode.InvalidArgument, "task_group"},
		{"endpoint unknown", func() Submit { s := startSubmit(); s.Destination = "nope"; return s }, nil, errcode.InvalidArgument, "destination"},
		{"endpoint check needs the leader", func() Submit { s := startSubmit(); s.Destination = "nope"; return s },
			func(e *env) { e.syncErr = errors.New("no leader") }, errcode.Unavailable, ""},
		{"callback URL scheme", func() Submit { s := callbackSubmit(); s.Destination = "ftp://127.0.0.1/cb"; return s }, nil, errcode.InvalidArgument, "destination"},
		{"callback URL credentials", func() Submit { s := callbackSubmit(); s.Destination = "http://u:p@127.0.0.1/cb"; return s }, nil, errcode.InvalidArgument, "destination"},
		{"callback without a completion", func() Submit { s := callbackSubmit(); s.Request.Completion = nil; return s }, nil, errcode.InvalidArgument, "request.completion"},
		{"completion state", func() Submit { s := callbackSubmit(); s.Request.Completion.State = "done"; return s }, nil, errcode.InvalidArgument, "request.completion.state"},
		{"reserved header", func() Submit { s := callbackSubmit(); s.Request.Header = map[string]string{"Host": "x"}; return s }, nil, errcode.InvalidArgument, "request.header[Host]"},
		{"start without a service", func() Submit { s := startSubmit(); s.Request.Service = ""; return s }, nil, errcode.InvalidArgument, "request.service"},
		{"start input not JSON", func() Submit { s := startSubmit(); s.Request.Input = json.RawMessage(`{`); return s }, nil, errcode.InvalidArgument, "request.input"},
		{"nexus request id too long", func() Submit {
			s := startSubmit()
			s.Request.NexusRequestID = strings.Repeat("r", transport.MaxNameBytes+1)
			return s
		}, nil, errcode.InvalidArgument, "request.nexus_request_id"},
		{"callback URL of a start", func() Submit { s := startSubmit(); s.Request.CallbackURL = "ftp://x"; return s }, nil, errcode.InvalidArgument, "request.callback_url"},
		{"timeout not a duration", func() Submit { s := callbackSubmit(); s.ScheduleToCloseTimeout = "soon"; return s }, nil, errcode.InvalidArgument, "schedule_to_close_timeout"},
		{"timeout negative", func() Submit { s := callbackSubmit(); s.ScheduleToCloseTimeout = "-5s"; return s }, nil, errcode.InvalidArgument, "schedule_to_close_timeout"},
		{"timeout too long", func() Submit { s := callbackSubmit(); s.ScheduleToCloseTimeout = "100000d"; return s }, nil, errcode.InvalidArgument, "schedule_to_close_timeout"},
		{"callback not in the allowlist", callbackSubmit, func(e *env) {
			e.policy = &transport.Policy{Allowlist: func(string) (transport.AddressMatcher, bool) { return matcher{"hooks.example"}, true }}
		}, errcode.InvalidArgument, "destination"},
		{"callback to a member", callbackSubmit, func(e *env) {
			e.policy = &transport.Policy{DefaultAllow: true, Members: members{"127.0.0.1:9"}}
		}, errcode.InvalidArgument, "destination"},
		{"request over the per-task limit", func() Submit {
			s := callbackSubmit()
			s.Request.Completion, s.Request.Body = nil, make([]byte, state.MaxTaskRequestBytes)
			return s
		}, nil, errcode.TooLarge, "request"},
		{"no shard count yet", callbackSubmit, func(e *env) { e.shards = 0 }, errcode.Unavailable, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv()
			if c.env != nil {
				c.env(e)
			}
			in := c.in()
			_, err := New(t.Context(), e, &in, at)
			var te *Error
			if !errors.As(err, &te) {
				t.Fatalf("err = %v (%T), want a *tasks.Error", err, err)
			}
			if te.Code != c.code || te.Field != c.field {
				t.Fatalf("code %q field %q (%v), want code %q field %q", te.Code, te.Field, te, c.code, c.field)
			}
			if te.Retryable() != errcode.Retryable(c.code) {
				t.Fatalf("Retryable() = %v for %s", te.Retryable(), c.code)
			}
		})
	}
}

// members is the cluster's member addresses for the policy.
type members []string

func (m members) MemberAddrs() []string { return m }

func TestNewBuildsCallbackTask(t *testing.T) {
	e := newEnv()
	in := callbackSubmit()
	in.RequestID, in.ScheduleToCloseTimeout = "req-1", "90s"
	nt, err := New(t.Context(), timeoutEnv{e}, &in, at)
	if err != nil {
		t.Fatal(err)
	}
	if !ValidID(nt.ID) || nt.ID[:16] != state.NewTaskID(at)[:16] {
		t.Fatalf("id %q: want NewTaskID's form, its first half the submit time", nt.ID)
	}
	if want := shardmap.ShardOf("ns", "wf", 16); nt.Shard != want {
		t.Fatalf("shard %d, want %d", nt.Shard, want)
	}
	if nt.Destination != callbackURL || nt.DestinationKey != "http://127.0.0.1:9" || nt.RequestID != "req-1" {
		t.Fatalf("destination %q key %q request id %q", nt.Destination, nt.DestinationKey, nt.RequestID)
	}
	if e.limitsFor != [2]string{"ns", "http://127.0.0.1:9"} || nt.MaxDestinationBacklog != 1000 || nt.MaxPendingTasks != 50000 {
		t.Fatalf("limits asked for %v, got %d/%d", e.limitsFor, nt.MaxDestinationBacklog, nt.MaxPendingTasks)
	}
	if !nt.Deadline.Equal(at.Add(90 * time.Second)) {
		t.Fatalf("deadline %v, want at+90s", nt.Deadline)
	}
	var req transport.Request
	if err := json.Unmarshal(nt.Request, &req); err != nil {
		t.Fatal(err)
	}
	if req.URL != callbackURL || req.TaskGroup != breakerpool.TaskGroupCallback || req.Completion == nil || req.Completion.State != transport.CompletionSucceeded {
		t.Fatalf("stored request %+v", req)
	}
	if err := req.Validate(); err != nil { // a callback needs no request id: the stored request is ready to send
		t.Fatalf("stored request does not validate: %v", err)
	}
}

func TestNewBuildsStartTask(t *testing.T) {
	e := newEnv()
	e.late = map[string]string{"late": "http://late.example/nexus"}
	in := startSubmit()
	in.Destination = "late" // registered, but this replica lags: New reads through the leader once
	nt, err := New(t.Context(), e, &in, at)
	if err != nil {
		t.Fatal(err)
	}
	if e.synced != 1 {
		t.Fatalf("synced %d times, want once", e.synced)
	}
	var req transport.Request
	if err := json.Unmarshal(nt.Request, &req); err != nil {
		t.Fatal(err)
	}
	// The endpoint's URL is resolved at every delivery, not stored.
	if req.URL != "" || req.Service != "svc" || string(req.Input) != `{"a":1}` || nt.DestinationKey != "" || !nt.Deadline.IsZero() {
		t.Fatalf("stored request %+v, key %q, deadline %v", req, nt.DestinationKey, nt.Deadline)
	}
	if _, err := New(t.Context(), e, &in, at); err != nil || e.synced != 1 {
		t.Fatalf("a known endpoint: err %v, synced %d (want no second sync)", err, e.synced)
	}
}

func TestRequestOfRoundTrips(t *testing.T) {
	in := Request{Service: "s", Operation: "o", Input: json.RawMessage(`1`), OperationID: "op", NexusRequestID: "n",
		CallbackURL: "http://c", CallbackHeader: map[string]string{"a": "b"}, Completion: &transport.Completion{State: "failed"},
		Body: []byte("x"), ContentType: "text/plain", Header: map[string]string{"k": "v"}}
	out := RequestOf(in.outbound(breakerpool.TaskGroupCallback))
	a, _ := json.Marshal(in)
	b, _ := json.Marshal(out)
	if string(a) != string(b) {
		t.Fatalf("RequestOf(outbound(r)) = %s, want %s", b, a)
	}
}

func TestValidID(t *testing.T) {
	if !ValidID(state.NewTaskID(at)) {
		t.Fatal("a new task id is not valid")
	}
	for _, id := range []string{"", "abc", strings.Repeat("A", 32), strings.Repeat("g", 32), strings.Repeat("0", 33)} {
		if ValidID(id) {
			t.Errorf("ValidID(%q) = true", id)
		}
	}
}
