package raftstore

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// The planner alone: a configuration and a membership view in, steps out.
// TestNodeJoin*/reaping tests in cluster_test.go run the same rules on real
// Raft.

func voter(id string) raft.Server {
	return raft.Server{ID: raft.ServerID(id), Address: raft.ServerAddress(id + ":7000"), Suffrage: raft.Voter}
}

func nonvoter(id string) raft.Server {
	return raft.Server{ID: raft.ServerID(id), Address: raft.ServerAddress(id + ":7000"), Suffrage: raft.Nonvoter}
}

func member(id string, st MemberStatus) Member {
	return Member{ID: id, RaftAddr: id + ":7000", Status: st}
}

// render is a plan as one line a test can compare: "remove n2; add n4".
func render(steps []reconcileStep) string {
	names := map[stepKind]string{stepRemove: "remove", stepHoldVoter: "hold", stepUpdateAddress: "move", stepAddNonvoter: "add", stepPromote: "promote", stepForeign: "foreign"}
	var b []string
	for _, st := range steps {
		s := names[st.Kind] + " " + string(st.Server.ID)
		if st.Kind == stepForeign {
			s = "foreign " + st.Member.ID
		}
		if st.Kind == stepUpdateAddress {
			s += fmt.Sprintf(" %s->%s", st.From, st.Server.Address)
		}
		b = append(b, s)
	}
	return strings.Join(b, "; ")
}

func TestPlanReconcile(t *testing.T) {
	alive := func(ids ...string) []Member {
		var ms []Member
		for _, id := range ids {
			ms = append(ms, member(id, MemberAlive))
		}
		return ms
	}
	cases := []struct {
		name    string
		servers []raft.Server
		members []Member
		target  int
		want    string
	}{
		{"steady three voters", []raft.Server{voter("n1"), voter("n2"), voter("n3")}, alive("n1", "n2", "n3"), 0, ""},
		{"left voter removed at once", []raft.Server{voter("n1"), voter("n2"), voter("n3")},
			append(alive("n1", "n2"), member("n3", MemberLeft)), 0, "remove n3"},
		{"a removal that breaks quorum is held", []raft.Server{voter("n1"), voter("n2"), voter("n3")},
			[]Member{member("n1", MemberAlive), member("n2", MemberFailed), member("n3", MemberLeft)}, 0, "hold n2; hold n3"},
		{"suspect counts as live for quorum", []raft.Server{voter("n1"), voter("n2"), voter("n3")},
			[]Member{member("n1", MemberAlive), member("n2", MemberSuspect), member("n3", MemberLeft)}, 0, "remove n3"},
		{"never this node", []raft.Server{voter("n1"), voter("n2"), voter("n3")},
			[]Member{member("n1", MemberLeft), member("n2", MemberAlive), member("n3", MemberAlive)}, 0, ""},
		{"new member added and promoted (no stabilization)", []raft.Server{voter("n1"), voter("n2")},
			alive("n1", "n2", "n3"), 0, "add n3; promote n3"},
		{"promotion stops at the target", []raft.Server{voter("n1"), voter("n2"), voter("n3")},
			alive("n1", "n2", "n3", "n4"), 0, "add n4"},
		{"target 5 once five are alive", []raft.Server{voter("n1"), voter("n2"), voter("n3"), nonvoter("n4")},
			alive("n1", "n2", "n3", "n4", "n5"), 0, "add n5; promote n4; promote n5"},
		{"explicit target", []raft.Server{voter("n1"), nonvoter("n2"), nonvoter("n3")}, alive("n1", "n2", "n3"), 2, "promote n2"},
		{"member without a raft address is not added", []raft.Server{voter("n1")},
			append(alive("n1"), Member{ID: "n9", Status: MemberAlive}), 0, ""},
		{"moved address", []raft.Server{voter("n1"), voter("n2"), voter("n3")},
			append(alive("n1", "n2"), Member{ID: "n3", RaftAddr: "10.0.0.9:7000", Status: MemberAlive}), 0, "move n3 n3:7000->10.0.0.9:7000"},
		{"removals first, then additions, then promotions", []raft.Server{voter("n1"), voter("n2"), voter("n3"), voter("n4"), voter("n5")},
			append(alive("n1", "n2", "n3", "n4", "n6"), member("n5", MemberLeft)), 3, "remove n5; add n6"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := reconcileInput{Self: "n1", Servers: tc.servers, Members: tc.members, VoterTarget: tc.target, ReapTimeout: 0}
			got := render(planReconcile(in, newReconcileState(time.Hour), time.Unix(1000, 0)))
			if got != tc.want {
				t.Fatalf("plan = %q, want %q", got, tc.want)
			}
		})
	}
}

