package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"time"

	"fusebox/api"
	"fusebox/breakerpool"
	"fusebox/transport/transporttest"
	"fusebox/ui"
)

// maxEvents bounds the breaker events kept for the summary.
const maxEvents = 500

// nodeView is one node as the view shows it.
type nodeView struct {
	ID       string
	HTTPAddr string
	Running  bool   // the process is alive
	Gossip   string // alive, dead, left, or "?" when no member list
	Role     string // Raft suffrage: voter, nonvoter, none
	State    string // Raft state as the node reports it: Leader, Follower, …
	Leader   bool
	Applied  uint64
	Shards   int
	Pending  int // fusebox_queue_depth over the node's shards
	Err      string
	metrics  scrape
}

// breakerView is one breaker of one node.
type breakerView struct {
	Node, Destination    string
	State, Source, Mode  string
	ConsecutiveFailures  uint32
	OpenRemainingSeconds float64
	// Ramp, while the key's recovery ramp is under way on that node (issue 19 §2).
	Ramp *api.BreakerRamp
	// Confirm is the confirm hint policy's latest round for the key on that
	// node (who reported, who checked), if any.
	Confirm *api.BreakerConfirm
	// RetryAfterUntil is the destination's Retry-After deadline holding the
	// breaker open, Fleet the key's fleet rate budget on that node, Health
	// the node's last active health check of the destination (fleet.go).
	RetryAfterUntil *time.Time
	Fleet           *api.BreakerFleet
	Health          *api.BreakerHealth
	settings        breakerpool.Settings
	hasSettings     bool
}

// destView is one destination.
type destView struct {
	Name       string
	Mode       string
	Received   int     // Nexus start requests its server handled
	Delivered  int     // distinct tasks it answered 200
	PerSec     float64 // Delivered per second over the last refresh
	Duplicates int     // 200 answers beyond a task's first
	Submitted  int     // tasks the workload submitted for it
}

// event is a breaker change the observer saw between two refreshes.
type event struct {
	At   time.Duration // since the workload started
	Node string
	Dest string
	What string // "closed→open (local)", "guarded (hint)", …
}

func (e event) String() string {
	return fmt.Sprintf("%s %s %s %s", fmtT(e.At), e.Node, e.Dest, e.What)
}

// snapshot is one refresh of everything the view shows.
type snapshot struct {
	At          time.Duration // since the workload started
	Nodes       []nodeView
	Leader      string
	Breakers    []breakerView
	Unreachable []string
	Dests       []destView
	Pending     int
	Workload    workloadStats
	Outage      outageView
	Events      []event // the newest few
	// Trips says, per node, where its flaky breaker's openings came from.
	Trips []nodeTrips
	// Fleet is the fleet features' trace: the Retry-After hold, healthy's
	// rate budget, flaky's health checks (fleet.go).
	Fleet fleetView
	Err   string // the last observation error, if any
}

// observer polls the cluster and the destinations. It is used from one
// goroutine (the demo's main loop) only.
type observer struct {
	cl    *cluster
	dests map[string]*deliveries
	hc    *http.Client

	lastAt        time.Duration
	lastDelivered map[string]int
	prev          map[[2]string]breakerView // (node, destination)
	events        []event
	trips         *trips
}

func newObserver(cl *cluster, dests map[string]*transporttest.Destination) *observer {
	o := &observer{cl: cl, dests: map[string]*deliveries{}, hc: cl.hc, lastDelivered: map[string]int{}, prev: map[[2]string]breakerView{}, trips: newTrips()}
	for name, d := range dests {
		o.dests[name] = newDeliveries(d)
	}
	return o
}

