package cluster

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"fusebox/internal/testwait"
)

func TestThreeNodesSeeEachOtherWithMeta(t *testing.T) {
	nodes := startCluster(t, 3)
	for _, n := range nodes {
		ms := n.Members()
		if len(ms) != 3 {
			t.Fatalf("%s sees %d members, want 3: %+v", n.NodeID(), len(ms), ms)
		}
		for i, m := range ms {
			want := fmt.Sprintf("n%d", i)
			if m.ID != want || m.State != StateAlive || m.Meta.ID != want || m.Meta.Version != "test" {
				t.Errorf("%s: member %d = %+v, want alive %s with meta", n.NodeID(), i, m, want)
			}
			if m.GossipAddr != nodes[i].GossipAddr() {
				t.Errorf("%s: %s gossip addr %q, want %q", n.NodeID(), m.ID, m.GossipAddr, nodes[i].GossipAddr())
			}
		}
		if !n.Joined() {
			t.Errorf("%s not Joined", n.NodeID())
		}
		if lm := n.LocalMember(); lm.ID != n.NodeID() || lm.Meta.HTTPAddr == "" {
			t.Errorf("LocalMember = %+v", lm)
		}
	}
	if got := gauge(t, nodes[0].metrics.members, "alive"); got != 3 {
		t.Errorf("fusebox_cluster_members{state=alive} = %v, want 3", got)
	}
}

func TestNodeStartedBeforeSeedJoinsEventually(t *testing.T) {
	port, release := reservePort(t)
	seedAddr := fmt.Sprintf("127.0.0.1:%d", port)
	early := startNode(t, "early", joining(seedAddr))
	if early.Joined() {
		t.Fatal("joined before the seed exists")
	}
	testwait.For(t, 10*time.Second, "a failed join attempt", func() bool {
		return counter(t, early.metrics.joinAttempts, "error") >= 1
	})
	release()
	seed := startNode(t, "seed", func(c *Config) { c.BindAddr = seedAddr })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := early.WaitJoined(ctx); err != nil {
		t.Fatalf("WaitJoined: %v", err)
	}
	waitConverged(t, []testNode{early, seed}, 2)
}

func TestKilledNodeSeenDead(t *testing.T) {
	nodes := startCluster(t, 3)
	kill(nodes[2].Membership)
	for _, n := range nodes[:2] {
		testwait.For(t, 15*time.Second, n.NodeID()+" to see n2 dead", func() bool {
			s, ok := stateOf(n.Membership, "n2")
			return ok && s == StateDead
		})
	}
	if got := gauge(t, nodes[0].metrics.members, "dead"); got != 1 {
		t.Errorf("members{dead} = %v, want 1", got)
	}
	if nodes[0].NumAlive() != 2 {
		t.Errorf("NumAlive = %d, want 2", nodes[0].NumAlive())
	}
}

func TestLeftNodeSeenLeft(t *testing.T) {
	nodes := startCluster(t, 3)
	if err := nodes[2].Leave(2 * time.Second); err != nil {
		t.Fatalf("Leave: %v", err)
	}
	for _, n := range nodes[:2] {
		testwait.For(t, 15*time.Second, n.NodeID()+" to see n2 left", func() bool {
			s, ok := stateOf(n.Membership, "n2")
			return ok && s == StateLeft
		})
	}
	// Departed members stay listed for the reconciler, with their meta.
	if m, _ := nodes[0].Member("n2"); m.Meta.ID != "n2" {
		t.Errorf("left member lost its meta: %+v", m)
	}
	if err := nodes[2].Close(); err != nil {
		t.Errorf("Close after Leave: %v", err)
	}
	if err := nodes[2].Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestDepartedMembersAreReaped(t *testing.T) {
	nodes := startCluster(t, 2, func(c *Config) { c.RetainDeparted = 200 * time.Millisecond })
	if err := nodes[1].Close(); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 15*time.Second, "n1 to be reaped", func() bool {
		_, ok := nodes[0].Member("n1")
		return !ok
	})
}

