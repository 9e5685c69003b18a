package transport_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"fusebox/transport"
)

func TestValidateAcceptsValid(t *testing.T) {
	for _, k := range kinds {
		r := k.req("https://dest.example:8443/base")
		if err := r.Validate(); err != nil {
			t.Errorf("%s: %v", k.name, err)
		}
	}
	r := kindNamed("start").req("http://x")
	r.Input = nil
	r.CallbackURL = "https://fusebox.example/cb?x=1"
	r.CallbackHeader = map[string]string{"token": "t"}
	r.Header = map[string]string{"Authorization": "Bearer a\tb"}
	r.Timeout = transport.MaxTimeout
	if err := r.Validate(); err != nil {
		t.Error(err)
	}
}

func TestValidateNamesTheField(t *testing.T) {
	start := func(f func(*transport.Request)) transport.Request {
		r := kindNamed("start").req("http://dest")
		f(&r)
		return r
	}
	cancel := func(f func(*transport.Request)) transport.Request {
		r := kindNamed("cancel").req("http://dest")
		f(&r)
		return r
	}
	cb := func(f func(*transport.Request)) transport.Request {
		r := kindNamed("callback").req("http://dest")
		f(&r)
		return r
	}
	raw := func(f func(*transport.Request)) transport.Request {
		r := kindNamed("raw-callback").req("http://dest")
		f(&r)
		return r
	}
	big := make([]byte, transport.MaxRequestBodyBytes+1)
	cases := []struct {
		name  string
		r     transport.Request
		field string
	}{
		{"no task group", start(func(r *transport.Request) { r.TaskGroup = "" }), "task_group"},
		{"unknown task group", start(func(r *transport.Request) { r.TaskGroup = "x.Invocation" }), "task_group"},
		{"empty url", start(func(r *transport.Request) { r.URL = "" }), "url"},
		{"ftp url", start(func(r *transport.Request) { r.URL = "ftp://dest/x" }), "url"},
		{"relative url", start(func(r *transport.Request) { r.URL = "/just/a/path" }), "url"},
		{"bad url", start(func(r *transport.Request) { r.URL = "http://[::1" }), "url"},
		{"credentials in url", start(func(r *transport.Request) { r.URL = "http://u:p@dest" }), "url"},
		{"long url", start(func(r *transport.Request) { r.URL = "http://dest/" + strings.Repeat("a", transport.MaxURLBytes) }), "url"},
		{"negative timeout", start(func(r *transport.Request) { r.Timeout = -time.Second }), "timeout"},
		{"huge timeout", start(func(r *transport.Request) { r.Timeout = time.Hour }), "timeout"},
		{"start without service", start(func(r *transport.Request) { r.Service = "" }), "service"},
		{"start without operation", start(func(r *transport.Request) { r.Operation = "" }), "operation"},
		{"start without request id", start(func(r *transport.Request) { r.RequestID = "" }), "request_id"},
		{"request id with newline", start(func(r *transport.Request) { r.RequestID = "a\nb" }), "request_id"},
		{"input not json", start(func(r *transport.Request) { r.Input = []byte("{") }), "input"},
		{"input too big", start(func(r *transport.Request) { r.Input = big }), "input"},
		{"bad callback url", start(func(r *transport.Request) { r.CallbackURL = "mailto:x@y" }), "callback_url"},
		{"bad callback header", start(func(r *transport.Request) { r.CallbackHeader = map[string]string{"a b": "c"} }), "callback_header[a b]"},
		{"start with body", start(func(r *transport.Request) { r.Body = []byte("x") }), "body"},
		{"start with completion", start(func(r *transport.Request) { r.Completion = &transport.Completion{} }), "completion"},
		{"header name", start(func(r *transport.Request) { r.Header = map[string]string{"X:Y": "1"} }), "header[X:Y]"},
		{"header value", start(func(r *transport.Request) { r.Header = map[string]string{"X": "1\r\nEvil: 2"} }), "header[X]"},
		{"reserved header", start(func(r *transport.Request) { r.Header = map[string]string{"Nexus-Request-Id": "x"} }), "header[Nexus-Request-Id]"},
		{"content header", start(func(r *transport.Request) { r.Header = map[string]string{"content-type": "x"} }), "header[content-type]"},
		{"host header", start(func(r *transport.Request) { r.Header = map[string]string{"Host": "x"} }), "header[Host]"},
		{"cancel without operation id", cancel(func(r *transport.Request) { r.OperationID = "" }), "operation_id"},
		{"cancel without service", cancel(func(r *transport.Request) { r.Service = "" }), "service"},
		{"cancel with input", cancel(func(r *transport.Request) { r.Input = []byte("{}") }), "input"},
		{"callback with neither", raw(func(r *transport.Request) { r.Body = nil }), "completion"},
		{"callback with both", cb(func(r *transport.Request) { r.Body = []byte("x") }), "body"},
		{"callback with service", cb(func(r *transport.Request) { r.Service = "s" }), "service"},
		{"callback with callback url", cb(func(r *transport.Request) { r.CallbackURL = "http://x" }), "callback_url"},
		// Each field named as itself: input and callback_header were
		// reported as service and callback_url.
		{"callback with operation", cb(func(r *transport.Request) { r.Operation = "o" }), "operation"},
		{"callback with input", cb(func(r *transport.Request) { r.Input = []byte("{}") }), "input"},
		{"callback with operation id", cb(func(r *transport.Request) { r.OperationID = "x" }), "operation_id"},
		{"callback with callback header", cb(func(r *transport.Request) { r.CallbackHeader = map[string]string{"a": "b"} }), "callback_header"},
		{"callback body too big", raw(func(r *transport.Request) { r.Body = big }), "body"},
		{"bad content type", raw(func(r *transport.Request) { r.ContentType = "text/" }), "content_type"},
		{"content type with completion", cb(func(r *transport.Request) { r.ContentType = "text/plain" }), "content_type"},
		{"completion state", cb(func(r *transport.Request) { r.Completion.State = "done" }), "completion.state"},
		{"completion result not json", cb(func(r *transport.Request) { r.Completion.Result = []byte("nope") }), "completion.result"},
		{"failed completion with result", cb(func(r *transport.Request) {
			r.Completion.State = transport.CompletionFailed
		}), "completion.result"},
		{"succeeded completion with failure", cb(func(r *transport.Request) { r.Completion.FailureMessage = "x" }), "completion.failure_message"},
		{"completion token", cb(func(r *transport.Request) { r.Completion.OperationToken = "a\x00" }), "completion.operation_token"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.r.Validate()
			var ve *transport.ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("Validate() = %v, want a ValidationError", err)
			}
			if ve.Field != c.field {
				t.Errorf("Field = %q, want %q (%v)", ve.Field, c.field, err)
			}
			if !strings.Contains(err.Error(), c.field) {
				t.Errorf("error %q does not name %q", err, c.field)
			}
		})
	}
}

