package transport

import (
	"errors"
	"net/http"
	"time"

	"github.com/nexus-rpc/sdk-go/nexus"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/puzpuzpuz/xsync/v4"

	"fusebox/breakerpool"
)

// SeriesFilter says whether a breaker key has per-destination series of its
// own (*breakerpool.Pool.SeriesShown): the request series label the other
// keys' destination breakerpool.SeriesOther, so both families show the same
// destinations and their cardinality has the same bound.
type SeriesFilter interface {
	SeriesShown(k breakerpool.Key) bool
	// NamespaceShown: ns keeps summed series of its own; the others'
	// are summed under namespace SeriesOther too.
	NamespaceShown(ns string) bool
}

// headerFailureSource is Temporal's Nexus response header naming where a
// failure came from (common/nexus: FailureSourceHeaderName).
const headerFailureSource = "Temporal-Nexus-Failure-Source"

// Outcome tag values of the request series: Temporal's, from
// components/nexusoperations/executors.go (startCallOutcomeTag,
// cancelCallOutcomeTag) and components/callbacks/nexus_invocation.go
// (outcomeTag), plus fusebox's "aborted".
const (
	tagSuccessful     = "successful" // Nexus start (sync) and cancel
	tagPending        = "pending"    // Nexus start, async
	tagSuccess        = "success"    // callbacks (Temporal's word there)
	tagRequestTimeout = "request-timeout"
	tagUnknownError   = "unknown-error"
	tagInvalidToken   = "invalid-operation-token" // Nexus start: token over MaxOperationTokenBytes
	tagAborted        = "aborted"                 // fusebox: the caller gave up (shard moved, closing)
	tagHandlerError   = "handler-error:"
	tagOpUnsuccessful = "operation-unsuccessful:"
	tagUnknownValue   = "_unknown_" // Temporal's empty tag value
)

// requestSeries are Temporal's outbound request metrics under the fusebox_
// prefix: fusebox_nexus_outbound_requests_total /
// fusebox_nexus_outbound_latency_seconds {namespace, destination, method,
// outcome, failure_source} and fusebox_callback_outbound_requests_total /
// fusebox_callback_outbound_latency_seconds {namespace, destination,
// outcome}. At each scrape it first deletes the series of keys the filter
// no longer shows (their calls are counted under SeriesOther from then on).
type requestSeries struct {
	filter       SeriesFilter
	nexusCount   *prometheus.CounterVec
	nexusLatency *prometheus.HistogramVec
	cbCount      *prometheus.CounterVec
	cbLatency    *prometheus.HistogramVec
	// labelled holds the keys observed under their own destination.
	labelled *xsync.Map[breakerpool.Key, struct{}]
	// otherNS holds the namespaces observed with destination SeriesOther
	// under their own name: deleted once the filter sums them too.
	otherNS *xsync.Map[string, struct{}]
}

var requestBuckets = []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}

func newRequestSeries(filter SeriesFilter) *requestSeries {
	nexusLabels := []string{"namespace", "destination", "method", "outcome", "failure_source"}
	cbLabels := []string{"namespace", "destination", "outcome"}
	return &requestSeries{
		filter: filter,
		nexusCount: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fusebox_nexus_outbound_requests_total",
			Help: "Nexus requests (StartOperation, CancelOperation) made, by outcome: Temporal's nexus_outbound_requests.",
		}, nexusLabels),
		nexusLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "fusebox_nexus_outbound_latency_seconds", Buckets: requestBuckets,
			Help: "Latency of Nexus requests, by outcome: Temporal's nexus_outbound_latency.",
		}, nexusLabels),
		cbCount: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fusebox_callback_outbound_requests_total",
			Help: "Completion callback requests made, by outcome: Temporal's callback_outbound_requests.",
		}, cbLabels),
		cbLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "fusebox_callback_outbound_latency_seconds", Buckets: requestBuckets,
			Help: "Latency of completion callback requests, by outcome: Temporal's callback_outbound_latency.",
		}, cbLabels),
		labelled: xsync.NewMap[breakerpool.Key, struct{}](),
		otherNS:  xsync.NewMap[string, struct{}](),
	}
}

