package api

import (
	"context"
	"encoding/json"
	"net/http"
	"sort"
	"sync"
	"time"

	"fusebox/breakerpool"
	"fusebox/raftstore"
	"fusebox/raftstore/state"
	"fusebox/transport"
)

// peerTimeout bounds each node's answer to a cluster-scope breaker list.
const peerTimeout = 3 * time.Second

// maxForceDuration bounds a forced open.
const maxForceDuration = 7 * 24 * time.Hour

func (s *Server) breakerRoutes() {
	s.handle("GET /v1/breakers", needRead, s.breakerList)
	if s.deps.Store != nil {
		s.handle("GET /v1/breakers/forced", needRead, s.breakerForcedList)
		s.handle("POST /v1/breakers/force", needAdmin, s.breakerForce)
	}
}

func stateName(code int) string {
	switch code {
	case 0:
		return "closed"
	case 1:
		return "half-open"
	case 2:
		return "open"
	}
	return "unknown"
}

func toBreaker(st breakerpool.Status) Breaker {
	settings, _ := json.Marshal(st.Settings)
	var retryUntil *time.Time
	if ru := st.RetryAfterUntil; ru != nil && ru.After(time.Now()) {
		u := ru.UTC()
		retryUntil = &u
	}
	return Breaker{
		RetryAfterUntil: retryUntil,
		TaskGroup:       st.Key.TaskGroup, Namespace: st.Key.NamespaceID, Destination: transport.RedactURL(st.Key.Destination),
		State: stateName(int(st.State)), StateCode: int(st.State),
		Counts: BreakerCounts{
			Requests: st.Counts.Requests, TotalSuccesses: st.Counts.TotalSuccesses, TotalFailures: st.Counts.TotalFailures,
			ConsecutiveSuccesses: st.Counts.ConsecutiveSuccesses, ConsecutiveFailures: st.Counts.ConsecutiveFailures,
		},
		Generation: st.Generation, Source: string(st.Source), Mode: string(st.Mode),
		OpenRemainingSeconds: st.OpenRemaining.Seconds(), Settings: settings, HintPolicy: string(st.Settings.HintPolicy),
	}
}

func (s *Server) localBreakers() []Breaker {
	out := []Breaker{}
	sts := s.deps.Breakers.List()
	for _, st := range sts {
		b := toBreaker(st)
		if s.deps.Ramps != nil {
			if r, ok := s.deps.Ramps.Ramp(st.Key); ok {
				b.Ramp = &r
			}
		}
		if s.deps.Fleet != nil {
			if f, ok := s.deps.Fleet.Fleet(st.Key); ok {
				b.Fleet = &f
			}
		}
		out = append(out, b)
	}
	s.withConfirm(out, sts)
	s.withHealth(out, sts)
	return out
}

func (s *Server) breakerList(w http.ResponseWriter, r *http.Request) error {
	switch scope := r.URL.Query().Get("scope"); scope {
	case "", "local":
		writeJSON(w, http.StatusOK, BreakerList{Scope: "local", Breakers: s.localBreakers()})
		return nil
	case "cluster":
		writeJSON(w, http.StatusOK, s.clusterBreakers(r.Context()))
		return nil
	default:
		return BadField("scope", "scope=%q: want local or cluster", scope)
	}
}

// clusterBreakers asks every alive or suspect member for its local breakers,
// in parallel, each bounded by peerTimeout. A member gossip reports failed
// is not asked and is listed unreachable with those that did not answer: a
// node cut off the network is not silently missing from the view.
func (s *Server) clusterBreakers(ctx context.Context) BreakerList {
	out := BreakerList{Scope: "cluster", Breakers: []Breaker{}}
	if s.deps.Members == nil || s.deps.Peers == nil {
		return out
	}
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	for _, m := range s.deps.Members.Members() {
		switch m.State {
		case "alive", "suspect":
		case "dead":
			out.Unreachable = append(out.Unreachable, m.ID)
			continue
		default: // left
			continue
		}
		wg.Add(1)
		go func(m Member) {
			defer wg.Done()
			var list BreakerList
			cctx, cancel := context.WithTimeout(ctx, peerTimeout)
			defer cancel()
			err := s.deps.Peers(m.HTTPAddr).Do(cctx, http.MethodGet, "/v1/breakers", nil, nil, &list)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				out.Unreachable = append(out.Unreachable, m.ID)
				return
			}
			for _, b := range list.Breakers {
				b.Node = m.ID
				b.Destination = transport.RedactURL(b.Destination) // a peer of an older version may not redact
				out.Breakers = append(out.Breakers, b)
			}
		}(m)
	}
	wg.Wait()
	sort.Slice(out.Breakers, func(i, j int) bool {
		a, b := out.Breakers[i], out.Breakers[j]
		if a.TaskGroup+a.Namespace+a.Destination != b.TaskGroup+b.Namespace+b.Destination {
			return a.TaskGroup+"\x00"+a.Namespace+"\x00"+a.Destination < b.TaskGroup+"\x00"+b.Namespace+"\x00"+b.Destination
		}
		return a.Node < b.Node
	})
	sort.Strings(out.Unreachable)
	return out
}