func TestValidateTooManyHeaders(t *testing.T) {
	r := kindNamed("raw-callback").req("http://dest")
	r.Header = map[string]string{}
	for i := range transport.MaxHeaders + 1 {
		r.Header["X-H"+strings.Repeat("a", i)] = "v"
	}
	var ve *transport.ValidationError
	if err := r.Validate(); !errors.As(err, &ve) || ve.Field != "header" {
		t.Fatalf("Validate() = %v", err)
	}
}

// A cancel's operation_id and a completion's operation_token take a token
// of up to MaxOperationTokenBytes (4096, the store's bound and Temporal's
// limit.operation.token.length), so a token a start recorded can be
// cancelled and completed; they were bounded at MaxNameBytes (1 KiB).
func TestValidateTokenUpToTheTokenLimit(t *testing.T) {
	for _, n := range []int{transport.MaxNameBytes + 1, transport.MaxOperationTokenBytes, transport.MaxOperationTokenBytes + 1} {
		tok := strings.Repeat("t", n)
		cancel := kindNamed("cancel").req("https://dest.example/nexus")
		cancel.OperationID = tok
		cb := kindNamed("callback").req("https://dest.example")
		cb.Completion.OperationToken = tok
		for field, err := range map[string]error{"operation_id": cancel.Validate(), "completion.operation_token": cb.Validate()} {
			var ve *transport.ValidationError
			switch {
			case n <= transport.MaxOperationTokenBytes && err != nil:
				t.Errorf("%s of %d bytes refused: %v", field, n, err)
			case n > transport.MaxOperationTokenBytes && (!errors.As(err, &ve) || ve.Field != field):
				t.Errorf("%s of %d bytes: %v; want refused naming %s", field, n, err, field)
			}
		}
	}
}
