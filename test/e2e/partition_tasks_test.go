package e2e

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"fusebox/api"
	"fusebox/internal/pgtest"
	"fusebox/internal/testwait"
)

// TestPartitionedOwnerStopsCalling cuts a shard owner off from its peers
// while it can still reach the destination: the split brain that a shard's
// epoch and the node's freshness are for (docs/design.md, §2). The
// cut node keeps running with its old map, its tasks pending in it, and a
// working path to the destination; the majority gives its shards new owners
// at higher epochs and delivers their tasks. What must hold:
//
//   - no overlap: every call a cut node makes arrives before the first
//     call any other node makes for a task of a shard the cut node owned;
//   - duplicates only for calls in flight at that change
//     (checkDuplicatesFromFault, from the first such call);
//   - the majority delivers every accepted task while the node is still cut;
//   - after the heal, the node calls no task that was done in its absence,
//     and takes its share of new tasks again;
//   - the cluster invariants (every accepted task succeeded, one leader,
//     one map).
//
// Run for a cut follower and a cut leader (which must also lose its lease),
// and for a minority of two cut off together out of five, the leader among
// them: the two still hear each other (gossip says alive, Raft has a peer),
// but with no quorum neither may call or move a shard.
func TestPartitionedOwnerStopsCalling(t *testing.T) {
	if why := netnsAvailable(); why != "" {
		t.Skip(why)
	}
	t.Run("follower", func(t *testing.T) { testPartitionedOwner(t, partitionCase{nodes: 3, cut: 1}) })
	t.Run("leader", func(t *testing.T) { testPartitionedOwner(t, partitionCase{nodes: 3, cut: 1, leader: true}) })
	// Tasks in PostgreSQL, which the cut node still reaches (at the
	// destination's address): its result writes land while its shards'
	// epochs are current, so its calls after the cut are not made again.
	// (It stops calling long before its shards move; a write after a move
	// is fenced: TestPausedOwnerWritesDoNotLand.)
	t.Run("postgres-follower", func(t *testing.T) { testPartitionedOwner(t, partitionCase{nodes: 3, cut: 1, postgres: true}) })
	t.Run("minority-of-two-with-leader", func(t *testing.T) { testPartitionedOwner(t, partitionCase{nodes: 5, cut: 2, leader: true}) })
}

// partitionCase is one run of testPartitionedOwner: cut of a cluster's
// nodes are cut off together, the leader among them or not.
type partitionCase struct {
	nodes, cut int
	leader     bool
	postgres   bool
}