func TestMetaUpdatePropagates(t *testing.T) {
	nodes := startCluster(t, 3)
	ch, cancel := nodes[0].Subscribe()
	defer cancel()
	gen := nodes[0].Generation()
	if gen == 0 {
		t.Fatal("Generation is 0 on a started node that saw two joins")
	}
	if err := nodes[1].UpdateMeta(func(m *Meta) { m.RaftAddr = "127.0.0.1:7001"; m.Suspect = true }); err != nil {
		t.Fatalf("UpdateMeta: %v", err)
	}
	for _, n := range nodes {
		testwait.For(t, 10*time.Second, n.NodeID()+" to see n1's new meta", func() bool {
			m, _ := n.Member("n1")
			return m.Meta.RaftAddr == "127.0.0.1:7001" && m.Meta.Suspect
		})
	}
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("subscriber not woken by the metadata update")
	}
	// What Members returns changed: so did Generation (the transport
	// policy keeps its parse of the members' addresses while it does not).
	if got := nodes[0].Generation(); got <= gen {
		t.Errorf("Generation %d after n1's meta changed, was %d", got, gen)
	}
	if err := nodes[1].UpdateMeta(func(m *Meta) { m.ID = "other" }); err == nil {
		t.Error("UpdateMeta accepted an ID change")
	}
	big := string(make([]byte, 600))
	if err := nodes[1].UpdateMeta(func(m *Meta) { m.Version = big }); err == nil {
		t.Error("UpdateMeta accepted metadata over 512 bytes")
	}
}

func newKey(t *testing.T) []byte {
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		t.Fatal(err)
	}
	return k
}

func TestEncryptedClusterRejectsOutsiders(t *testing.T) {
	key := newKey(t)
	nodes := startCluster(t, 2, withKeys(key))
	seed := nodes[0].GossipAddr()
	wrong := startNode(t, "wrongkey", withKeys(newKey(t)), joining(seed))
	none := startNode(t, "nokey", joining(seed))
	// Let both outsiders fail several join attempts, then check nobody has
	// seen them.
	testwait.For(t, 15*time.Second, "outsiders to fail to join", func() bool {
		return counter(t, wrong.metrics.joinAttempts, "error") >= 3 && counter(t, none.metrics.joinAttempts, "error") >= 3
	})
	late := startNode(t, "late", withKeys(key), joining(seed))
	waitConverged(t, append(nodes, late), 3)
	for _, n := range append(nodes, late) {
		for _, id := range []string{"wrongkey", "nokey"} {
			if _, ok := n.Member(id); ok {
				t.Errorf("%s sees outsider %s", n.NodeID(), id)
			}
		}
	}
	if wrong.Joined() || none.Joined() {
		t.Error("an outsider reports Joined")
	}
}

func TestUseKeysRotatesLive(t *testing.T) {
	k1, k2 := newKey(t), newKey(t)
	nodes := startCluster(t, 2, withKeys(k1))
	for _, step := range [][][]byte{{k1, k2}, {k2, k1}, {k2}} {
		for _, n := range nodes {
			if err := n.UseKeys(step); err != nil {
				t.Fatalf("UseKeys: %v", err)
			}
		}
	}
	// Only k2 is left: a k2 node joins, a k1 node cannot.
	late := startNode(t, "k2node", withKeys(k2), joining(nodes[0].GossipAddr()))
	waitConverged(t, append(nodes, late), 3)
	old := startNode(t, "k1node", withKeys(k1), joining(nodes[0].GossipAddr()))
	testwait.For(t, 10*time.Second, "k1 node to fail joins", func() bool {
		return counter(t, old.metrics.joinAttempts, "error") >= 2
	})
	if _, ok := nodes[0].Member("k1node"); ok {
		t.Error("node with the removed key joined")
	}
	plain := startNode(t, "plain")
	if err := plain.UseKeys([][]byte{k1}); err == nil {
		t.Error("UseKeys on an unencrypted node succeeded")
	}
}

func TestSlowSubscriberNeverBlocksMemberlist(t *testing.T) {
	seed := startNode(t, "n0")
	_, cancelStuck := seed.Subscribe() // never read
	defer cancelStuck()
	woke, cancel := seed.Subscribe()
	defer cancel()

	var others []testNode
	for i := 1; i <= 5; i++ {
		others = append(others, startNode(t, fmt.Sprintf("n%d", i), joining(seed.GossipAddr())))
	}
	waitConverged(t, append([]testNode{seed}, others...), 6)
	select {
	case <-woke:
	default:
		t.Fatal("reading subscriber was not woken")
	}
	for _, o := range others[:3] {
		if err := o.Close(); err != nil {
			t.Fatal(err)
		}
	}
	testwait.For(t, 15*time.Second, "seed to see 3 left", func() bool {
		return seed.NumAlive() == 3 && gauge(t, seed.metrics.members, "left") == 3
	})
	select {
	case <-woke:
	case <-time.After(5 * time.Second):
		t.Fatal("subscriber not woken after leaves")
	}
	cancel()
	cancel() // idempotent
	if _, ok := <-woke; ok {
		// a pending wake-up may remain buffered; the next receive sees close
		if _, ok := <-woke; ok {
			t.Fatal("channel not closed by cancel")
		}
	}
}

