package raftstore

import (
	"slices"
	"sort"
	"time"

	"github.com/hashicorp/raft"
)

// Leader reconciliation, cut in two: planReconcile decides (pure: a Raft
// configuration, a membership view, the clock and the term's bookkeeping
// in; steps out) and Store.reconcile (leader.go) carries the steps out one
// Raft configuration change at a time, stopping at the first failure. Each
// of the three phases is a function of its own. Why not hashicorp's
// raft-autopilot: see DESIGN.md, "Leader reconcile".

// reconcileState is leader-local bookkeeping, reset every term.
type reconcileState struct {
	nonvoterSince map[string]time.Time // first seen as an alive non-voter
	failedSince   map[string]time.Time // first seen failed or missing
	// unreachable are the servers the leader's heartbeats fail to, from the
	// first failure of the streak, once a second failure confirmed it (see
	// failing); until raft reports them resumed or the failures stop:
	// gossip can call a server alive whose Raft port nobody reaches (a
	// firewall, a certificate another CA issued, a member that holds the
	// gossip key and nothing else).
	unreachable map[string]time.Time
	// failing are the servers with a heartbeat failure (raft's
	// FailedHeartbeatObservation) that raft has not reported resumed.
	//
	// One failure is not enough to call a server unreachable, and a failure
	// is not forever. Raft reports a failure for every failed heartbeat and
	// a resume only when a later heartbeat of the same replication
	// succeeds. A replication that ends (the server removed, this node
	// stepping down) stops its heartbeat goroutine only once the call it is
	// blocked in returns: a dial to a server cut off the network returns
	// after the transport's 10 s timeout, and its failure is reported then,
	// however long after the end, and never answered by a resume. A leader
	// that had removed such a server and added it back in the meantime took
	// that failure for the new replication, which never fails: the server
	// stayed unreachable for the whole term, never promoted and, in node/,
	// out of shard placement (TestLateHeartbeatFailureOfEndedReplication;
	// e2e TestPartitionedOwnerStopsCalling/leader found it: a leader cut
	// off the network and healed stayed a non-voter with no shards).
	// A replication that keeps failing reports a failure at least every
	// failWindow, so a streak needs two failures to count, and ends with no
	// failure for failWindow (expire).
	failing    map[string]failStreak
	failWindow time.Duration
	// foreign are the members left out as another cluster's (their
	// cluster id), logged once per term and again when it changes.
	foreign map[string]string
}

// failStreak is a server's heartbeat failures not answered by a resume.
type failStreak struct {
	first, last time.Time
	n           int
}

// newReconcileState starts a term's bookkeeping; failWindow bounds the time
// between two failures of one failing replication (failWindowFor).
func newReconcileState(failWindow time.Duration) *reconcileState {
	return &reconcileState{nonvoterSince: map[string]time.Time{}, failedSince: map[string]time.Time{},
		unreachable: map[string]time.Time{}, failing: map[string]failStreak{}, failWindow: failWindow, foreign: map[string]string{}}
}

// failWindowFor is the longest a replication that keeps failing goes
// between two reported failures: its heartbeat waits up to HeartbeatTimeout/2
// of back-off and HeartbeatTimeout/10 of interval, then a call that can
// take the transport's timeout twice (a dial, then the I/O deadline).
func failWindowFor(heartbeat time.Duration) time.Duration {
	return 2*raftTransportTimeout + heartbeat
}

// observe records a heartbeat observation; it reports whether the server's
// reachability changed (for the log).
func (rs *reconcileState) observe(o any, now time.Time) (id string, unreachable, changed bool) {
	switch o := o.(type) {
	case raft.FailedHeartbeatObservation:
		id = string(o.PeerID)
		st, ok := rs.failing[id]
		if !ok || now.Sub(st.last) > rs.failWindow {
			st = failStreak{first: now}
		}
		st.n++
		st.last = now
		rs.failing[id] = st
		if st.n < 2 {
			_, unreachable = rs.unreachable[id]
			return id, unreachable, false
		}
		if _, ok := rs.unreachable[id]; ok {
			return id, true, false
		}
		rs.unreachable[id] = st.first
		return id, true, true
	case raft.ResumedHeartbeatObservation:
		id = string(o.PeerID)
		delete(rs.failing, id)
		if _, ok := rs.unreachable[id]; !ok {
			return id, false, false
		}
		delete(rs.unreachable, id)
		return id, false, true
	}
	return "", false, false
}

