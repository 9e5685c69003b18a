package transport_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nexus-rpc/sdk-go/nexus"

	"fusebox/breakerpool"
	"fusebox/transport"
)

// seen records what a real sdk handler received.
type seen struct {
	mu          sync.Mutex
	requestID   string
	callbackURL string
	callbackHdr string
	auth        string
	canceled    []string
	// of the last request
	contentLength int64
	chunked       bool
	contentType   string
}

// asyncOp is an async operation whose token is "tok-" + the request id.
type asyncOp struct {
	nexus.UnimplementedOperation[json.RawMessage, json.RawMessage]
	s *seen
}

func (*asyncOp) Name() string { return "async" }

func (o *asyncOp) Start(ctx context.Context, _ json.RawMessage, opts nexus.StartOperationOptions) (nexus.HandlerStartOperationResult[json.RawMessage], error) {
	o.s.mu.Lock()
	defer o.s.mu.Unlock()
	o.s.requestID = opts.RequestID
	o.s.callbackURL = opts.CallbackURL
	o.s.callbackHdr = opts.CallbackHeader.Get("token")
	return &nexus.HandlerStartOperationResultAsync{OperationToken: "tok-" + opts.RequestID}, nil
}

func (o *asyncOp) Cancel(ctx context.Context, token string, _ nexus.CancelOperationOptions) error {
	if token == "unknown" {
		return nexus.HandlerErrorf(nexus.HandlerErrorTypeNotFound, "no operation %s", token)
	}
	o.s.mu.Lock()
	defer o.s.mu.Unlock()
	o.s.canceled = append(o.s.canceled, token)
	return nil
}

// newNexusServer hosts service "svc" with a sync "echo", an async "async",
// and sync operations that fail in each way the sdk can express.
func newNexusServer(t *testing.T) (string, *seen) {
	t.Helper()
	s := &seen{}
	svc := nexus.NewService("svc")
	svc.MustRegister(
		nexus.NewSyncOperation("echo", func(ctx context.Context, in json.RawMessage, opts nexus.StartOperationOptions) (json.RawMessage, error) {
			s.mu.Lock()
			s.requestID = opts.RequestID
			s.auth = opts.Header.Get("authorization")
			s.mu.Unlock()
			return in, nil
		}),
		&asyncOp{s: s},
		nexus.NewSyncOperation("opfail", func(context.Context, json.RawMessage, nexus.StartOperationOptions) (json.RawMessage, error) {
			return nil, nexus.NewOperationFailedError("payment declined")
		}),
		nexus.NewSyncOperation("badinput", func(context.Context, json.RawMessage, nexus.StartOperationOptions) (json.RawMessage, error) {
			return nil, nexus.HandlerErrorf(nexus.HandlerErrorTypeBadRequest, "field amount missing")
		}),
		nexus.NewSyncOperation("unavailable", func(context.Context, json.RawMessage, nexus.StartOperationOptions) (json.RawMessage, error) {
			return nil, nexus.HandlerErrorf(nexus.HandlerErrorTypeUnavailable, "maintenance")
		}),
		nexus.NewSyncOperation("internal-final", func(context.Context, json.RawMessage, nexus.StartOperationOptions) (json.RawMessage, error) {
			return nil, &nexus.HandlerError{Type: nexus.HandlerErrorTypeInternal, Cause: errors.New("corrupt"),
				RetryBehavior: nexus.HandlerErrorRetryBehaviorNonRetryable}
		}),
		nexus.NewSyncOperation("notfound-retry", func(context.Context, json.RawMessage, nexus.StartOperationOptions) (json.RawMessage, error) {
			return nil, &nexus.HandlerError{Type: nexus.HandlerErrorTypeNotFound, Cause: errors.New("not yet"),
				RetryBehavior: nexus.HandlerErrorRetryBehaviorRetryable}
		}),
	)
	reg := nexus.NewServiceRegistry()
	if err := reg.Register(svc); err != nil {
		t.Fatal(err)
	}
	h, err := reg.NewHandler()
	if err != nil {
		t.Fatal(err)
	}
	// Mount under a prefix: the endpoint URL is a base URL, not a host.
	mux := http.NewServeMux()
	nh := http.StripPrefix("/nexus", nexus.NewHTTPHandler(nexus.HandlerOptions{Handler: h, Logger: quietLogger}))
	mux.Handle("/nexus/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.contentLength, s.chunked = r.ContentLength, len(r.TransferEncoding) > 0
		s.contentType = r.Header.Get("Content-Type")
		s.mu.Unlock()
		nh.ServeHTTP(w, r)
	}))
	srv := newServer(t, mux)
	return srv.URL + "/nexus", s
}

