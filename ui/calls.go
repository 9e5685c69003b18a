package ui

import (
	"cmp"
	"context"
	"net/http"
	"slices"
	"sync"
	"time"

	"fusebox/transport/outbound"
)

// MaxCallKeys bounds the breaker keys one node reports in GET
// /ui/api/calls (the busiest by calls), and how many are taken from a peer.
const MaxCallKeys = 100

// requestsMetric is the breaker pool's per-key call counter
// (breakerpool/metrics.go): outcome success, failure or rejected.
const requestsMetric = "fusebox_breaker_requests_total"

// CallCount is one breaker key's calls on one node since its breaker was
// created: cumulative counters, which the page turns into calls per
// interval. A counter that goes down (an evicted breaker, a restarted
// node) starts again from zero.
type CallCount struct {
	TaskGroup   string `json:"task_group"`
	Namespace   string `json:"namespace"`
	Destination string `json:"destination"`
	Success     uint64 `json:"success"`
	Failure     uint64 `json:"failure"`
	Rejected    uint64 `json:"rejected"`
}

// NodeCalls is one node's call counters.
type NodeCalls struct {
	Node string      `json:"node"`
	Keys []CallCount `json:"keys"`
}

// CallList is GET /ui/api/calls: this node's call counters per breaker key
// (scope local), or every reachable alive member's (scope cluster).
type CallList struct {
	Scope       string      `json:"scope"`
	Node        string      `json:"node,omitempty"`
	At          time.Time   `json:"at"`
	Nodes       []NodeCalls `json:"nodes"`
	Unreachable []string    `json:"unreachable,omitempty"`
}

func (h *Handler) serveCalls(w http.ResponseWriter, r *http.Request) {
	var out CallList
	switch scope := r.URL.Query().Get("scope"); scope {
	case "", "local":
		out = CallList{Scope: "local", Node: h.deps.NodeID, At: time.Now().UTC(), Nodes: []NodeCalls{h.localCalls()}}
	case "cluster":
		out = h.clusterCalls(r.Context())
	default:
		writeError(w, http.StatusBadRequest, "invalid_argument", "scope="+jsonQuote(scope)+": want local or cluster")
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, out)
}

// localCalls reads this node's fusebox_breaker_requests_total from its
// registry (the same series /metrics shows, "_other" included).
func (h *Handler) localCalls() NodeCalls {
	out := NodeCalls{Node: h.deps.NodeID, Keys: []CallCount{}}
	if h.deps.Gatherer == nil {
		return out
	}
	mfs, err := h.deps.Gatherer.Gather()
	if err != nil && len(mfs) == 0 {
		h.log.Debug("gather for the call counts failed", "err", err)
		return out
	}
	type key struct{ tg, ns, dest string }
	by := map[key]*CallCount{}
	for _, mf := range mfs {
		if mf.GetName() != requestsMetric {
			continue
		}
		for _, m := range mf.GetMetric() {
			var k key
			var outcome string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "task_group":
					k.tg = l.GetValue()
				case "namespace":
					k.ns = l.GetValue()
				case "destination":
					k.dest = outbound.RedactURL(l.GetValue())
				case "outcome":
					outcome = l.GetValue()
				}
			}
			c, ok := by[k]
			if !ok {
				c = &CallCount{TaskGroup: k.tg, Namespace: k.ns, Destination: k.dest}
				by[k] = c
			}
			v := uint64(m.GetCounter().GetValue())
			switch outcome {
			case "success":
				c.Success += v
			case "failure":
				c.Failure += v
			case "rejected":
				c.Rejected += v
			}
		}
	}
	for _, c := range by {
		out.Keys = append(out.Keys, *c)
	}
	out.Keys = busiest(out.Keys)
	return out
}

// busiest orders keys by calls (then by key) and keeps MaxCallKeys.
func busiest(keys []CallCount) []CallCount {
	slices.SortFunc(keys, func(a, b CallCount) int {
		if c := cmp.Compare(b.Success+b.Failure+b.Rejected, a.Success+a.Failure+a.Rejected); c != 0 {
			return c
		}
		return cmp.Compare(a.TaskGroup+"/"+a.Namespace+"/"+a.Destination, b.TaskGroup+"/"+b.Namespace+"/"+b.Destination)
	})
	if len(keys) > MaxCallKeys {
		keys = keys[:MaxCallKeys]
	}
	return keys
}

// clusterCalls asks every alive member for its local counters in parallel
// (PeerTimeout each), as clusterTransitions does. A peer's answer is
// untrusted: it is re-tagged with the member id asked, its destinations
// redacted again, and at most MaxCallKeys taken.
func (h *Handler) clusterCalls(ctx context.Context) CallList {
	out := CallList{Scope: "cluster", Node: h.deps.NodeID, At: time.Now().UTC(), Nodes: []NodeCalls{}}
	if h.deps.Members == nil {
		out.Nodes = append(out.Nodes, h.localCalls())
		return out
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
			local := h.localCalls()
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
			var list CallList
			err := h.deps.Peers(m.HTTPAddr).Do(cctx, http.MethodGet, Prefix+"api/calls", nil, nil, &list)
			mu.Lock()
			defer mu.Unlock()
			if err != nil || len(list.Nodes) == 0 {
				h.log.Debug("peer call counts unavailable", "peer", m.ID, "addr", m.HTTPAddr, "err", err)
				out.Unreachable = append(out.Unreachable, m.ID)
				return
			}
			keys := list.Nodes[0].Keys
			if len(keys) > MaxCallKeys {
				keys = keys[:MaxCallKeys]
			}
			nc := NodeCalls{Node: m.ID, Keys: make([]CallCount, 0, len(keys))}
			for _, k := range keys {
				k.Destination = outbound.RedactURL(k.Destination)
				nc.Keys = append(nc.Keys, k)
			}
			out.Nodes = append(out.Nodes, nc)
		})
	}
	wg.Wait()
	slices.SortFunc(out.Nodes, func(a, b NodeCalls) int { return cmp.Compare(a.Node, b.Node) })
	slices.Sort(out.Unreachable)
	return out
}