// expire ends the streaks with no failure for failWindow, and returns the
// servers that were unreachable by them.
func (rs *reconcileState) expire(now time.Time) []string {
	var out []string
	for id, st := range rs.failing {
		if now.Sub(st.last) <= rs.failWindow {
			continue
		}
		delete(rs.failing, id)
		if _, ok := rs.unreachable[id]; ok {
			delete(rs.unreachable, id)
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

// forgetHeartbeats drops what the heartbeats said of id: its replication
// starts afresh (added again, or moved to another address).
func (rs *reconcileState) forgetHeartbeats(id string) {
	delete(rs.unreachable, id)
	delete(rs.failing, id)
}

// reconcileInput is what one pass decides from.
type reconcileInput struct {
	Self          string
	ClusterID     string        // this cluster's (the state's), "" before the first leader set it
	Servers       []raft.Server // the committed configuration
	Members       []Member      // the gossip view
	VoterTarget   int           // 0: 3, or 5 once 5 members are alive
	ReapTimeout   time.Duration // failed or missing this long: removed
	Stabilization time.Duration // alive non-voter this long: promoted
}

type stepKind uint8

const (
	stepRemove        stepKind = iota + 1 // RemoveServer
	stepHoldVoter                         // a removal refused: it would break quorum (logged only)
	stepUpdateAddress                     // same id, new Raft address, suffrage kept
	stepAddNonvoter                       // AddNonvoter
	stepPromote                           // AddVoter of a non-voter
	stepForeign                           // a member of another cluster left out (logged only)
)

// reconcileStep is one configuration change (or one refusal to log).
type reconcileStep struct {
	Kind   stepKind
	Server raft.Server // for stepUpdateAddress, Address is the new one
	From   raft.ServerAddress
	// Member is the gossip view of the server (Known false: gossip has
	// never heard of it, or forgot it).
	Member Member
	Known  bool
	// Voters and LiveVoters are the counts a stepHoldVoter was refused on.
	Voters, LiveVoters int
}

// reconcilePlan is the running picture one pass builds: the configuration
// as it will be once the steps before have committed.
type reconcilePlan struct {
	in         reconcileInput
	rs         *reconcileState
	now        time.Time
	members    map[string]Member
	inConfig   map[string]raft.Server
	voters     int
	liveVoters int
	steps      []reconcileStep
}

// planReconcile makes the Raft configuration follow membership: remove left
// servers at once and failed or missing ones after ReapTimeout (never this
// node, never below a quorum of live voters), add alive members as
// non-voters (or move a known one to its new address), and promote
// non-voters alive for Stabilization up to the voter target. It updates rs's
// observations (first seen failed, first seen as a non-voter); the executor
// forgets a server once its removal or promotion committed.
func planReconcile(in reconcileInput, rs *reconcileState, now time.Time) []reconcileStep {
	p := &reconcilePlan{in: in, rs: rs, now: now, members: map[string]Member{}, inConfig: map[string]raft.Server{}}
	seen := map[string]bool{}
	for _, m := range in.Members {
		if m.Foreign(in.ClusterID) {
			// Another cluster's: as if gossip did not know it. It is not
			// added (nor moved to its address, for a server of ours of the
			// same name), and a server of ours that now says so is reaped
			// as a missing one.
			seen[m.ID] = true
			if rs.foreign[m.ID] != m.ClusterID {
				rs.foreign[m.ID] = m.ClusterID
				p.steps = append(p.steps, reconcileStep{Kind: stepForeign, Member: m, Known: true})
			}
			continue
		}
		p.members[m.ID] = m
	}
	for id := range rs.foreign {
		if !seen[id] {
			delete(rs.foreign, id)
		}
	}
	for _, sv := range in.Servers {
		p.inConfig[string(sv.ID)] = sv
		if sv.Suffrage == raft.Voter {
			p.voters++
			if p.live(string(sv.ID)) {
				p.liveVoters++
			}
		}
	}
	for id := range rs.failing {
		if _, ok := p.inConfig[id]; !ok {
			rs.forgetHeartbeats(id) // out of the configuration: re-added, it starts afresh
		}
	}
	for id := range rs.unreachable {
		if _, ok := p.inConfig[id]; !ok {
			rs.forgetHeartbeats(id)
		}
	}
	p.removals()
	p.additions()
	p.promotions()
	return p.steps
}

// live: this node, or a member gossip does not consider failed or gone.
func (p *reconcilePlan) live(id string) bool {
	if id == p.in.Self {
		return true
	}
	m, ok := p.members[id]
	return ok && (m.Status == MemberAlive || m.Status == MemberSuspect)
}

// voterTarget is the configured target, else 3, or 5 once 5 are alive.
func (p *reconcilePlan) voterTarget() int {
	if p.in.VoterTarget > 0 {
		return p.in.VoterTarget
	}
	alive := 0
	for _, m := range p.members {
		if m.Status == MemberAlive && m.RaftAddr != "" {
			alive++
		}
	}
	if alive >= 5 {
		return 5
	}
	return 3
}

// removals: left servers at once, failed or unknown ones after ReapTimeout,
// in id order for stable logs; a voter only while a quorum of live voters
// remains.
func (p *reconcilePlan) removals() {
	servers := slices.Clone(p.in.Servers)
	sort.Slice(servers, func(i, j int) bool { return servers[i].ID < servers[j].ID })
	for _, sv := range servers {
		id := string(sv.ID)
		if id == p.in.Self || !p.dueForRemoval(id) {
			continue
		}
		m, known := p.members[id]
		if sv.Suffrage == raft.Voter {
			after, lv := p.voters-1, p.liveVoters
			if p.live(id) {
				lv--
			}
			if lv < after/2+1 {
				p.steps = append(p.steps, reconcileStep{Kind: stepHoldVoter, Server: sv, Member: m, Known: known, Voters: p.voters, LiveVoters: p.liveVoters})
				continue
			}
			p.voters--
			if p.live(id) {
				p.liveVoters--
			}
		}
		p.steps = append(p.steps, reconcileStep{Kind: stepRemove, Server: sv, Member: m, Known: known})
		delete(p.inConfig, id)
	}
}

// dueForRemoval: left, or failed/unknown for ReapTimeout (the clock starts
// the first pass that sees it so, and stops when it is seen alive again).
func (p *reconcilePlan) dueForRemoval(id string) bool {
	m, known := p.members[id]
	switch {
	case known && m.Status == MemberLeft:
		return true
	case !known || m.Status == MemberFailed:
		since, ok := p.rs.failedSince[id]
		if !ok {
			p.rs.failedSince[id] = p.now
			since = p.now
		}
		return p.now.Sub(since) >= p.in.ReapTimeout
	default:
		delete(p.rs.failedSince, id)
		return false
	}
}

// additions: every alive member with a Raft address joins as a non-voter;
// one already in the configuration under another address is moved.
func (p *reconcilePlan) additions() {
	ids := make([]string, 0, len(p.members))
	for id := range p.members {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		m := p.members[id]
		if m.Status != MemberAlive || m.RaftAddr == "" {
			continue
		}
		if sv, ok := p.inConfig[id]; ok {
			if string(sv.Address) != m.RaftAddr && id != p.in.Self {
				moved := sv
				moved.Address = raft.ServerAddress(m.RaftAddr)
				p.steps = append(p.steps, reconcileStep{Kind: stepUpdateAddress, Server: moved, From: sv.Address, Member: m, Known: true})
			}
			continue
		}
		sv := raft.Server{ID: raft.ServerID(id), Address: raft.ServerAddress(m.RaftAddr), Suffrage: raft.Nonvoter}
		p.steps = append(p.steps, reconcileStep{Kind: stepAddNonvoter, Server: sv, Member: m, Known: true})
		p.inConfig[id] = sv
	}
}

// promotions: alive non-voters the leader's heartbeats reach, once both
// have held for Stabilization, in id order, until the voter target is
// reached. Gossip alone is not enough: promoting a server whose Raft port
// the leader cannot reach raises the quorum without adding a vote (a lone
// node that promoted one lost its quorum, and its leader, at once), as
// Consul's autopilot promotes only servers it finds healthy.
func (p *reconcilePlan) promotions() {
	var candidates []string
	for id, sv := range p.inConfig {
		m, ok := p.members[id]
		_, unreachable := p.rs.unreachable[id]
		if sv.Suffrage == raft.Voter || !ok || m.Status != MemberAlive || unreachable {
			delete(p.rs.nonvoterSince, id)
			continue
		}
		if _, ok := p.rs.nonvoterSince[id]; !ok {
			p.rs.nonvoterSince[id] = p.now
		}
		candidates = append(candidates, id)
	}
	sort.Strings(candidates)
	voters, target := p.voters, p.voterTarget()
	for _, id := range candidates {
		if voters >= target {
			return
		}
		if p.now.Sub(p.rs.nonvoterSince[id]) < p.in.Stabilization {
			continue
		}
		sv := p.inConfig[id]
		sv.Suffrage = raft.Voter
		p.steps = append(p.steps, reconcileStep{Kind: stepPromote, Server: sv, Member: p.members[id], Known: true})
		voters++
	}
}