// A failed (or forgotten) server is reaped only after ReapTimeout of being
// seen so, and the clock restarts when it is seen alive in between.
func TestPlanReconcileReapTimeout(t *testing.T) {
	servers := []raft.Server{voter("n1"), voter("n2"), voter("n3"), voter("n4"), voter("n5")}
	failed := []Member{member("n1", MemberAlive), member("n2", MemberAlive), member("n3", MemberAlive), member("n4", MemberAlive), member("n5", MemberFailed)}
	rs := newReconcileState(time.Hour)
	in := reconcileInput{Self: "n1", Servers: servers, Members: failed, VoterTarget: 5, ReapTimeout: time.Minute}
	t0 := time.Unix(1000, 0)
	plan := func(at time.Duration) string { return render(planReconcile(in, rs, t0.Add(at))) }

	if got := plan(0); got != "" {
		t.Fatalf("first sight of a failed server: plan %q, want nothing", got)
	}
	if got := plan(59 * time.Second); got != "" {
		t.Fatalf("before the reap timeout: plan %q", got)
	}
	in.Members = append(failed[:4:4], member("n5", MemberAlive)) // back in between
	if got := plan(60 * time.Second); got != "" {
		t.Fatalf("alive again: plan %q", got)
	}
	in.Members = failed
	if got := plan(61 * time.Second); got != "" {
		t.Fatalf("the clock must restart after the server was seen alive: plan %q", got)
	}
	if got := plan(121 * time.Second); got != "remove n5" {
		t.Fatalf("after the reap timeout: plan %q, want remove n5", got)
	}

	// Gossip has forgotten the server altogether: treated as failed.
	rs, in.Members = newReconcileState(time.Hour), failed[:4]
	if got := plan(0); got != "" {
		t.Fatalf("first sight of a missing server: plan %q", got)
	}
	if got := plan(time.Minute); got != "remove n5" {
		t.Fatalf("a missing server after the reap timeout: plan %q", got)
	}
}

// A non-voter is promoted only once it has been alive for Stabilization,
// and its clock restarts if it stops being alive in between.
func TestPlanReconcileStabilization(t *testing.T) {
	rs := newReconcileState(time.Hour)
	in := reconcileInput{Self: "n1", Servers: []raft.Server{voter("n1"), voter("n2")}, Members: []Member{member("n1", MemberAlive), member("n2", MemberAlive), member("n3", MemberAlive)}, Stabilization: 10 * time.Second}
	t0 := time.Unix(1000, 0)
	if got := render(planReconcile(in, rs, t0)); got != "add n3" {
		t.Fatalf("plan %q, want add n3 (not promoted before stabilization)", got)
	}
	in.Servers = append(in.Servers, nonvoter("n3"))
	if got := render(planReconcile(in, rs, t0.Add(9*time.Second))); got != "" {
		t.Fatalf("plan %q before stabilization", got)
	}
	in.Members[2].Status = MemberSuspect
	if got := render(planReconcile(in, rs, t0.Add(10*time.Second))); got != "" {
		t.Fatalf("a suspect non-voter is not promoted: plan %q", got)
	}
	in.Members[2].Status = MemberAlive
	if got := render(planReconcile(in, rs, t0.Add(11*time.Second))); got != "" {
		t.Fatalf("the stabilization clock must restart: plan %q", got)
	}
	if got := render(planReconcile(in, rs, t0.Add(21*time.Second))); got != "promote n3" {
		t.Fatalf("plan %q, want promote n3", got)
	}
}

// The planner never changes the configuration slice it was given (raft
// hands every GetConfiguration caller the same cached slice).
func TestPlanReconcileLeavesInputAlone(t *testing.T) {
	servers := []raft.Server{voter("n3"), voter("n1"), voter("n2")}
	in := reconcileInput{Self: "n1", Servers: servers, Members: []Member{member("n1", MemberAlive), member("n2", MemberAlive), member("n3", MemberLeft)}}
	planReconcile(in, newReconcileState(time.Hour), time.Unix(1000, 0))
	if servers[0].ID != "n3" || servers[1].ID != "n1" {
		t.Fatalf("input reordered: %v", servers)
	}
}

