package transport_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"fusebox/breakerpool"
	"fusebox/transport"
	"fusebox/transport/transporttest"
)

// tokenHandler answers every Nexus start 201 with a token of n bytes.
func tokenHandler(n int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]string{"token": strings.Repeat("t", n), "state": "running"})
	})
}

// A start answered with a token longer than Temporal's
// limit.operation.token.length (4096) fails, not down: the store could not
// record it (raftstore refuses a longer operation_id), so the task was
// called again forever. Temporal (components/nexusoperations/executors.go,
// executeInvocationTask) fails it with ErrInvalidOperationToken, non-
// retryable, and tags the request invalid-operation-token.
func TestStartTokenOverLimitFails(t *testing.T) {
	reg := prometheus.NewRegistry()
	e := newExecutor(t, transport.Options{Registerer: reg})
	for _, n := range []int{transport.MaxOperationTokenBytes, transport.MaxOperationTokenBytes + 1} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			srv := newServer(t, tokenHandler(n))
			r := kindNamed("start").req(srv.URL)
			r.Namespace, r.Destination = "ns1", fmt.Sprint("ep-", n)
			res, err := execute(t, e, r)
			if n <= transport.MaxOperationTokenBytes {
				if err != nil || res.Outcome != transport.OutcomeStarted || len(res.OperationID) != n {
					t.Fatalf("token of %d bytes: %v, %v (operation id of %d bytes); want started", n, res.Outcome, err, len(res.OperationID))
				}
				return
			}
			var fe *transport.FailedError
			if res.Outcome != transport.OutcomeFailed || !errors.As(err, &fe) || breakerpool.IsDestinationDown(err) {
				t.Fatalf("token of %d bytes: outcome %v, error %v; want failed, not down", n, res.Outcome, err)
			}
			if !errors.Is(err, transport.ErrInvalidOperationToken) || res.OperationID != "" || res.Status != http.StatusCreated ||
				!strings.Contains(res.Message, "invalid operation token") {
				t.Fatalf("result %+v, error %v; want the invalid token named, no operation id", res, err)
			}
			s := nexusSeries(r.Destination, "StartOperation", "invalid-operation-token", "_unknown_")
			if got := requestCounts(t, reg); got[s] != 1 {
				t.Errorf("%s = %v; have %v", s, got[s], got)
			}
		})
	}
}

// A completion carries its operation token in Nexus-Operation-Token in
// every state. sdk-go v0.4.0 sends only the deprecated Nexus-Operation-Id
// for a failed or canceled one (OperationCompletionUnsuccessful), and
// Temporal's receiver (common/nexus/nexusrpc/completion.go,
// completionHTTPHandler.ServeHTTP) reads the token header alone. The
// deprecated header is still sent, for receivers that read only it.
func TestCompletionSendsTokenHeaderInEveryState(t *testing.T) {
	dest := transporttest.NewDestination(t)
	e := newExecutor(t, transport.Options{})
	for _, state := range []string{transport.CompletionSucceeded, transport.CompletionFailed, transport.CompletionCanceled} {
		t.Run(state, func(t *testing.T) {
			dest.Reset()
			comp := &transport.Completion{State: state, OperationToken: "tok-" + state}
			if state != transport.CompletionSucceeded {
				comp.FailureMessage = "boom"
			}
			res, err := execute(t, e, transport.Request{TaskGroup: breakerpool.TaskGroupCallback, URL: dest.CallbackURL(), Completion: comp})
			if err != nil {
				t.Fatalf("%s completion: %v (%+v)", state, err, res)
			}
			calls := dest.Calls()
			if len(calls) != 1 || calls[0].State != state {
				t.Fatalf("receiver saw %+v; want one %s completion", calls, state)
			}
			if got := calls[0].OperationToken; got != comp.OperationToken {
				t.Errorf("Nexus-Operation-Token %q, want %q", got, comp.OperationToken)
			}
			if got := calls[0].Header.Get("Nexus-Operation-Id"); got != comp.OperationToken {
				t.Errorf("Nexus-Operation-Id %q, want %q (kept for older receivers)", got, comp.OperationToken)
			}
		})
	}
}
