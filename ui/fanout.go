package ui

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"sync"
)

// fanOut is the cluster scope of a status-page read: it asks every alive or
// suspect member for path (with query) in parallel, each call bounded by
// PeerTimeout, and hands each answer (a T decoded from the peer's JSON) to
// add, which reports whether the answer was usable. This node's own part is
// read in process by local. add and local run under one lock, never
// concurrently. The members that could not be asked, did not answer, or
// answered something unusable are returned, sorted, with those gossip
// reports failed (not asked). A peer's answer is
// untrusted: add sanitises it.
func fanOut[T any](ctx context.Context, h *Handler, path string, query url.Values, local func(), add func(id string, answer T) bool) (unreachable []string) {
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	for _, m := range h.deps.Members.Members() {
		switch m.State {
		case "alive", "suspect":
		case "dead":
			mu.Lock()
			unreachable = append(unreachable, m.ID)
			mu.Unlock()
			continue
		default: // left
			continue
		}
		if m.ID == h.deps.NodeID {
			mu.Lock()
			local()
			mu.Unlock()
			continue
		}
		if h.deps.Peers == nil {
			mu.Lock()
			unreachable = append(unreachable, m.ID)
			mu.Unlock()
			continue
		}
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, PeerTimeout)
			defer cancel()
			var answer T
			err := h.deps.Peers(m.HTTPAddr).Do(cctx, http.MethodGet, Prefix+path, query, nil, &answer)
			mu.Lock()
			defer mu.Unlock()
			if err != nil || !add(m.ID, answer) {
				h.log.Debug("peer answer unavailable", "path", path, "peer", m.ID, "addr", m.HTTPAddr, "err", err)
				unreachable = append(unreachable, m.ID)
			}
		})
	}
	wg.Wait()
	slices.Sort(unreachable)
	return unreachable
}
