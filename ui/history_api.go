package ui

import (
	"cmp"
	"context"
	"net/http"
	"slices"
	"sync"

	"fusebox/transport/outbound"
)

// NodeHistory is one node's samples, oldest first.
type NodeHistory struct {
	Node    string   `json:"node"`
	Samples []Sample `json:"samples"`
}

// HistoryList is GET /ui/api/history: this node's samples (scope local) or
// every reachable alive member's (scope cluster), for the page's plots of
// calls and failures per destination and of shard ownership over time.
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
	out := HistoryList{Node: h.deps.NodeID, Nodes: []NodeHistory{}}
	if hist := h.deps.History; hist != nil {
		out.IntervalSeconds = hist.Every().Seconds()
	}
	switch scope := r.URL.Query().Get("scope"); scope {
	case "", "local":
		out.Scope = "local"
		out.Nodes = append(out.Nodes, h.localHistory())
	case "cluster":
		out.Scope = "cluster"
		h.clusterHistory(r.Context(), &out)
	default:
		writeError(w, http.StatusBadRequest, "invalid_argument", "scope="+jsonQuote(scope)+": want local or cluster")
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, out)
}

func (h *Handler) localHistory() NodeHistory {
	out := NodeHistory{Node: h.deps.NodeID, Samples: []Sample{}}
	if h.deps.History != nil {
		out.Samples = h.deps.History.Samples()
	}
	return out
}

// clusterHistory asks every alive member for its local history in
// parallel (PeerTimeout each), as clusterTransitions does. A peer's answer
// is untrusted: it is tagged with the member id asked, at most
// MaxHistorySamples samples of at most MaxSampleKeys keys are taken, its
// destinations are redacted again, samples without a time are dropped, and
// its shard owners are left out (this node's replica has the same map).
func (h *Handler) clusterHistory(ctx context.Context, out *HistoryList) {
	if h.deps.Members == nil {
		out.Nodes = append(out.Nodes, h.localHistory())
		return
	}
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	for _, m := range h.deps.Members.Members() {
		if m.State != "alive" {
			continue
		}
		if m.ID == h.deps.NodeID {
			local := h.localHistory()
			mu.Lock()
			out.Nodes = append(out.Nodes, local)
			mu.Unlock()
			continue
		}
		if h.deps.Peers == nil {
			mu.Lock()
			out.Unreachable = append(out.Unreachable, m.ID)
			mu.Unlock()
			continue
		}
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, PeerTimeout)
			defer cancel()
			var list HistoryList
			err := h.deps.Peers(m.HTTPAddr).Do(cctx, http.MethodGet, Prefix+"api/history", nil, nil, &list)
			mu.Lock()
			defer mu.Unlock()
			if err != nil || len(list.Nodes) == 0 {
				h.log.Debug("peer history unavailable", "peer", m.ID, "addr", m.HTTPAddr, "err", err)
				out.Unreachable = append(out.Unreachable, m.ID)
				return
			}
			out.Nodes = append(out.Nodes, NodeHistory{Node: m.ID, Samples: sanitizeSamples(list.Nodes[0].Samples)})
		})
	}
	wg.Wait()
	slices.SortFunc(out.Nodes, func(a, b NodeHistory) int { return cmp.Compare(a.Node, b.Node) })
	slices.Sort(out.Unreachable)
}

func sanitizeSamples(in []Sample) []Sample {
	if len(in) > MaxHistorySamples {
		in = in[len(in)-MaxHistorySamples:]
	}
	out := make([]Sample, 0, len(in))
	for _, s := range in {
		if s.At.IsZero() {
			continue
		}
		if len(s.Calls) > MaxSampleKeys {
			s.Calls = s.Calls[:MaxSampleKeys]
		}
		for i := range s.Calls {
			s.Calls[i].Destination = outbound.RedactURL(s.Calls[i].Destination)
		}
		s.Shards = nil
		out = append(out, s)
	}
	return out
}