func (s *requestSeries) Describe(ch chan<- *prometheus.Desc) {
	s.nexusCount.Describe(ch)
	s.nexusLatency.Describe(ch)
	s.cbCount.Describe(ch)
	s.cbLatency.Describe(ch)
}

func (s *requestSeries) Collect(ch chan<- prometheus.Metric) {
	if s.filter != nil {
		s.labelled.Range(func(k breakerpool.Key, _ struct{}) bool {
			if s.filter.SeriesShown(k) {
				return true
			}
			s.labelled.Delete(k)
			if m := method(k.TaskGroup); m != "" {
				l := prometheus.Labels{"namespace": k.NamespaceID, "destination": k.Destination, "method": m}
				s.nexusCount.DeletePartialMatch(l)
				s.nexusLatency.DeletePartialMatch(l)
			} else {
				l := prometheus.Labels{"namespace": k.NamespaceID, "destination": k.Destination}
				s.cbCount.DeletePartialMatch(l)
				s.cbLatency.DeletePartialMatch(l)
			}
			return true
		})
		s.otherNS.Range(func(ns string, _ struct{}) bool {
			if s.filter.NamespaceShown(ns) {
				return true
			}
			s.otherNS.Delete(ns)
			l := prometheus.Labels{"namespace": ns, "destination": breakerpool.SeriesOther}
			s.nexusCount.DeletePartialMatch(l)
			s.nexusLatency.DeletePartialMatch(l)
			s.cbCount.DeletePartialMatch(l)
			s.cbLatency.DeletePartialMatch(l)
			return true
		})
	}
	s.nexusCount.Collect(ch)
	s.nexusLatency.Collect(ch)
	s.cbCount.Collect(ch)
	s.cbLatency.Collect(ch)
}

// method is the Nexus method of a task group, "" for callbacks.
func method(taskGroup string) string {
	switch taskGroup {
	case breakerpool.TaskGroupNexusInvocation:
		return "StartOperation"
	case breakerpool.TaskGroupNexusCancelation:
		return "CancelOperation"
	}
	return ""
}

// observe records one request. Requests that never reached the wire (an
// invalid request, an unknown task group) are not requests and are not
// counted here (fusebox_outbound_attempts_total has them).
func (s *requestSeries) observe(r *Request, res *Result, err error, c *capture, d time.Duration) {
	if s == nil || !c.sent {
		return
	}
	m := method(r.TaskGroup)
	if m == "" && r.TaskGroup != breakerpool.TaskGroupCallback {
		return
	}
	k := breakerpool.Key{TaskGroup: r.TaskGroup, NamespaceID: r.Namespace, Destination: r.Destination}
	if k.Destination == "" {
		k.Destination = BreakerDestination(breakerpool.TaskGroupCallback, r.URL) // scheme://host only
	}
	if s.filter != nil && !s.filter.SeriesShown(k) {
		k.Destination = breakerpool.SeriesOther
		if !s.filter.NamespaceShown(k.NamespaceID) {
			k.NamespaceID = breakerpool.SeriesOther
		} else if _, ok := s.otherNS.Load(k.NamespaceID); !ok {
			s.otherNS.Store(k.NamespaceID, struct{}{})
		}
	} else if _, ok := s.labelled.Load(k); !ok {
		s.labelled.Store(k, struct{}{})
	}
	outcome := requestOutcome(r.TaskGroup, res, err, c)
	if m != "" {
		src := tagUnknownValue
		if c.responded {
			switch v := c.header.Get(headerFailureSource); v {
			case "":
			case "worker":
				src = v
			default:
				src = "other" // bounded: any other value the handler sent
			}
		}
		s.nexusCount.WithLabelValues(k.NamespaceID, k.Destination, m, outcome, src).Inc()
		s.nexusLatency.WithLabelValues(k.NamespaceID, k.Destination, m, outcome, src).Observe(d.Seconds())
		return
	}
	s.cbCount.WithLabelValues(k.NamespaceID, k.Destination, outcome).Inc()
	s.cbLatency.WithLabelValues(k.NamespaceID, k.Destination, outcome).Observe(d.Seconds())
}

