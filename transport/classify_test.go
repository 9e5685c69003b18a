package transport_test

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"fusebox/breakerpool"
	"fusebox/transport"
)

// statusHandler answers every request with status, a Nexus failure body and,
// when retryable is set, the nexus-request-retryable header.
func statusHandler(status int, retryable string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if retryable != "" {
			w.Header().Set("Nexus-Request-Retryable", retryable)
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Nexus-Operation-State", "failed") // read by the sdk on 424
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"message":"answer %d"}`, status)
	})
}

// checkDown asserts the contract with the queue for a down or failed attempt.
func checkOutcome(t *testing.T, res transport.Result, err error, wantDown bool, wantStatus int) {
	t.Helper()
	if res.Status != wantStatus {
		t.Errorf("Status = %d, want %d", res.Status, wantStatus)
	}
	var fe *transport.FailedError
	if wantDown {
		if !breakerpool.IsDestinationDown(err) || res.Outcome != transport.OutcomeDown {
			t.Fatalf("want down, got outcome %v err %v", res.Outcome, err)
		}
		if errors.As(err, &fe) {
			t.Fatalf("down error is also a FailedError: %v", err)
		}
	} else {
		if breakerpool.IsDestinationDown(err) || res.Outcome != transport.OutcomeFailed || !errors.As(err, &fe) {
			t.Fatalf("want failed, got outcome %v err %v", res.Outcome, err)
		}
		if fe.Status != wantStatus || fe.Message != res.Message {
			t.Errorf("FailedError = %+v, want status %d message %q", fe, wantStatus, res.Message)
		}
	}
	if res.Message == "" {
		t.Errorf("empty Message")
	}
}

func TestClassificationByStatus(t *testing.T) {
	cases := []struct {
		status int
		down   bool
	}{
		{400, false}, {401, false}, {403, false}, {404, false}, {409, false}, {501, false},
		{408, true}, {429, true}, {500, true}, {502, true}, {503, true}, {504, true}, {520, true},
		// not listed: down
		{302, true}, {418, true}, {499, true}, {505, true}, {599, true},
	}
	e := newExecutor(t, transport.Options{})
	for _, k := range kinds {
		for _, c := range cases {
			t.Run(fmt.Sprintf("%s/%d", k.name, c.status), func(t *testing.T) {
				if got := transport.IsDownStatus(k.req("").TaskGroup, c.status); got != c.down {
					t.Fatalf("IsDownStatus(%d) = %v", c.status, got)
				}
				srv := newServer(t, statusHandler(c.status, ""))
				res, err := execute(t, e, k.req(srv.URL))
				checkOutcome(t, res, err, c.down, c.status)
				if !strings.Contains(res.Message, fmt.Sprint(c.status)) {
					t.Errorf("Message %q does not name the status", res.Message)
				}
				if c.status != 302 && !strings.Contains(res.Message, fmt.Sprintf("answer %d", c.status)) {
					t.Errorf("Message %q does not carry the destination's answer", res.Message)
				}
			})
		}
	}
}

func TestRetryableHeaderOverrides(t *testing.T) {
	cases := []struct {
		status    int
		retryable string
		down      bool
	}{
		{400, "true", true}, {404, "true", true}, {501, "TRUE", true}, {409, "true", true},
		{503, "false", false}, {500, "false", false}, {429, "false", false}, {408, "false", false}, {520, "false", false},
		{400, "maybe", false}, {503, "maybe", true}, // unparsable: default
	}
	e := newExecutor(t, transport.Options{})
	for _, k := range kinds {
		for _, c := range cases {
			t.Run(fmt.Sprintf("%s/%d/%s", k.name, c.status, c.retryable), func(t *testing.T) {
				srv := newServer(t, statusHandler(c.status, c.retryable))
				res, err := execute(t, e, k.req(srv.URL))
				checkOutcome(t, res, err, c.down, c.status)
			})
		}
	}
}

// 424 (operation failed or canceled) is an answer only to a start: it ends
// the task failed. To a cancel or a callback it means nothing in Temporal
// — the cancel's client (nexusrpc handle.go Cancel) and the completion's
// (nexus_invocation.go isRetryableCallError) see an unexpected response,
// retried and counted destination-down — where fusebox failed the task.
// No Nexus-Request-Retryable header changes either class (424 is no
// handler error).
func TestStatus424FailsOnlyAStart(t *testing.T) {
	e := newExecutor(t, transport.Options{})
	for _, retryable := range []string{"", "true", "false"} {
		srv := newServer(t, statusHandler(http.StatusFailedDependency, retryable))
		for _, k := range kinds {
			t.Run(k.name+"/"+retryable, func(t *testing.T) {
				r := k.req(srv.URL)
				down := r.TaskGroup != breakerpool.TaskGroupNexusInvocation
				if got := transport.IsDownStatus(r.TaskGroup, http.StatusFailedDependency); got != down {
					t.Errorf("IsDownStatus(%s, 424) = %v, want %v", r.TaskGroup, got, down)
				}
				res, err := execute(t, e, r)
				checkOutcome(t, res, err, down, http.StatusFailedDependency)
				if !down && !strings.Contains(res.Message, "operation failed") {
					t.Errorf("a start's 424: message %q does not say the operation failed", res.Message)
				}
			})
		}
	}
}

// Nexus-Request-Retryable overrides the class of a handler error only:
// a status Temporal's client maps to no handler error type (3xx, 418,
// 502, 504, 505…) is an unexpected response, retried and counted
// destination-down whatever the header says (common/nexus/nexusrpc/
// client.go httpStatusCodeToHandlerErrorType → UnexpectedResponseError;
// executors.go isDestinationDown and nexus_invocation.go
// isRetryableCallError consult only a HandlerError's retryability).
// fusebox applied the header to every non-2xx status but 424.
func TestRetryableHeaderIgnoredWithoutHandlerErrorType(t *testing.T) {
	e := newExecutor(t, transport.Options{})
	for _, k := range kinds {
		for _, status := range []int{302, 418, 502, 504, 505, 599} {
			t.Run(fmt.Sprintf("%s/%d", k.name, status), func(t *testing.T) {
				srv := newServer(t, statusHandler(status, "false"))
				res, err := execute(t, e, k.req(srv.URL))
				checkOutcome(t, res, err, true, status)
			})
		}
	}
}

func TestSuccessStatuses(t *testing.T) {
	e := newExecutor(t, transport.Options{})
	okHandler := func(status int) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Nexus-Request-Retryable", "false") // ignored on 2xx
			if status == 201 {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(status)
				fmt.Fprint(w, `{"token":"tok-9","state":"running"}`)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			if status != 204 {
				fmt.Fprint(w, `{"y":2}`)
			}
		})
	}
	cases := []struct {
		kind    string
		status  int
		outcome transport.Outcome
	}{
		{"start", 200, transport.OutcomeSucceeded},
		{"start", 201, transport.OutcomeStarted},
		{"cancel", 202, transport.OutcomeSucceeded},
		{"cancel", 200, transport.OutcomeSucceeded},
		{"cancel", 204, transport.OutcomeSucceeded},
		{"callback", 200, transport.OutcomeSucceeded},
		{"callback", 204, transport.OutcomeSucceeded},
		{"raw-callback", 202, transport.OutcomeSucceeded},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s/%d", c.kind, c.status), func(t *testing.T) {
			srv := newServer(t, okHandler(c.status))
			res, err := execute(t, e, kindNamed(c.kind).req(srv.URL))
			if err != nil || res.Outcome != c.outcome || res.Status != c.status {
				t.Fatalf("got %+v, %v; want outcome %v status %d", res, err, c.outcome, c.status)
			}
			switch c.outcome {
			case transport.OutcomeStarted:
				if res.OperationID != "tok-9" {
					t.Errorf("OperationID = %q", res.OperationID)
				}
			}
			if c.kind == "start" && c.status == 200 && string(res.Output) != `{"y":2}` {
				t.Errorf("Output = %s", res.Output)
			}
		})
	}
	// A 2xx that breaks the Nexus protocol is an answer, not an outage.
	for _, status := range []int{202, 204} {
		t.Run(fmt.Sprintf("start/%d-invalid", status), func(t *testing.T) {
			srv := newServer(t, okHandler(status))
			res, err := execute(t, e, kindNamed("start").req(srv.URL))
			checkOutcome(t, res, err, false, status)
		})
	}
	t.Run("start/201-bad-info", func(t *testing.T) {
		srv := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(201)
			fmt.Fprint(w, `{"token":"","state":"running"}`)
		}))
		res, err := execute(t, e, kindNamed("start").req(srv.URL))
		checkOutcome(t, res, err, false, 201)
	})
}

func kindNamed(name string) kind {
	for _, k := range kinds {
		if k.name == name {
			return k
		}
	}
	panic("no kind " + name)
}