// observe takes one snapshot at `at` (time since the workload started).
// Every call is bounded by apiTimeout; what does not answer is shown as such.
func (o *observer) observe(ctx context.Context, at time.Duration) snapshot {
	s := snapshot{At: at}
	s.Nodes = make([]nodeView, len(o.cl.nodes))
	var wg sync.WaitGroup
	for i, p := range o.cl.nodes {
		s.Nodes[i] = nodeView{ID: p.id, HTTPAddr: p.httpAddr, Running: p.running(), Gossip: "?", Role: "?"}
		if !s.Nodes[i].Running {
			s.Nodes[i].Err = "process exited"
			continue
		}
		wg.Go(func() { o.observeNode(ctx, i, &s.Nodes[i]) })
	}
	var (
		members []api.Member
		shards  api.ShardList
		brk     api.BreakerList
		tl      ui.TransitionList
		errs    [4]error
	)
	wg.Go(func() {
		errs[0] = o.cl.call(ctx, 0, func(ctx context.Context, c *api.Client) (err error) {
			members, err = c.Members(ctx)
			return err
		})
	})
	wg.Go(func() {
		errs[1] = o.cl.call(ctx, 0, func(ctx context.Context, c *api.Client) (err error) {
			shards, err = c.Shards(ctx)
			return err
		})
	})
	wg.Go(func() {
		errs[2] = o.cl.call(ctx, 0, func(ctx context.Context, c *api.Client) error {
			return c.Do(ctx, http.MethodGet, "/v1/breakers", map[string][]string{"scope": {"cluster"}}, nil, &brk)
		})
	})
	wg.Go(func() {
		tl, errs[3] = fetchTimeline(ctx, o.cl)
	})
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			s.Err = err.Error()
		}
	}
	o.mergeMembers(&s, members, shards)
	o.mergeBreakers(&s, brk, errs[2])
	if errs[3] == nil {
		o.trips.update(tl, time.Now().Add(-at))
	}
	s.Trips = o.trips.view(s.Breakers)
	o.observeDests(&s)
	for _, n := range s.Nodes {
		s.Pending += n.Pending
	}
	s.Events = o.lastEvents(8)
	return s
}

func (o *observer) observeNode(ctx context.Context, i int, v *nodeView) {
	c := o.cl.clients[i]
	cctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	info, err := c.Raft(cctx)
	if err != nil {
		v.Err = err.Error()
		return
	}
	v.State, v.Applied = info.State, info.AppliedIndex
	m, err := fetchMetrics(cctx, o.hc, c.Addr(), metricQueueDepth, metricBreakerRequests, metricBreakerTransitions, metricHealthChecks)
	if err != nil {
		v.Err = err.Error()
		return
	}
	v.metrics = m
	v.Pending = int(m.sum(metricQueueDepth, nil))
}

func (o *observer) mergeMembers(s *snapshot, members []api.Member, shards api.ShardList) {
	owned := map[string]int{}
	for _, sh := range shards.Shards {
		if sh.Owner != "" {
			owned[sh.Owner]++
		}
	}
	byID := map[string]api.Member{}
	for _, m := range members {
		byID[m.ID] = m
		if m.Leader {
			s.Leader = m.ID
		}
	}
	for i := range s.Nodes {
		n := &s.Nodes[i]
		if m, ok := byID[n.ID]; ok {
			n.Gossip, n.Role, n.Leader = m.State, m.RaftRole, m.Leader
		}
		n.Shards = owned[n.ID]
	}
}

func (o *observer) mergeBreakers(s *snapshot, brk api.BreakerList, err error) {
	s.Unreachable = brk.Unreachable
	for _, b := range brk.Breakers {
		v := breakerView{
			Node: b.Node, Destination: b.Destination, State: b.State, Source: b.Source, Mode: b.Mode,
			ConsecutiveFailures: b.Counts.ConsecutiveFailures, OpenRemainingSeconds: b.OpenRemainingSeconds, Ramp: b.Ramp, Confirm: b.Confirm,
			RetryAfterUntil: b.RetryAfterUntil, Fleet: b.Fleet, Health: b.Health,
		}
		if len(b.Settings) > 0 && json.Unmarshal(b.Settings, &v.settings) == nil {
			v.hasSettings = true
		}
		s.Breakers = append(s.Breakers, v)
	}
	sort.Slice(s.Breakers, func(i, j int) bool {
		a, b := s.Breakers[i], s.Breakers[j]
		if a.Destination != b.Destination {
			return a.Destination > b.Destination // healthy before flaky
		}
		return a.Node < b.Node
	})
	if err != nil {
		return // no answer: keep the previous states, record nothing
	}
	seen := map[[2]string]bool{}
	for _, b := range s.Breakers {
		k := [2]string{b.Node, b.Destination}
		seen[k] = true
		p, had := o.prev[k]
		switch {
		case !had:
			if b.State != "closed" || b.Mode != "auto" {
				o.addEvent(s.At, b, "appeared "+describe(b))
			}
		case p.State != b.State:
			o.addEvent(s.At, b, p.State+"→"+describe(b))
		case p.Mode != b.Mode:
			o.addEvent(s.At, b, "mode "+p.Mode+"→"+b.Mode+" ("+b.Source+")")
		}
		o.prev[k] = b
	}
	for k := range o.prev {
		if !seen[k] && !containsString(s.Unreachable, k[0]) {
			delete(o.prev, k) // evicted
		}
	}
}

