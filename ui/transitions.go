package ui

import (
	"cmp"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"time"

	"fusebox/transport"
)

// PeerTimeout bounds each peer's answer when the cluster timeline is merged
// (the same bound as /v1/breakers?scope=cluster).
const PeerTimeout = 3 * time.Second

// MaxMerged bounds the merged cluster timeline: the newest MaxMerged
// transitions across all nodes.
const MaxMerged = 500

// TransitionList is GET /ui/api/transitions. With ?scope=cluster it holds
// every reachable alive member's transitions (each tagged with its Node),
// newest first, and Unreachable lists the members that did not answer.
type TransitionList struct {
	Scope string `json:"scope"`
	// Node is the answering node.
	Node string `json:"node,omitempty"`
	// Total is how many transitions the answering node has observed (local
	// scope only); Total > len(Transitions) means older ones were evicted.
	Total       uint64       `json:"total,omitempty"`
	Transitions []Transition `json:"transitions"`
	Unreachable []string     `json:"unreachable,omitempty"`
}

func (h *Handler) serveTransitions(w http.ResponseWriter, r *http.Request) {
	var out TransitionList
	switch scope := r.URL.Query().Get("scope"); scope {
	case "", "local":
		out = h.localTransitions()
	case "cluster":
		out = h.clusterTransitions(r.Context())
	default:
		writeError(w, http.StatusBadRequest, "invalid_argument", "scope="+jsonQuote(scope)+": want local or cluster")
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, out)
}

func (h *Handler) localTransitions() TransitionList {
	out := TransitionList{Scope: "local", Node: h.deps.NodeID, Transitions: []Transition{}}
	if h.deps.Recorder == nil {
		return out
	}
	out.Total = h.deps.Recorder.Total()
	out.Transitions = h.deps.Recorder.Recent()
	for i := range out.Transitions {
		out.Transitions[i].Node = h.deps.NodeID
	}
	return out
}

// clusterTransitions asks every alive member for its local timeline in
// parallel, each bounded by PeerTimeout, and merges them newest first. This
// node's own timeline is read in process. A peer's answer is untrusted:
// its entries are re-tagged with the member id we asked, entries with an
// unknown state are dropped, and at most MaxCapacity are taken from it.
func (h *Handler) clusterTransitions(ctx context.Context) TransitionList {
	out := TransitionList{Scope: "cluster", Node: h.deps.NodeID, Transitions: []Transition{}}
	if h.deps.Members == nil {
		out.Transitions = h.localTransitions().Transitions
		return out
	}
	out.Unreachable = fanOut(ctx, h, "api/transitions", nil,
		func() { out.Transitions = append(out.Transitions, h.localTransitions().Transitions...) },
		func(id string, list TransitionList) bool {
			out.Transitions = append(out.Transitions, sanitize(list.Transitions, id)...)
			return true
		})
	sortNewestFirst(out.Transitions)
	if len(out.Transitions) > MaxMerged {
		out.Transitions = out.Transitions[:MaxMerged]
	}
	return out
}

// sanitize keeps a peer's well-formed transitions, at most MaxCapacity,
// each tagged with the member id they were asked from.
func sanitize(ts []Transition, node string) []Transition {
	out := make([]Transition, 0, min(len(ts), MaxCapacity))
	for _, t := range ts {
		if len(out) == MaxCapacity {
			break
		}
		if !knownState(t.From) || !knownState(t.To) || t.At.IsZero() {
			continue
		}
		t.Node = node
		t.Destination = transport.RedactURL(t.Destination) // a peer of an older version may not redact
		out = append(out, t)
	}
	return out
}

func knownState(s string) bool { return s == "closed" || s == "half-open" || s == "open" }

// sortNewestFirst orders by time, then node, then the node's sequence.
func sortNewestFirst(ts []Transition) {
	slices.SortStableFunc(ts, func(a, b Transition) int {
		if c := b.At.Compare(a.At); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Node, b.Node); c != 0 {
			return c
		}
		return cmp.Compare(b.Seq, a.Seq)
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeError answers in the API's error format.
func writeError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, status, map[string]any{"error": map[string]string{"code": code, "message": msg}})
}

func jsonQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