func TestCloseClosesSubscriptionsAndIsIdempotent(t *testing.T) {
	n := startNode(t, "solo")
	ch, cancel := n.Subscribe()
	defer cancel()
	if !n.Joined() {
		t.Error("a node without seeds should count as joined")
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	for range ch { // drains a pending wake-up, then ends on close
	}
	late, _ := n.Subscribe()
	if _, ok := <-late; ok {
		t.Error("Subscribe after Close returned an open channel")
	}
	if err := n.Start(context.Background()); err != ErrClosed {
		t.Errorf("Start after Close = %v, want ErrClosed", err)
	}
	if err := n.Publish(Hint{Key: testKey("d"), State: HintOpen}); err != ErrClosed {
		t.Errorf("Publish after Close = %v, want ErrClosed", err)
	}
}

func TestMemberTableLeaveIntentOrdering(t *testing.T) {
	met, _ := newMetrics(nil)
	tab := newMemberTable("self", slog.New(slog.DiscardHandler), met, time.Minute, time.Hour)
	node := func(id, meta string) *memberlist.Node {
		return &memberlist.Node{Name: id, Addr: net.ParseIP("127.0.0.1"), Port: 7946, Meta: []byte(meta)}
	}
	state := func(id string) MemberState {
		s := tab.snap.Load()
		return s.members[s.index[id]].State
	}
	// Dead message first, intent second: upgraded to left.
	tab.NotifyJoin(node("a", `{"id":"a"}`))
	tab.NotifyLeave(node("a", `{"id":"a"}`))
	if state("a") != StateDead {
		t.Fatalf("a = %v, want dead", state("a"))
	}
	if !tab.leaveIntent("a") {
		t.Error("first intent not fresh")
	}
	if state("a") != StateLeft {
		t.Errorf("a = %v after late intent, want left", state("a"))
	}
	if tab.leaveIntent("a") {
		t.Error("repeated intent reported fresh (would be re-gossiped forever)")
	}
	// Intent first: the departure is a leave; a rejoin clears the intent.
	tab.NotifyJoin(node("b", `{"id":"b"}`))
	tab.leaveIntent("b")
	tab.NotifyLeave(node("b", `{"id":"b"}`))
	if state("b") != StateLeft {
		t.Errorf("b = %v, want left", state("b"))
	}
	tab.NotifyJoin(node("b", `{"id":"b"}`))
	tab.NotifyLeave(node("b", `{"id":"b"}`))
	if state("b") != StateDead {
		t.Errorf("b after rejoin and crash = %v, want dead", state("b"))
	}
	// Metadata claiming another ID, or garbage, is replaced by the bare ID.
	tab.NotifyJoin(node("c", `{"id":"a","http":"evil:1"}`))
	tab.NotifyJoin(node("d", `not json`))
	for _, id := range []string{"c", "d"} {
		s := tab.snap.Load()
		if m := s.members[s.index[id]]; m.Meta != (Meta{ID: id}) {
			t.Errorf("%s meta = %+v, want only the ID", id, m.Meta)
		}
	}
	if got := gauge(t, met.members, "left"); got != 1 {
		t.Errorf("members{left} = %v, want 1", got)
	}
}

// BoundAddr is the gossip listener's bound address, which GossipAddr (the
// advertised one) does not show: the node's destination policy refuses
// both.
func TestBoundAddrBesideAdvertised(t *testing.T) {
	n := startNode(t, "n1", func(c *Config) { c.AdvertiseAddr = "127.0.0.2:0" })
	_, port, _ := net.SplitHostPort(n.GossipAddr())
	if n.GossipAddr() != "127.0.0.2:"+port || n.BoundAddr() != "127.0.0.1:"+port {
		t.Fatalf("GossipAddr %s, BoundAddr %s; want 127.0.0.2 and 127.0.0.1 on one port", n.GossipAddr(), n.BoundAddr())
	}
	if (&Membership{}).BoundAddr() != "" {
		t.Fatal("BoundAddr before Start is not empty")
	}
}

// TestGossipAddrWhileUpdatingMeta: GossipAddr may be read (the outbound
// dial policy reads it for every new connection) while UpdateMeta rewrites
// the local node in memberlist. It read memberlist's LocalNode fields,
// which UpdateNode writes under memberlist's own lock: the race detector
// caught it in node.TestPostgresUnreachableAtStart (a submit's member
// check against watchClusterID's UpdateMeta).
func TestGossipAddrWhileUpdatingMeta(t *testing.T) {
	n := startNode(t, "n1")
	want := n.GossipAddr()
	if want == "" {
		t.Fatal("no gossip address once started")
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
			}
			if got := n.GossipAddr(); got != want {
				t.Errorf("GossipAddr = %q, want %q", got, want)
				return
			}
		}
	})
	for i := range 50 {
		if err := n.UpdateMeta(func(m *Meta) { m.Version = fmt.Sprint("test-", i) }); err != nil {
			t.Fatal(err)
		}
	}
	close(done)
	wg.Wait()
}