// requestOutcome is Temporal's outcome tag of one request: successful /
// pending (start) or success (callback); request-timeout when the attempt's
// deadline passed; invalid-operation-token for a start whose token is too
// long; operation-unsuccessful:<state> for a 424; handler-error:
// <TYPE> for the statuses Temporal's Nexus client maps to a handler error
// type (handlerErrorType);
// unknown-error for anything else (no answer, another status, a 2xx that
// breaks the protocol); aborted when the caller gave up first.
func requestOutcome(taskGroup string, res *Result, err error, c *capture) string {
	switch {
	case err == nil && res.Outcome == OutcomeStarted:
		return tagPending
	case err == nil && taskGroup == breakerpool.TaskGroupCallback:
		return tagSuccess
	case err == nil:
		return tagSuccessful
	case res.Outcome == OutcomeAborted:
		return tagAborted
	case errors.Is(err, ErrInvalidOperationToken):
		return tagInvalidToken
	case isTimeout(err) || isTimeout(c.bodyErr):
		return tagRequestTimeout
	}
	var opErr *nexus.OperationError
	if errors.As(err, &opErr) {
		return tagOpUnsuccessful + string(opErr.State)
	}
	if c.responded && c.status/100 != 2 && !c.tooLarge && c.bodyErr == nil {
		if t := handlerErrorType(c.status); t != "" {
			return tagHandlerError + t
		}
	}
	return tagUnknownError
}

// Handler error types sdk-go v0.4.0 does not name (newer sdks do).
const (
	handlerErrorRequestTimeout = "REQUEST_TIMEOUT"
	handlerErrorConflict       = "CONFLICT"
)

// handlerErrorType maps a status to the Nexus handler error type Temporal's
// client gives it (common/nexus/nexusrpc/client.go,
// httpStatusCodeToHandlerErrorType); "" for a status it reports as an
// unexpected response. It is also where the Nexus-Request-Retryable header
// applies (classify): only a handler error has a retry behaviour.
// sdk-go v0.4.0's table (bestEffortHandlerErrorFromResponse)
// lacks 408 and 409, which fusebox tagged unknown-error: Temporal tags them
// handler-error:REQUEST_TIMEOUT and handler-error:CONFLICT.
func handlerErrorType(status int) string {
	switch status {
	case http.StatusBadRequest:
		return string(nexus.HandlerErrorTypeBadRequest)
	case http.StatusRequestTimeout:
		return handlerErrorRequestTimeout
	case http.StatusConflict:
		return handlerErrorConflict
	case http.StatusUnauthorized:
		return string(nexus.HandlerErrorTypeUnauthenticated)
	case http.StatusForbidden:
		return string(nexus.HandlerErrorTypeUnauthorized)
	case http.StatusNotFound:
		return string(nexus.HandlerErrorTypeNotFound)
	case http.StatusTooManyRequests:
		return string(nexus.HandlerErrorTypeResourceExhausted)
	case http.StatusInternalServerError:
		return string(nexus.HandlerErrorTypeInternal)
	case http.StatusNotImplemented:
		return string(nexus.HandlerErrorTypeNotImplemented)
	case http.StatusServiceUnavailable:
		return string(nexus.HandlerErrorTypeUnavailable)
	case nexus.StatusUpstreamTimeout:
		return string(nexus.HandlerErrorTypeUpstreamTimeout)
	}
	return ""
}