// A non-voter the leader's heartbeats do not reach is not promoted, however
// long gossip calls it alive; once they resume it waits Stabilization
// again. A server that leaves the configuration is forgotten.
func TestPlanReconcileUnreachableNotPromoted(t *testing.T) {
	rs := newReconcileState(time.Hour)
	in := reconcileInput{Self: "n1", Servers: []raft.Server{voter("n1"), voter("n2"), nonvoter("n3")},
		Members: []Member{member("n1", MemberAlive), member("n2", MemberAlive), member("n3", MemberAlive)}, Stabilization: 10 * time.Second}
	t0 := time.Unix(1000, 0)
	if _, unreachable, changed := rs.observe(raft.FailedHeartbeatObservation{PeerID: "n3"}, t0); unreachable || changed {
		t.Fatalf("one failed heartbeat: unreachable %v, changed %v; want neither until a second", unreachable, changed)
	}
	if _, unreachable, changed := rs.observe(raft.FailedHeartbeatObservation{PeerID: "n3"}, t0.Add(time.Second)); !unreachable || !changed {
		t.Fatalf("a second failure: unreachable %v, changed %v", unreachable, changed)
	}
	if _, _, changed := rs.observe(raft.FailedHeartbeatObservation{PeerID: "n3"}, t0.Add(2*time.Second)); changed {
		t.Fatal("a third failure reported as a change")
	}
	if since := rs.unreachable["n3"]; !since.Equal(t0) {
		t.Fatalf("unreachable since %v, want the streak's first failure %v", since, t0)
	}
	for _, at := range []time.Duration{0, 11 * time.Second, time.Hour} {
		if got := render(planReconcile(in, rs, t0.Add(at))); got != "" {
			t.Fatalf("plan %q at +%v for an unreachable non-voter, want none", got, at)
		}
	}
	resumed := t0.Add(2 * time.Hour)
	if _, unreachable, changed := rs.observe(raft.ResumedHeartbeatObservation{PeerID: "n3"}, resumed); unreachable || !changed {
		t.Fatalf("resumed: unreachable %v, changed %v", unreachable, changed)
	}
	if got := render(planReconcile(in, rs, resumed)); got != "" { // the clock starts here
		t.Fatalf("plan %q at once after resuming", got)
	}
	if got := render(planReconcile(in, rs, resumed.Add(9*time.Second))); got != "" {
		t.Fatalf("plan %q: promoted before Stabilization of reachability", got)
	}
	if got := render(planReconcile(in, rs, resumed.Add(10*time.Second))); got != "promote n3" {
		t.Fatalf("plan %q, want promote n3", got)
	}
	rs.observe(raft.FailedHeartbeatObservation{PeerID: "n4"}, resumed)
	rs.observe(raft.FailedHeartbeatObservation{PeerID: "n4"}, resumed)
	planReconcile(in, rs, resumed)
	if _, ok := rs.unreachable["n4"]; ok {
		t.Error("a server outside the configuration is still remembered as unreachable")
	}
}