var quietLogger = slog.New(slog.DiscardHandler)

func startReq(base, op string) transport.Request {
	return transport.Request{
		TaskGroup: breakerpool.TaskGroupNexusInvocation, URL: base,
		Service: "svc", Operation: op, RequestID: "req-" + op, Input: json.RawMessage(`{"amount":42,"note":"hi"}`),
	}
}

func TestNexusSyncStart(t *testing.T) {
	base, s := newNexusServer(t)
	e := newExecutor(t, transport.Options{})
	r := startReq(base, "echo")
	r.Header = map[string]string{"Authorization": "Bearer xyz"}
	res, err := execute(t, e, r)
	if err != nil || res.Outcome != transport.OutcomeSucceeded || res.Status != 200 {
		t.Fatalf("got %+v, %v", res, err)
	}
	if string(res.Output) != string(r.Input) || res.OutputContentType != "application/json" {
		t.Errorf("Output = %s (%s), want %s", res.Output, res.OutputContentType, r.Input)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.requestID != "req-echo" || s.auth != "Bearer xyz" {
		t.Errorf("handler saw request id %q auth %q", s.requestID, s.auth)
	}
	// Sized, not chunked, and JSON (not the sdk's octet-stream for []byte).
	if s.contentLength != int64(len(r.Input)) || s.chunked || s.contentType != "application/json" {
		t.Errorf("start request: Content-Length %d chunked %v Content-Type %q", s.contentLength, s.chunked, s.contentType)
	}
}

func TestNexusAsyncStartAndCancel(t *testing.T) {
	base, s := newNexusServer(t)
	e := newExecutor(t, transport.Options{})
	r := startReq(base, "async")
	r.CallbackURL = "http://127.0.0.1:1/callback?task=7"
	r.CallbackHeader = map[string]string{"Token": "cb-secret"}
	res, err := execute(t, e, r)
	if err != nil || res.Outcome != transport.OutcomeStarted || res.OperationID != "tok-req-async" || res.Status != 201 {
		t.Fatalf("got %+v, %v", res, err)
	}
	s.mu.Lock()
	if s.callbackURL != r.CallbackURL || s.callbackHdr != "cb-secret" {
		t.Errorf("handler saw callback %q header %q", s.callbackURL, s.callbackHdr)
	}
	s.mu.Unlock()

	cancel := transport.Request{TaskGroup: breakerpool.TaskGroupNexusCancelation, URL: base,
		Service: "svc", Operation: "async", OperationID: res.OperationID}
	cres, err := execute(t, e, cancel)
	if err != nil || cres.Outcome != transport.OutcomeSucceeded || cres.Status != 202 {
		t.Fatalf("cancel: got %+v, %v", cres, err)
	}
	s.mu.Lock()
	if len(s.canceled) != 1 || s.canceled[0] != "tok-req-async" {
		t.Errorf("handler canceled %v", s.canceled)
	}
	s.mu.Unlock()

	cancel.OperationID = "unknown"
	cres, err = execute(t, e, cancel)
	checkOutcome(t, cres, err, false, 404)
	if !strings.Contains(cres.Message, "no operation unknown") {
		t.Errorf("Message = %q", cres.Message)
	}
}

func TestNexusHandlerErrors(t *testing.T) {
	base, _ := newNexusServer(t)
	e := newExecutor(t, transport.Options{})
	cases := []struct {
		op     string
		down   bool
		status int
		msg    string
	}{
		{"opfail", false, 424, "operation failed: payment declined"},
		{"badinput", false, 400, "field amount missing"},
		{"unavailable", true, 503, "maintenance"},
		{"internal-final", false, 500, "corrupt"}, // retryable header "false"
		{"notfound-retry", true, 404, "not yet"},  // retryable header "true"
		{"no-such-op", false, 404, ""},
	}
	for _, c := range cases {
		t.Run(c.op, func(t *testing.T) {
			res, err := execute(t, e, startReq(base, c.op))
			checkOutcome(t, res, err, c.down, c.status)
			if !strings.Contains(res.Message, c.msg) {
				t.Errorf("Message = %q, want it to contain %q", res.Message, c.msg)
			}
		})
	}
}

// completionSink is a real sdk completion handler recording what it got.
type completionSink struct {
	mu    sync.Mutex
	got   []*nexus.CompletionRequest
	value []json.RawMessage
	fail  error
}

func (s *completionSink) CompleteOperation(ctx context.Context, r *nexus.CompletionRequest) error {
	var v json.RawMessage
	if r.Result != nil {
		if err := r.Result.Consume(&v); err != nil {
			return err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, r)
	s.value = append(s.value, v)
	return s.fail
}

func TestCallbackCompletions(t *testing.T) {
	sink := &completionSink{}
	srv := newServer(t, nexus.NewCompletionHTTPHandler(nexus.CompletionHandlerOptions{Handler: sink, Logger: quietLogger}))
	e := newExecutor(t, transport.Options{})
	start := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	comps := []transport.Completion{
		{State: transport.CompletionSucceeded, Result: json.RawMessage(`{"sum":3}`), OperationToken: "tok-a", StartTime: start},
		{State: transport.CompletionFailed, FailureMessage: "card expired", OperationToken: "tok-b"},
		{State: transport.CompletionCanceled, FailureMessage: "user canceled"},
	}
	for i := range comps {
		res, err := execute(t, e, transport.Request{TaskGroup: breakerpool.TaskGroupCallback, URL: srv.URL, Completion: &comps[i]})
		if err != nil || res.Outcome != transport.OutcomeSucceeded || res.Status != 200 {
			t.Fatalf("completion %d: got %+v, %v", i, res, err)
		}
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if len(sink.got) != 3 {
		t.Fatalf("sink got %d completions", len(sink.got))
	}
	if g := sink.got[0]; g.State != nexus.OperationStateSucceeded || g.OperationToken != "tok-a" || !g.StartTime.Equal(start) ||
		string(sink.value[0]) != `{"sum":3}` {
		t.Errorf("succeeded completion: %+v value %s", g, sink.value[0])
	}
	if g := sink.got[1]; g.State != nexus.OperationStateFailed || g.Error == nil || g.Error.Error() != "card expired" || g.OperationToken != "tok-b" {
		t.Errorf("failed completion: %+v", g)
	}
	if g := sink.got[2]; g.State != nexus.OperationStateCanceled || g.Error == nil || g.Error.Error() != "user canceled" {
		t.Errorf("canceled completion: %+v", g)
	}
}

func TestCallbackCompletionRejected(t *testing.T) {
	for _, c := range []struct {
		err    error
		down   bool
		status int
	}{
		{nexus.HandlerErrorf(nexus.HandlerErrorTypeNotFound, "no such workflow"), false, 404},
		{nexus.HandlerErrorf(nexus.HandlerErrorTypeResourceExhausted, "slow down"), true, 429},
	} {
		sink := &completionSink{fail: c.err}
		srv := newServer(t, nexus.NewCompletionHTTPHandler(nexus.CompletionHandlerOptions{Handler: sink, Logger: quietLogger}))
		e := newExecutor(t, transport.Options{})
		res, err := execute(t, e, transport.Request{TaskGroup: breakerpool.TaskGroupCallback, URL: srv.URL,
			Completion: &transport.Completion{State: transport.CompletionSucceeded}})
		checkOutcome(t, res, err, c.down, c.status)
	}
}

func TestRawCallback(t *testing.T) {
	type got struct{ body, ctype, hdr, rid, method string }
	ch := make(chan got, 1)
	srv := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		ch <- got{string(b), r.Header.Get("Content-Type"), r.Header.Get("X-Signature"), r.Header.Get("Nexus-Request-Id"), r.Method}
		w.WriteHeader(http.StatusAccepted)
	}))
	e := newExecutor(t, transport.Options{})
	res, err := execute(t, e, transport.Request{TaskGroup: breakerpool.TaskGroupCallback, URL: srv.URL + "/hook?id=1",
		Body: []byte("a,b,c\n"), ContentType: "text/csv", RequestID: "rid-9", Header: map[string]string{"X-Signature": "sig"}})
	if err != nil || res.Outcome != transport.OutcomeSucceeded || res.Status != 202 {
		t.Fatalf("got %+v, %v", res, err)
	}
	g := <-ch
	if g != (got{"a,b,c\n", "text/csv", "sig", "rid-9", "POST"}) {
		t.Errorf("server got %+v", g)
	}
	// Default content type.
	_, err = execute(t, e, transport.Request{TaskGroup: breakerpool.TaskGroupCallback, URL: srv.URL, Body: []byte{1, 2}})
	if err != nil {
		t.Fatal(err)
	}
	if g := <-ch; g.ctype != "application/octet-stream" || g.body != "\x01\x02" {
		t.Errorf("server got %+v", g)
	}
}