func describe(b breakerView) string {
	d := b.State + " (" + b.Source
	if b.Mode != "auto" {
		d += ", " + b.Mode
	}
	return d + ")"
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func (o *observer) addEvent(at time.Duration, b breakerView, what string) {
	o.events = append(o.events, event{At: at, Node: b.Node, Dest: b.Destination, What: what})
	if len(o.events) > maxEvents {
		o.events = append(o.events[:0], o.events[len(o.events)-maxEvents:]...)
	}
}

func (o *observer) lastEvents(n int) []event {
	if len(o.events) > n {
		return append([]event(nil), o.events[len(o.events)-n:]...)
	}
	return append([]event(nil), o.events...)
}

func (o *observer) observeDests(s *snapshot) {
	dt := (s.At - o.lastAt).Seconds()
	for _, name := range []string{destHealthy, destFlaky} {
		d := o.dests[name]
		d.update()
		n := d.Delivered()
		v := destView{Name: name, Mode: d.dst.Mode().String(), Received: d.received, Delivered: n, Duplicates: d.dups}
		if dt > 0 {
			v.PerSec = float64(n-o.lastDelivered[name]) / dt
		}
		o.lastDelivered[name] = n
		s.Dests = append(s.Dests, v)
	}
	o.lastAt = s.At
}

// flakyCounts reads node's flaky breaker counters from a scrape.
func flakyCounts(m scrape) flakyCount {
	return flakyCount{
		failures:  m.sum(metricBreakerRequests, map[string]string{"destination": destFlaky, "outcome": "failure"}),
		rejected:  m.sum(metricBreakerRequests, map[string]string{"destination": destFlaky, "outcome": "rejected"}),
		successes: m.sum(metricBreakerRequests, map[string]string{"destination": destFlaky, "outcome": "success"}),
		// Only flaky has a health check.
		health: m.sum(metricHealthChecks, nil),
	}
}

// flakyByNode scrapes every running node now and returns its flaky
// counters; a node that does not answer is left out.
func (o *observer) flakyByNode(ctx context.Context) map[string]flakyCount {
	var mu sync.Mutex
	out := map[string]flakyCount{}
	var wg sync.WaitGroup
	for i, p := range o.cl.nodes {
		if !p.running() {
			continue
		}
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, apiTimeout)
			defer cancel()
			m, err := fetchMetrics(cctx, o.hc, o.cl.clients[i].Addr(), metricBreakerRequests, metricHealthChecks)
			if err != nil {
				return
			}
			mu.Lock()
			out[p.id] = flakyCounts(m)
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}

// nodeFlaky returns the flaky counters of the nodes a snapshot scraped.
func nodeFlaky(s snapshot) map[string]flakyCount {
	out := map[string]flakyCount{}
	for _, n := range s.Nodes {
		if n.metrics != nil {
			out[n.ID] = flakyCounts(n.metrics)
		}
	}
	return out
}

// fmtT formats a time since the workload start: "t+12.3s".
func fmtT(d time.Duration) string {
	return fmt.Sprintf("t+%.1fs", d.Seconds())
}

// receivedIn returns how many Nexus start requests dest's server handled
// in mode, tallied now.
func (o *observer) receivedIn(dest string, mode transporttest.Mode) int {
	d := o.dests[dest]
	d.update()
	return d.byMode[mode]
}

// receivedDown returns how many Nexus start requests dest's server
// handled while failing on purpose, tallied now.
func (o *observer) receivedDown(dest string) int {
	d := o.dests[dest]
	d.update()
	return d.down
}