// toForced renders a forced breaker with the key it applies to: a row
// stored with a full callback URL (before callback keys were
// scheme://host) shows, and applies to, its host.
func toForced(f state.ForcedBreaker) ForcedBreaker {
	return ForcedBreaker{TaskGroup: f.TaskGroup, Namespace: f.NamespaceID,
		Destination: transport.RedactURL(transport.BreakerDestination(f.TaskGroup, f.Destination)), Mode: f.Mode,
		Until: f.Until, Reason: f.Reason, Index: f.Index, Author: f.Author}
}

func (s *Server) breakerForcedList(w http.ResponseWriter, r *http.Request) error {
	out := []ForcedBreaker{}
	for _, f := range s.deps.State.ForcedBreakers() {
		out = append(out, toForced(f))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) breakerForce(w http.ResponseWriter, r *http.Request) error {
	var in BreakerForce
	if err := s.readJSON(w, r, &in); err != nil {
		return err
	}
	switch {
	case in.TaskGroup == "":
		return BadField("task_group", "missing task_group")
	case raftstore.ValidateTaskGroup(in.TaskGroup) != nil:
		return BadField("task_group", "%s", raftstore.ValidateTaskGroup(in.TaskGroup).Message)
	case in.Destination == "":
		return BadField("destination", "missing destination")
	}
	meta := s.meta(r)
	// A callback breaker is keyed by scheme://host[:port]: a full callback
	// URL given here forces the breaker of its host, and only the key is
	// stored (no path or query secret reaches the forced-breaker table).
	cmd := state.ForceBreakerCommand{CommandMeta: meta, TaskGroup: in.TaskGroup, NamespaceID: in.Namespace,
		Destination: transport.BreakerDestination(in.TaskGroup, in.Destination), Reason: in.Reason}
	switch in.Mode {
	case "open":
		cmd.Mode = state.ForceOpen
	case "closed":
		cmd.Mode = state.ForceClosed
	case "auto":
		cmd.Mode = state.ForceAuto
	default:
		return BadField("mode", "mode %q: want open, closed or auto", in.Mode)
	}
	if in.Duration != "" {
		if cmd.Mode != state.ForceOpen {
			return BadField("duration", "duration applies only to mode open")
		}
		d, err := time.ParseDuration(in.Duration)
		if err != nil || d <= 0 || d > maxForceDuration {
			return BadField("duration", "duration %q: want a positive Go duration up to %s", in.Duration, maxForceDuration)
		}
		cmd.Until = meta.At.Add(d)
	}
	if cmd.Mode == state.ForceAuto {
		if err := s.clearLegacyForced(r.Context(), cmd); err != nil {
			return err
		}
	}
	fb, idx, err := s.deps.Store.ForceBreaker(r.Context(), cmd)
	if err != nil {
		return err
	}
	s.waitApplied(r.Context(), idx)
	if cmd.Mode == state.ForceAuto {
		// The row is gone; answer with what was cleared.
		fb = state.ForcedBreaker{TaskGroup: cmd.TaskGroup, NamespaceID: cmd.NamespaceID, Destination: cmd.Destination,
			Mode: cmd.Mode, Reason: cmd.Reason, Author: meta.Author}
	}
	fb.Index = idx
	writeJSON(w, http.StatusOK, toForced(fb))
	return nil
}

// clearLegacyForced clears, with the key, the forced rows stored with a
// full callback URL of the same host (written before callback breakers were
// keyed by scheme://host), so "auto" on the host clears what applies to it.
func (s *Server) clearLegacyForced(ctx context.Context, cmd state.ForceBreakerCommand) error {
	for _, f := range s.deps.State.ForcedBreakers() {
		if f.TaskGroup != cmd.TaskGroup || f.NamespaceID != cmd.NamespaceID || f.Destination == cmd.Destination ||
			transport.BreakerDestination(f.TaskGroup, f.Destination) != cmd.Destination {
			continue
		}
		legacy := cmd
		legacy.RequestID = "" // its own command
		legacy.Destination = f.Destination
		if _, _, err := s.deps.Store.ForceBreaker(ctx, legacy); err != nil {
			return err
		}
	}
	return nil
}
