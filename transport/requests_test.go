package transport_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"fusebox/breakerpool"
	"fusebox/transport"
	"fusebox/transport/transporttest"
)

// hidden is a SeriesFilter that hides the keys and namespaces it holds.
type hidden struct {
	mu   sync.Mutex
	keys map[breakerpool.Key]bool
	ns   map[string]bool
}

func (h *hidden) SeriesShown(k breakerpool.Key) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return !h.keys[k]
}

func (h *hidden) NamespaceShown(ns string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return !h.ns[ns]
}

func (h *hidden) hideNamespace(ns string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ns == nil {
		h.ns = map[string]bool{}
	}
	h.ns[ns] = true
}

func (h *hidden) hide(k breakerpool.Key) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.keys[k] = true
}

// requestCounts gathers reg and returns "family|label=value,..." → count for
// the two request counters (labels in the registry's sorted order).
func requestCounts(t *testing.T, reg prometheus.Gatherer) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		name := mf.GetName()
		if name != "fusebox_nexus_outbound_requests_total" && name != "fusebox_callback_outbound_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, l.GetName()+"="+l.GetValue())
			}
			out[name+"|"+strings.Join(ls, ",")] = m.GetCounter().GetValue()
		}
	}
	return out
}

func nexusSeries(dest, method, outcome, src string) string {
	return "fusebox_nexus_outbound_requests_total|destination=" + dest + ",failure_source=" + src +
		",method=" + method + ",namespace=ns1,outcome=" + outcome
}

func callbackSeries(dest, outcome string) string {
	return "fusebox_callback_outbound_requests_total|destination=" + dest + ",namespace=ns1,outcome=" + outcome
}

