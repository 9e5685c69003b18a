package ui

import (
	"cmp"
	"context"
	"net/http"
	"net/url"
	"slices"
	"time"

	"fusebox/transport"
)

// NodeHistory is one node's samples, oldest first.
type NodeHistory struct {
	Node    string   `json:"node"`
	Samples []Sample `json:"samples"`
}

// HistoryList is GET /ui/api/history: this node's samples (scope local) or
// every reachable alive member's (scope cluster), for the page's plots of
// calls and failures per destination and of shard ownership over time.
// ?since=<RFC 3339> keeps the samples taken after it: the page asks for
// everything once, then only for what is new.
// Shard owners come from the replicated shard map, so with scope cluster
// only the answering node's samples carry them.
type HistoryList struct {
	Scope           string        `json:"scope"`
	Node            string        `json:"node,omitempty"`
	IntervalSeconds float64       `json:"interval_seconds"`
	Nodes           []NodeHistory `json:"nodes"`
	Unreachable     []string      `json:"unreachable,omitempty"`
}

func (h *Handler) serveHistory(w http.ResponseWriter, r *http.Request) {
	var since time.Time
	if v := r.URL.Query().Get("since"); v != "" {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			writeError(w, http.StatusBadRequest, "invalid_argument", "since="+jsonQuote(v)+": want an RFC 3339 time")
			return
		}
		since = t
	}
	out := HistoryList{Node: h.deps.NodeID, Nodes: []NodeHistory{}}
	if hist := h.deps.History; hist != nil {
		out.IntervalSeconds = hist.Every().Seconds()
	}
	switch scope := r.URL.Query().Get("scope"); scope {
	case "", "local":
		out.Scope = "local"
		out.Nodes = append(out.Nodes, h.localHistory(since))
	case "cluster":
		out.Scope = "cluster"
		h.clusterHistory(r.Context(), since, &out)
	default:
		writeError(w, http.StatusBadRequest, "invalid_argument", "scope="+jsonQuote(scope)+": want local or cluster")
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, out)
}

// localHistory is this node's samples after since (zero: all).
func (h *Handler) localHistory(since time.Time) NodeHistory {
	out := NodeHistory{Node: h.deps.NodeID, Samples: []Sample{}}
	if h.deps.History != nil {
		out.Samples = after(h.deps.History.Samples(), since)
	}
	return out
}

// after keeps the samples taken after since (oldest first in, oldest
// first out).
func after(ss []Sample, since time.Time) []Sample {
	if since.IsZero() {
		return ss
	}
	i := 0
	for i < len(ss) && !ss[i].At.After(since) {
		i++
	}
	return ss[i:]
}

// clusterHistory asks every alive member for its local history in
// parallel (PeerTimeout each), as clusterTransitions does. A peer's answer
// is untrusted: it is tagged with the member id asked, at most
// MaxHistorySamples samples of at most MaxSampleKeys keys are taken, its
// destinations are redacted again, samples without a time are dropped, and
// its shard owners are left out (this node's replica has the same map).
func (h *Handler) clusterHistory(ctx context.Context, since time.Time, out *HistoryList) {
	if h.deps.Members == nil {
		out.Nodes = append(out.Nodes, h.localHistory(since))
		return
	}
	var query url.Values
	if !since.IsZero() {
		query = url.Values{"since": {since.Format(time.RFC3339Nano)}}
	}
	out.Unreachable = fanOut(ctx, h, "api/history", query,
		func() { out.Nodes = append(out.Nodes, h.localHistory(since)) },
		func(id string, list HistoryList) bool {
			if len(list.Nodes) == 0 {
				return false
			}
			out.Nodes = append(out.Nodes, NodeHistory{Node: id, Samples: sanitizeSamples(list.Nodes[0].Samples, since)})
			return true
		})
	slices.SortFunc(out.Nodes, func(a, b NodeHistory) int { return cmp.Compare(a.Node, b.Node) })
}

func sanitizeSamples(in []Sample, since time.Time) []Sample {
	if len(in) > MaxHistorySamples {
		in = in[len(in)-MaxHistorySamples:]
	}
	out := make([]Sample, 0, len(in))
	for _, s := range in {
		if s.At.IsZero() || !s.At.After(since) {
			continue
		}
		if len(s.Calls) > MaxSampleKeys {
			s.Calls = s.Calls[:MaxSampleKeys]
		}
		for i := range s.Calls {
			s.Calls[i].Destination = transport.RedactURL(s.Calls[i].Destination)
		}
		s.Shards = nil
		out = append(out, s)
	}
	return out
}
