package cluster

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the package's Prometheus collectors, registered on the
// injected Registerer (nil: not registered).
type metrics struct {
	members       *prometheus.GaugeVec   // state
	events        *prometheus.CounterVec // type: join, leave, update
	joinAttempts  *prometheus.CounterVec // result: ok, error
	msgsDropped   *prometheus.CounterVec // reason: unknown_type, empty, queue_full, bad_leave_intent, bad_metadata
	hintsReceived *prometheus.CounterVec // result: see HintResult
	hintsSent     *prometheus.CounterVec // path: direct, gossip
	sendErrors    prometheus.Counter
	stateHints    *prometheus.CounterVec // direction: sent, received
	fleetReports  *prometheus.CounterVec // result: sent, send_error, received, invalid, self, unknown_origin
	// foreignRefused: kind alive, merge (foreign.go).
	foreignRefused *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		members: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "fusebox_cluster_members",
			Help: "Members this node knows, by gossip state (departed members are kept for a while).",
		}, []string{"state"}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fusebox_cluster_member_events_total",
			Help: "Membership events from memberlist, by type.",
		}, []string{"type"}),
		joinAttempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fusebox_cluster_join_attempts_total",
			Help: "Join attempts (including reconnects to failed members), by result.",
		}, []string{"result"}),
		msgsDropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fusebox_cluster_messages_dropped_total",
			Help: "Gossip user messages dropped before processing, by reason.",
		}, []string{"reason"}),
		hintsReceived: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fusebox_hints_received_total",
			Help: "Breaker hints received from peers, by result.",
		}, []string{"result"}),
		hintsSent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fusebox_hints_sent_total",
			Help: "Breaker hints sent: direct UDP sends per peer, and gossip queue insertions (publish and re-gossip).",
		}, []string{"path"}),
		sendErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fusebox_hints_send_errors_total",
			Help: "Direct hint sends that failed or were dropped because the send queue was full.",
		}),
		stateHints: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fusebox_hints_antientropy_total",
			Help: "Hints exchanged by push/pull anti-entropy, by direction.",
		}, []string{"direction"}),
		fleetReports: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fusebox_fleet_reports_total",
			Help: "Fleet budget backlog reports: messages sent (per peer) or failed to send, and received by result (received, invalid, self, unknown_origin).",
		}, []string{"result"}),
		foreignRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fusebox_cluster_foreign_refused_total",
			Help: "Alive messages and join merges refused because the node they bring holds the Raft state of another cluster (its advertised cluster id is not this node's), by kind (alive, merge).",
		}, []string{"kind"}),
	}
	for _, k := range []string{"alive", "merge"} {
		m.foreignRefused.WithLabelValues(k)
	}
	for _, s := range []MemberState{StateAlive, StateSuspect, StateDead, StateLeft} {
		m.members.WithLabelValues(s.String())
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.members, m.events, m.joinAttempts, m.msgsDropped,
		m.hintsReceived, m.hintsSent, m.sendErrors, m.stateHints, m.fleetReports, m.foreignRefused} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("cluster: registering metrics: %w", err)
		}
	}
	return m, nil
}