func testPartitionedOwner(t *testing.T, pc partitionCase) {
	lab := newNetLab(t, pc.nodes)
	destAddr := lab.addDestination()
	opts := ClusterOptions{Hosts: lab.hosts(), Netns: lab.nodes, Timing: "lan"}
	if pc.postgres {
		db := pgServerWith(t, pgtest.Options{Durable: true, Listen: []string{destAddr}, TrustFrom: []string{lab.destNet()}})
		opts = withOptions(opts, pgOptions(db.URLAt(destAddr, "postgres")))
	}
	// The production timing: a cut node stops calling half a heartbeat
	// timeout after its last contact with the leader (a follower: 0.5 s,
	// 1 s in a minority with the old leader, which keeps it in contact
	// until its lease lapses) or when its lease lapses (a leader: under
	// 1 s), and its shards move after gossip's failure detection and a
	// commit (about 6 s). With the fast preset the
	// two are 0.5 s against 0.7 s, too close to hold on a loaded machine.
	c := newTaskCluster(t, pc.nodes, opts)
	requireClusterAPI(t, c.Procs[0])
	dest := NewDestAt(t, destAddr)
	dest.SetHold(200 * time.Millisecond)
	putEndpoint(t, c, "ep-far", dest.NexusURL())
	setConfig(t, c, keyConcurrency, "ep-far", "2") // a backlog on every node, so the cut ones have tasks to call
	l := NewTaskLoad(c, "part", func(i int) (api.TaskSubmit, *Dest) {
		return nexusTask(fmt.Sprintf("ns-%d", i%(2*pc.nodes)), fmt.Sprintf("wf-%d", i), "ep-far", i), dest
	})
	nodeOf := lab.callers(c)
	for range 4 * pc.nodes {
		if k := l.SubmitBatch(50); k != 50 {
			t.Fatalf("burst: %d of 50 accepted: %v", k, l.Stats().LastErr)
		}
	}
	l.Run(0, 1, 50*time.Millisecond)
	defer l.Stop()

	// The cut nodes: the leader first if the case wants it, then followers.
	leader := c.WaitForLeader(t, leaderTimeout)
	var idx []int
	for i, p := range c.Procs {
		if p == leader && pc.leader {
			idx = append(idx, i)
		}
	}
	for i, p := range c.Procs {
		if p != leader && len(idx) < pc.cut {
			idx = append(idx, i)
		}
	}
	victims := map[string]bool{} // by name
	src := map[string]string{}   // a cut node's calling address → its name
	var names []string
	for _, i := range idx {
		victims[c.Procs[i].Name()] = true
		src[lab.DestSource(i)] = c.Procs[i].Name()
		names = append(names, c.Procs[i].Name())
	}
	who := strings.Join(names, "+")
	owned := map[string]map[int]uint64{} // a cut node's shards → epoch at the cut
	all := map[int]uint64{}
	testwait.ForErr(t, convergeTimout, who+" calling with a backlog", func() error {
		m, _, err := shardMap(leader)
		if err != nil {
			return err
		}
		all = map[int]uint64{}
		for _, name := range names {
			owned[name] = map[int]uint64{}
			for s, a := range m {
				if a.Owner == name {
					owned[name][s] = a.Epoch
					all[s] = a.Epoch
				}
			}
			busy, err := shardsWithBacklog(leader, name)
			if err != nil {
				return err
			}
			if len(busy) == 0 || heldOn(l, dest, owned[name], time.Now()) == 0 {
				return fmt.Errorf("%s: %d of its %d shards with backlog, %d of its calls in flight; calls per node %v",
					name, len(busy), len(owned[name]), heldOn(l, dest, owned[name], time.Now()), callsPerNode(dest.Calls(), nodeOf, time.Time{}))
			}
		}
		return nil
	})

	cutAt := time.Now()
	lab.cutTogether(idx...)
	for _, i := range idx {
		c.Procs[i].SetIsolated(true)
	}
	movedAt := waitShardsMoved(t, c, victims, all, who)
	atMove := len(l.Accepted())
	testwait.ForErr(t, convergeTimout, "100 tasks accepted by the majority after the move", func() error {
		if k := len(l.Accepted()) - atMove; k < 100 {
			return fmt.Errorf("%d so far (%v)", k, l.Stats())
		}
		return nil
	})
	l.Stop()
	acc := l.Accepted()
	testwait.ForErr(t, convergeTimout, fmt.Sprintf("all %d accepted tasks delivered with %s still cut off", len(acc), who), func() error {
		got := dest.Deliveries()
		missing := 0
		for _, a := range acc {
			if got[a.ID] == 0 {
				missing++
			}
		}
		if missing > 0 {
			return fmt.Errorf("%d not delivered yet", missing)
		}
		return nil
	})

	// No overlap: each cut node's last call against the others' first call
	// for a task of its shards. And no cut node calls for a shard it did
	// not own at the cut: a minority has no quorum to move one.
	shardOf := map[string]int{}
	for _, a := range acc {
		shardOf[a.ID] = a.Shard
	}
	lastVictim, takeover := map[string]time.Time{}, map[string]time.Time{}
	afterCut := map[string]int{}
	var foreign []string
	for _, call := range dest.Calls() {
		if call.Arrived.Before(cutAt) {
			continue
		}
		shard, ours := shardOf[call.RequestID]
		if name, cut := src[call.From]; cut {
			afterCut[name]++
			if call.Arrived.After(lastVictim[name]) {
				lastVictim[name] = call.Arrived
			}
			if _, mine := owned[name][shard]; ours && !mine {
				foreign = append(foreign, fmt.Sprintf("%s called %s of shard %d", name, call.RequestID, shard))
			}
			continue
		}
		for name, sh := range owned {
			if _, theirs := sh[shard]; ours && theirs && (takeover[name].IsZero() || call.Arrived.Before(takeover[name])) {
				takeover[name] = call.Arrived
			}
		}
	}
	since := func(ts time.Time) string {
		if ts.IsZero() {
			return "never"
		}
		return fmt.Sprintf("%+.3fs", ts.Sub(cutAt).Seconds())
	}
	var first0 time.Time // the earliest takeover of any cut node's shards
	for _, name := range names {
		t.Logf("cut %s (of %s, leader %s, %d shards): its calls after the cut %d, the last at %s; shards moved by %s; the others' first call for its shards at %s",
			name, who, leader.Name(), len(owned[name]), afterCut[name], since(lastVictim[name]), since(movedAt), since(takeover[name]))
		if takeover[name].IsZero() {
			t.Fatalf("no other node called a task of %s's shards after the cut", name)
		}
		if last := lastVictim[name]; !last.IsZero() && !last.Before(takeover[name]) {
			t.Errorf("split brain: %s, cut off, called the destination at %s, after another node's first call for its shards at %s",
				name, since(last), since(takeover[name]))
		}
		if first0.IsZero() || takeover[name].Before(first0) {
			first0 = takeover[name]
		}
	}
	if len(foreign) > 0 {
		t.Errorf("a cut node called tasks of shards it did not own at the cut, e.g. %v", first(foreign, 5))
	}
	rep := l.Check(t, convergeTimout)
	checkDuplicatesFromFault(t, c, l, dest, rep, who, all, first0)
	if pc.postgres && rep.Duplicates != 0 {
		// Its results went straight to the database under epochs still
		// current: nothing it called was left pending for the new owners.
		t.Errorf("%d duplicate deliveries on the PostgreSQL store, want 0: %s still reached the database, e.g. %v",
			rep.Duplicates, who, first(rep.DupTasks, 5))
	}

	// Heal: the nodes come back, catch up before they call anything, and
	// call nothing that was done while they were away.
	healAt := time.Now()
	lab.healTogether(idx...)
	for _, i := range idx {
		c.Procs[i].SetIsolated(false)
	}
	testwait.ForErr(t, convergeTimout, fmt.Sprintf("%d alive members and voters after the heal", pc.nodes), func() error { return c.CheckMembership(pc.nodes) })
	testwait.ForErr(t, convergeTimout, "every node holding one shard map, each shard worked on by its owner", c.sameShardMap)
	done := map[string]bool{}
	for _, a := range acc {
		done[a.ID] = true
	}
	l2 := NewTaskLoad(c, "healed", func(i int) (api.TaskSubmit, *Dest) {
		return nexusTask(fmt.Sprintf("ns-%d", i%(2*pc.nodes)), fmt.Sprintf("wf-h%d", i), "ep-far", i), dest
	})
	for range 2 {
		if k := l2.SubmitBatch(50 * pc.nodes); k != 50*pc.nodes {
			t.Fatalf("after the heal: %d of %d accepted: %v", k, 50*pc.nodes, l2.Stats().LastErr)
		}
	}
	rep2 := l2.Check(t, convergeTimout)
	var stale []string
	for _, call := range dest.Calls() {
		if name, cut := src[call.From]; cut && call.Arrived.After(healAt) && done[call.RequestID] {
			stale = append(stale, fmt.Sprintf("%s: %s at %s", name, call.RequestID, since(call.Arrived)))
		}
	}
	if len(stale) > 0 {
		sort.Strings(stale)
		t.Errorf("%s called %d tasks after the heal that were done while cut off, e.g. %v", who, len(stale), first(stale, 5))
	}
	per := callsPerNode(dest.Calls(), nodeOf, healAt)
	t.Logf("after the heal: %v; calls per node since %v", rep2, per)
	for _, name := range names {
		if per[name] == 0 {
			t.Errorf("%s made no call for the %d tasks submitted after the heal: it did not take shards back (%v)", name, rep2.Accepted, per)
		}
	}
	c.CheckInvariants(t, convergeTimout)
	c.StopAll(t)
}