// A failure is a claim until a second confirms it, and failures that stop
// without raft reporting a resume (the replication they came from ended)
// stop counting after the window: one late failure of an ended
// replication must not hold a server back for the whole term.
func TestHeartbeatFailuresConfirmedAndExpired(t *testing.T) {
	const window = 21 * time.Second
	rs := newReconcileState(window)
	in := reconcileInput{Self: "n1", Servers: []raft.Server{voter("n1"), voter("n2"), nonvoter("n3")},
		Members: []Member{member("n1", MemberAlive), member("n2", MemberAlive), member("n3", MemberAlive)}, Stabilization: 10 * time.Second}
	t0 := time.Unix(1000, 0)
	planReconcile(in, rs, t0)                                                      // n3 a non-voter from t0
	rs.observe(raft.FailedHeartbeatObservation{PeerID: "n3"}, t0.Add(time.Second)) // alone: an ended replication's
	if got := render(planReconcile(in, rs, t0.Add(10*time.Second))); got != "promote n3" {
		t.Fatalf("plan %q after one unconfirmed failure, want promote n3", got)
	}

	rs = newReconcileState(window)
	planReconcile(in, rs, t0)
	rs.observe(raft.FailedHeartbeatObservation{PeerID: "n3"}, t0)
	// Failures further apart than the window are two streaks of one.
	if _, unreachable, _ := rs.observe(raft.FailedHeartbeatObservation{PeerID: "n3"}, t0.Add(window+time.Second)); unreachable {
		t.Fatal("two failures a window apart confirmed a streak")
	}
	at := t0.Add(window + 2*time.Second)
	if _, unreachable, changed := rs.observe(raft.FailedHeartbeatObservation{PeerID: "n3"}, at); !unreachable || !changed {
		t.Fatalf("a failure within the window of the last: unreachable %v, changed %v", unreachable, changed)
	}
	if got := rs.expire(at.Add(window)); len(got) != 0 {
		t.Fatalf("expired %v at the window's edge", got)
	}
	if got := render(planReconcile(in, rs, at.Add(window))); got != "" {
		t.Fatalf("plan %q for an unreachable non-voter", got)
	}
	if got := rs.expire(at.Add(window + time.Nanosecond)); len(got) != 1 || got[0] != "n3" {
		t.Fatalf("expired %v past the window, want [n3]", got)
	}
	if _, ok := rs.unreachable["n3"]; ok {
		t.Fatal("n3 still unreachable after its failures stopped")
	}
	back := at.Add(window + time.Nanosecond)
	if got := render(planReconcile(in, rs, back)); got != "" { // Stabilization starts again
		t.Fatalf("plan %q at once after the failures stopped", got)
	}
	if got := render(planReconcile(in, rs, back.Add(10*time.Second))); got != "promote n3" {
		t.Fatalf("plan %q Stabilization after the failures stopped, want promote n3", got)
	}
}

// A member that advertises another cluster's id (a node on another
// cluster's data dir) is as if gossip did not know it: never added, nor
// moved to (for a server of ours of the same name), and a server of ours
// that says so is reaped as a missing one. It is reported once per term,
// and again if its id changes. Members that say nothing (fresh data dirs,
// older builds) are added as before; a leader with no id yet (a new
// cluster's first) adds no member that has one.
func TestPlanReconcileForeignMembers(t *testing.T) {
	ours := func(id string) Member { m := member(id, MemberAlive); m.ClusterID = "B"; return m }
	theirs := func(id, cid string) Member { m := member(id, MemberAlive); m.ClusterID = cid; return m }
	rs := newReconcileState(time.Hour)
	in := reconcileInput{Self: "n1", ClusterID: "B", Servers: []raft.Server{voter("n1"), voter("n2"), voter("n3")},
		Members: []Member{ours("n1"), ours("n2"), ours("n3"), theirs("x1", "A"), member("n4", MemberAlive)}, ReapTimeout: time.Minute}
	t0 := time.Unix(1000, 0)
	if got := render(planReconcile(in, rs, t0)); got != "foreign x1; add n4" {
		t.Fatalf("plan %q, want x1 reported and left out, n4 (no id) added", got)
	}
	in.Members = in.Members[:4]
	if got := render(planReconcile(in, rs, t0)); got != "" {
		t.Fatalf("plan %q: x1 reported twice in a term", got)
	}
	in.Members[3] = theirs("x1", "C")
	if got := render(planReconcile(in, rs, t0)); got != "foreign x1" {
		t.Fatalf("plan %q, want x1 reported again under its new id", got)
	}

	// A server of ours whose member now holds another history, at another
	// address: not moved there; reaped as a missing server.
	rs = newReconcileState(time.Hour)
	moved := theirs("n3", "A")
	moved.RaftAddr = "10.0.0.9:7000"
	in.Members = []Member{ours("n1"), ours("n2"), moved}
	if got := render(planReconcile(in, rs, t0)); got != "foreign n3" {
		t.Fatalf("plan %q, want n3 reported, not moved", got)
	}
	if got := render(planReconcile(in, rs, t0.Add(time.Minute))); got != "remove n3" {
		t.Fatalf("plan %q, want n3 reaped after the reap timeout", got)
	}

	// A new cluster's first leader, before it has an id.
	in = reconcileInput{Self: "n1", Servers: []raft.Server{voter("n1")}, Members: []Member{member("n1", MemberAlive), member("n2", MemberAlive), theirs("x1", "A")}}
	if got := render(planReconcile(in, newReconcileState(time.Hour), t0)); got != "foreign x1; add n2; promote n2" {
		t.Fatalf("plan %q", got)
	}
}