// TestRequestSeriesTemporalOutcomes drives a real Nexus handler and callback
// receiver through every answer and checks the request series carry
// Temporal's outcome values; a key the filter hides is counted under
// destination "_other", and a key hidden after being shown loses its series
// at the next scrape.
func TestRequestSeriesTemporalOutcomes(t *testing.T) {
	dest := transporttest.NewDestination(t)
	reg := prometheus.NewRegistry()
	filter := &hidden{keys: map[breakerpool.Key]bool{}}
	e := newExecutor(t, transport.Options{Registerer: reg, Series: filter})

	start := func(op, endpoint string) transport.Request {
		return transport.Request{TaskGroup: breakerpool.TaskGroupNexusInvocation, URL: dest.NexusURL(),
			Service: transporttest.Service, Operation: op, RequestID: "r-" + op, Input: json.RawMessage(`{}`),
			Namespace: "ns1", Destination: endpoint}
	}
	cb := transport.Request{TaskGroup: breakerpool.TaskGroupCallback, URL: dest.CallbackURL(), Body: []byte("{}"),
		Namespace: "ns1", Destination: transport.BreakerDestination(breakerpool.TaskGroupCallback, dest.CallbackURL())}
	cancel := transport.Request{TaskGroup: breakerpool.TaskGroupNexusCancelation, URL: dest.NexusURL(),
		Service: transporttest.Service, Operation: transporttest.OpAsync, OperationID: "op-1", Namespace: "ns1", Destination: "ep"}

	_, _ = execute(t, e, start(transporttest.OpEcho, "ep"))
	_, _ = execute(t, e, start(transporttest.OpAsync, "ep"))
	_, _ = execute(t, e, start(transporttest.OpFail, "ep"))
	_, _ = execute(t, e, cancel)
	_, _ = execute(t, e, cb)
	mustMode(t, dest, transporttest.ModeUnavailable)
	_, _ = execute(t, e, start(transporttest.OpEcho, "ep"))
	mustMode(t, dest, transporttest.ModeBadRequest)
	_, _ = execute(t, e, cb)
	mustMode(t, dest, transporttest.ModeSlow)
	slow := start(transporttest.OpEcho, "ep")
	slow.Timeout = 50 * time.Millisecond
	_, _ = execute(t, e, slow)
	mustMode(t, dest, transporttest.ModeRefuse)
	_, _ = execute(t, e, cb)
	mustMode(t, dest, transporttest.ModeUp)
	filter.hide(breakerpool.Key{TaskGroup: breakerpool.TaskGroupNexusInvocation, NamespaceID: "ns1", Destination: "ep-quiet"})
	_, _ = execute(t, e, start(transporttest.OpEcho, "ep-quiet"))

	cbDest := cb.Destination
	got := requestCounts(t, reg)
	for _, s := range []string{
		nexusSeries("ep", "StartOperation", "successful", "_unknown_"),
		nexusSeries("ep", "StartOperation", "pending", "_unknown_"),
		nexusSeries("ep", "StartOperation", "operation-unsuccessful:failed", "_unknown_"),
		nexusSeries("ep", "StartOperation", "handler-error:UNAVAILABLE", "_unknown_"),
		nexusSeries("ep", "StartOperation", "request-timeout", "_unknown_"),
		nexusSeries("ep", "CancelOperation", "successful", "_unknown_"),
		nexusSeries(breakerpool.SeriesOther, "StartOperation", "successful", "_unknown_"),
		callbackSeries(cbDest, "success"),
		callbackSeries(cbDest, "handler-error:BAD_REQUEST"),
		callbackSeries(cbDest, "unknown-error"),
	} {
		if got[s] != 1 {
			t.Errorf("%s = %v, want 1; have %v", s, got[s], got)
		}
	}
	if len(got) != 10 {
		t.Errorf("%d request series, want 10: %v", len(got), got)
	}

	// Hidden after being shown: its series go at the next scrape, its
	// later calls count under _other.
	filter.hide(breakerpool.Key{TaskGroup: breakerpool.TaskGroupCallback, NamespaceID: "ns1", Destination: cbDest})
	_, _ = execute(t, e, cb)
	got = requestCounts(t, reg)
	if _, ok := got[callbackSeries(cbDest, "success")]; ok {
		t.Errorf("hidden callback destination still has its series: %v", got)
	}
	if got[callbackSeries(breakerpool.SeriesOther, "success")] != 1 {
		t.Errorf("hidden callback destination's call not under _other: %v", got)
	}
	if got[nexusSeries("ep", "StartOperation", "successful", "_unknown_")] != 1 {
		t.Errorf("a shown key lost its series: %v", got)
	}

	// A namespace the filter sums too: its _other series go at the next
	// scrape, and its later hidden calls count under namespace _other
	// (one set of summed series per namespace ever seen grew without end).
	filter.hideNamespace("ns1")
	_, _ = execute(t, e, cb)
	got = requestCounts(t, reg)
	if _, ok := got[callbackSeries(breakerpool.SeriesOther, "success")]; ok {
		t.Errorf("a hidden namespace still has its _other series: %v", got)
	}
	other := "fusebox_callback_outbound_requests_total|destination=_other,namespace=_other,outcome=success"
	if got[other] != 1 {
		t.Errorf("a hidden namespace's call not under namespace _other (%s): %v", other, got)
	}
}

func mustMode(t *testing.T, d *transporttest.Destination, m transporttest.Mode) {
	t.Helper()
	if err := d.SetMode(m); err != nil {
		t.Fatal(err)
	}
}

// 408 and 409 are handler errors in Temporal's request series,
// handler-error:REQUEST_TIMEOUT and handler-error:CONFLICT
// (common/nexus/nexusrpc/client.go httpStatusCodeToHandlerErrorType, read
// by executors.go startCallOutcomeTag and nexus_invocation.go outcomeTag);
// fusebox tagged them unknown-error, the tag of sdk-go v0.4.0's table.
func TestRequestSeriesTag408And409AsHandlerErrors(t *testing.T) {
	reg := prometheus.NewRegistry()
	e := newExecutor(t, transport.Options{Registerer: reg})
	want := map[string]float64{}
	for status, typ := range map[int]string{http.StatusRequestTimeout: "REQUEST_TIMEOUT", http.StatusConflict: "CONFLICT"} {
		srv := newServer(t, statusHandler(status, ""))
		for _, k := range []string{"start", "callback"} {
			r := kindNamed(k).req(srv.URL)
			r.Namespace, r.Destination = "ns1", fmt.Sprint("d-", status)
			_, _ = execute(t, e, r)
			if k == "start" {
				want[nexusSeries(r.Destination, "StartOperation", "handler-error:"+typ, "_unknown_")] = 1
			} else {
				want[callbackSeries(r.Destination, "handler-error:"+typ)] = 1
			}
		}
	}
	if got := requestCounts(t, reg); !maps.Equal(got, want) {
		t.Fatalf("request series %v, want %v", got, want)
	}
}