// waitShardsMoved waits until every shard of shards (shard → its epoch
// then) is owned by a node not in from, at a higher epoch, as the leader
// sees it, and returns when it saw that.
func waitShardsMoved(t *testing.T, c *Cluster, from map[string]bool, shards map[int]uint64, who string) time.Time {
	t.Helper()
	var movedAt time.Time
	testwait.ForErr(t, convergeTimout, fmt.Sprintf("the %d shards of %s owned by the others at higher epochs", len(shards), who), func() error {
		ld, err := c.Leader()
		if err != nil {
			return err
		}
		now, _, err := shardMap(ld)
		if err != nil {
			return err
		}
		for s, e := range shards {
			if a := now[s]; from[a.Owner] || a.Owner == "" || a.Epoch <= e {
				return fmt.Errorf("shard %d: %s at epoch %d", s, a.Owner, a.Epoch)
			}
		}
		movedAt = time.Now()
		return nil
	})
	return movedAt
}

// callsPerNode counts the calls that arrived after since per calling node
// (nodeOf maps a call's source address to its node; "?" for others).
func callsPerNode(calls []FrontCall, nodeOf map[string]string, since time.Time) map[string]int {
	out := map[string]int{}
	for _, c := range calls {
		if c.Arrived.After(since) {
			name, ok := nodeOf[c.From]
			if !ok {
				name = "?"
			}
			out[name]++
		}
	}
	return out
}
