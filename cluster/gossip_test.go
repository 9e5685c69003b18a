package cluster

import (
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"fusebox/internal/testwait"
)

func withSinks(nodes []testNode) []*recordingSink {
	sinks := make([]*recordingSink, len(nodes))
	for i, n := range nodes {
		sinks[i] = newSink()
		n.SetHintHandlers(sinks[i], nil)
	}
	return sinks
}

func TestPublishedHintReachesEveryPeer(t *testing.T) {
	nodes := startCluster(t, 5)
	sinks := withSinks(nodes)
	h := Hint{Key: testKey("payments"), State: HintOpen, Generation: 7, OpenFor: 30 * time.Second, Reason: "503s"}
	if err := nodes[0].Publish(h); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	for i := 1; i < 5; i++ {
		testwait.For(t, 10*time.Second, fmt.Sprintf("n%d to get the hint", i), func() bool { return sinks[i].has(h.Key, 7) })
		got := sinks[i].first()
		if got.Origin != "n0" || got.OpenFor != 30*time.Second || got.Reason != "503s" || got.State != HintOpen {
			t.Errorf("n%d got %+v", i, got)
		}
	}
	if sinks[0].count() != 0 {
		t.Error("origin handed its own hint to its sink")
	}
	if got := counter(t, nodes[0].metrics.hintsSent, "direct"); got < 1 {
		t.Errorf("hints_sent{direct} = %v", got)
	}
	// Every peer delivers it once; later copies (direct + gossip + re-gossip)
	// are duplicates, never re-delivered.
	testwait.For(t, 10*time.Second, "a duplicate to be counted somewhere", func() bool {
		var dups float64
		for _, n := range nodes[1:] {
			dups += counter(t, n.metrics.hintsReceived, string(HintDuplicate))
		}
		return dups > 0
	})
	for i := 1; i < 5; i++ {
		if c := sinks[i].count(); c != 1 {
			t.Errorf("n%d sink saw the hint %d times, want 1", i, c)
		}
		if got := counter(t, nodes[i].metrics.hintsReceived, string(HintApplied)); got != 1 {
			t.Errorf("n%d hints_received{applied} = %v, want 1", i, got)
		}
	}
}

// TestRegossipReachesPeersWithoutDirectSend checks the serf-style re-queue:
// a hint only queued for gossip (no direct sends) still reaches all peers.
//
// Gossip is random: each node sends a broadcast RetransmitMult times to
// random peers, so with five nodes one peer misses every copy about once
// in a thousand runs (each of four holders skips it with p = 3/16). In
// production the push/pull exchange of open hints fills that gap; this
// test has no hint source, so once every queue has drained with a peer
// still missing the hint, it queues it again on n0, as that exchange
// would resend it, up to three rounds.
func TestRegossipReachesPeersWithoutDirectSend(t *testing.T) {
	nodes := startCluster(t, 5)
	sinks := withSinks(nodes)
	h := Hint{Key: testKey("regossip"), State: HintOpen, Generation: 3, Origin: "n0"}
	enc, err := EncodeHint(h)
	if err != nil {
		t.Fatal(err)
	}
	all := func() bool {
		for i := 1; i < 5; i++ {
			if !sinks[i].has(h.Key, 3) {
				return false
			}
		}
		return true
	}
	drained := func() bool {
		for _, n := range nodes {
			if n.queue.NumQueued() != 0 {
				return false
			}
		}
		return true
	}
	for round := 1; ; round++ {
		nodes[0].queueHint(h, append([]byte{msgHint}, enc...))
		testwait.For(t, 10*time.Second, "every peer to get the hint or every queue to drain", func() bool { return all() || drained() })
		if all() {
			break
		}
		if round == 3 {
			for i := 1; i < 5; i++ {
				if !sinks[i].has(h.Key, 3) {
					t.Fatalf("n%d never got the gossiped hint in %d rounds", i, round)
				}
			}
		}
		t.Logf("round %d: a peer missed every copy; queueing the hint again", round)
	}
	var regossiped float64
	for _, n := range nodes[1:] {
		regossiped += counter(t, n.metrics.hintsSent, "gossip")
	}
	if regossiped < 4 {
		t.Errorf("receivers re-queued %v hints, want one each (4)", regossiped)
	}
}

func TestStaleAndDuplicateHints(t *testing.T) {
	n := startNode(t, "rx")
	fakeMembers(n.Membership, "a", "b", "c")
	sink := newSink()
	n.SetHintHandlers(sink, nil)
	send := func(gen uint64, origin string) HintResult {
		enc, err := EncodeHint(Hint{Key: testKey("d"), State: HintOpen, Generation: gen, Origin: origin})
		if err != nil {
			t.Fatal(err)
		}
		return n.receiveHint(enc, false)
	}
	steps := []struct {
		gen    uint64
		origin string
		want   HintResult
	}{
		{5, "a", HintApplied},
		{5, "a", HintDuplicate},
		{4, "a", HintStale},
		{4, "b", HintApplied}, // per (key, origin)
		{6, "a", HintApplied},
		{5, "a", HintStale},
		{1, "rx", HintSelf},
	}
	for i, s := range steps {
		if got := send(s.gen, s.origin); got != s.want {
			t.Errorf("step %d (gen %d from %s) = %s, want %s", i, s.gen, s.origin, got, s.want)
		}
	}
	if sink.count() != 3 {
		t.Errorf("sink got %d hints, want 3", sink.count())
	}
	for res, want := range map[HintResult]float64{HintApplied: 3, HintDuplicate: 1, HintStale: 2, HintSelf: 1} {
		if got := counter(t, n.metrics.hintsReceived, string(res)); got != want {
			t.Errorf("hints_received{%s} = %v, want %v", res, got, want)
		}
	}
	// A sink that already knows the hint (not fresh) gets no re-gossip.
	n.SetHintHandlers(sinkFunc(func(Hint) bool { return false }), nil)
	before := counter(t, n.metrics.hintsSent, "gossip")
	if got := send(9, "c"); got != HintIgnored {
		t.Errorf("not-fresh sink: result %s, want ignored", got)
	}
	if counter(t, n.metrics.hintsSent, "gossip") != before {
		t.Error("a hint the sink called not fresh was re-gossiped")
	}
	n.SetHintHandlers(nil, nil)
	if got := send(10, "c"); got != HintNoSink {
		t.Errorf("no sink: result %s, want nosink", got)
	}
}

type sinkFunc func(Hint) bool

func (f sinkFunc) HandleHint(h Hint) bool { return f(h) }

func TestQueuedHintNewestGenerationWins(t *testing.T) {
	m, err := New(Config{NodeID: "q", BindAddr: "127.0.0.1:0"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	queue := func(gen uint64) {
		h := Hint{Key: testKey("d"), State: HintOpen, Generation: gen, Origin: "q"}
		enc, _ := EncodeHint(h)
		m.queueHint(h, append([]byte{msgHint}, enc...))
	}
	queue(5)
	queue(3) // older: ignored
	queue(7) // newer: replaces
	h2 := Hint{Key: testKey("other"), State: HintOpen, Generation: 1, Origin: "q"}
	enc2, _ := EncodeHint(h2)
	m.queueHint(h2, append([]byte{msgHint}, enc2...))
	if got := m.queue.NumQueued(); got != 2 {
		t.Fatalf("queued %d broadcasts, want 2 (one per key)", got)
	}
	var gens []uint64
	for _, msg := range m.queue.GetBroadcasts(0, 64<<10) {
		h, err := DecodeHint(msg[1:])
		if err != nil {
			t.Fatal(err)
		}
		if h.Key == testKey("d") {
			gens = append(gens, h.Generation)
		}
	}
	if len(gens) != 1 || gens[0] != 7 {
		t.Errorf("queued generations for the key = %v, want [7]", gens)
	}
}

func TestJoinerLearnsOpenHintsByPushPull(t *testing.T) {
	nodes := startCluster(t, 2)
	open := staticSource{
		{Key: testKey("down-1"), State: HintOpen, Generation: 4, Origin: "n0", OpenFor: time.Minute},
		{Key: testKey("down-2"), State: HintHalfOpen, Generation: 9, Origin: "n1"},
		{Key: testKey("closed"), State: HintClosed, Generation: 2, Origin: "n0"}, // not sent
	}
	nodes[0].SetHintHandlers(newSink(), open)
	nodes[1].SetHintHandlers(newSink(), open)
	joiner := newSink()
	j := startNode(t, "joiner", joining(nodes[0].GossipAddr()))
	j.SetHintHandlers(joiner, nil)
	// The join's own push/pull may run before the sink is set; the periodic
	// push/pull (2s in the fast preset) delivers them regardless.
	testwait.For(t, 15*time.Second, "joiner to learn both open keys", func() bool {
		return joiner.has(testKey("down-1"), 4) && joiner.has(testKey("down-2"), 9)
	})
	if joiner.has(testKey("closed"), 2) {
		t.Error("a closed hint was sent by anti-entropy")
	}
	if got := counter(t, j.metrics.stateHints, "received"); got < 2 {
		t.Errorf("antientropy{received} = %v", got)
	}
}

func TestUndecodableMessagesAreCounted(t *testing.T) {
	nodes := startCluster(t, 2)
	sink := withSinks(nodes)[1]
	tx, rx := nodes[0], nodes[1]
	target := &memberlist.Node{Name: "n1", Addr: net.ParseIP("127.0.0.1"), Port: uint16(rx.ml.Load().LocalNode().Port)}
	garbage := [][]byte{
		{0x7f, 1, 2, 3},          // unknown family
		{msgHint},                // empty hint
		{msgHint, 1, 9, 9, 9},    // bad hint
		{msgHint, 1, 0, 0, 0xff}, // truncated varint
		{msgLeaveIntent, 7},      // bad leave intent
		append([]byte{msgHint}, make([]byte, 1100)...), // oversized
	}
	for _, g := range garbage {
		if err := tx.ml.Load().SendBestEffort(target, g); err != nil {
			t.Fatal(err)
		}
	}
	// A valid hint sent after the garbage proves it all was processed.
	if err := tx.Publish(Hint{Key: testKey("after"), State: HintOpen, Generation: 1}); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "the valid hint", func() bool { return sink.has(testKey("after"), 1) })
	if got := counter(t, rx.metrics.msgsDropped, "unknown_type"); got != 1 {
		t.Errorf("messages_dropped{unknown_type} = %v, want 1", got)
	}
	if got := counter(t, rx.metrics.hintsReceived, string(HintInvalid)); got != 4 {
		t.Errorf("hints_received{invalid} = %v, want 4", got)
	}
	if got := counter(t, rx.metrics.msgsDropped, "bad_leave_intent"); got != 1 {
		t.Errorf("messages_dropped{bad_leave_intent} = %v, want 1", got)
	}
	if sink.count() != 1 {
		t.Errorf("sink got %d hints, want only the valid one", sink.count())
	}
	// Push/pull state that does not decode is counted, not fatal.
	rx.mergeHintState([]byte{1, 200, 1})
	if got := counter(t, rx.metrics.hintsReceived, string(HintInvalid)); got != 5 {
		t.Errorf("after bad push/pull state: invalid = %v, want 5", got)
	}
}

func TestRateLimitDropsFlood(t *testing.T) {
	n := startNode(t, "rx", func(c *Config) { c.HintRate = 10; c.HintBurst = 20 })
	fakeMembers(n.Membership, "flooder", "polite")
	sink := newSink()
	n.SetHintHandlers(sink, nil)
	for i := range 200 {
		enc, _ := EncodeHint(Hint{Key: testKey(fmt.Sprint("d", i)), State: HintOpen, Generation: 1, Origin: "flooder"})
		n.receiveHint(enc, false)
	}
	enc, _ := EncodeHint(Hint{Key: testKey("d0"), State: HintOpen, Generation: 1, Origin: "polite"})
	if got := n.receiveHint(enc, false); got != HintApplied {
		t.Errorf("another origin's hint = %s, want applied (limits are per origin)", got)
	}
	limited := counter(t, n.metrics.hintsReceived, string(HintRateLimited))
	applied := counter(t, n.metrics.hintsReceived, string(HintApplied))
	if limited < 150 || applied > 50 || limited+applied != 201 {
		t.Errorf("ratelimited=%v applied=%v, want most of the 200 limited", limited, applied)
	}
}

func TestEncryptedClusterRejectsKeylessInjector(t *testing.T) {
	key := newKey(t)
	nodes := startCluster(t, 2, withKeys(key))
	sinks := withSinks(nodes)
	target := &memberlist.Node{Name: "n1", Addr: net.ParseIP("127.0.0.1"), Port: uint16(nodes[1].ml.Load().LocalNode().Port)}
	evil := Hint{Key: testKey("victim"), State: HintOpen, Generation: 99, Origin: "n0", OpenFor: time.Hour}
	enc, _ := EncodeHint(evil)
	for _, opts := range [][]func(*Config){nil, {withKeys(newKey(t))}} {
		inj := startNode(t, fmt.Sprint("injector", len(opts)), opts...)
		for range 5 {
			if err := inj.ml.Load().SendBestEffort(target, append([]byte{msgHint}, enc...)); err != nil {
				t.Fatal(err)
			}
		}
	}
	legit := Hint{Key: testKey("legit"), State: HintOpen, Generation: 1}
	if err := nodes[0].Publish(legit); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "the legitimate hint", func() bool { return sinks[1].has(legit.Key, 1) })
	if sinks[1].has(evil.Key, 99) {
		t.Fatal("a node without the gossip key injected a hint")
	}
}

func TestPublishRejectsInvalidHint(t *testing.T) {
	n := startNode(t, "p")
	if err := n.Publish(Hint{State: HintOpen}); err == nil {
		t.Error("Publish accepted a hint without a destination")
	}
	m, _ := New(Config{NodeID: "idle", BindAddr: "127.0.0.1:0"}, nil, nil)
	if err := m.Publish(Hint{Key: testKey("d")}); err != ErrNotStarted {
		t.Errorf("Publish before Start = %v, want ErrNotStarted", err)
	}
}

// TestCompressedAndPlainNodesInteroperate: nodes send uncompressed
// (issue 17 §3), nodes built before compress every packet; a mixed
// cluster still joins (push/pull over TCP both ways) and every hint
// reaches every peer whichever way it was sent.
func TestCompressedAndPlainNodesInteroperate(t *testing.T) {
	if cfg, err := (Config{NodeID: "x", BindAddr: "127.0.0.1:0"}).withDefaults(); err != nil {
		t.Fatal(err)
	} else if mc, err := cfg.memberlistConfig(); err != nil || mc.EnableCompression {
		t.Fatalf("memberlist compression on by default (err %v)", err)
	}
	old := func(c *Config) { c.compress = true }
	n0 := startNode(t, "n0", old)
	n1 := startNode(t, "n1", joining(n0.GossipAddr()))
	n2 := startNode(t, "n2", joining(n1.GossipAddr()), old)
	nodes := []testNode{n0, n1, n2}
	waitConverged(t, nodes, 3)
	sinks := withSinks(nodes)
	for i, from := range nodes {
		h := Hint{Key: testKey(fmt.Sprint("mixed-", i)), State: HintOpen, Generation: 1, OpenFor: time.Minute}
		if err := from.Publish(h); err != nil {
			t.Fatal(err)
		}
		for j := range nodes {
			if j != i {
				testwait.For(t, 10*time.Second, fmt.Sprintf("n%d to get n%d's hint", j, i), func() bool { return sinks[j].has(h.Key, 1) })
			}
		}
	}
}

// A hint gossiped from an origin that is not a member is dropped and
// counted: each made-up origin had a rate limiter of its own, so a
// gossip-key holder that varied the origin went unlimited, and each hint
// was queued for re-gossip. A leave intent for a made-up id is dropped.
func TestHintFromUnknownOriginDropped(t *testing.T) {
	n := startNode(t, "rx", func(c *Config) { c.HintRate = 10; c.HintBurst = 20 })
	n.SetHintHandlers(newSink(), nil)
	for i := range 200 {
		enc, _ := EncodeHint(Hint{Key: testKey(fmt.Sprint("d", i)), State: HintOpen, Generation: 1, Origin: fmt.Sprint("made-up-", i)})
		if got := n.receiveHint(enc, false); got != HintUnknownOrigin {
			t.Fatalf("hint %d from a made-up origin = %s, want %s", i, got, HintUnknownOrigin)
		}
	}
	if got := counter(t, n.metrics.hintsSent, "gossip"); got != 0 {
		t.Errorf("%v hints from made-up origins queued for re-gossip", got)
	}
	n.handleInbound(inbound{typ: msgLeaveIntent, body: encodeLeaveIntent("made-up")[1:]})
	if q := n.queue.NumQueued(); q != 0 {
		t.Errorf("%d broadcasts queued after a leave intent for a made-up id", q)
	}
}

// The gossip queue is bounded: a flood of distinct keys from a member keeps
// at most maxQueuedBroadcasts queued (the oldest go).
func TestGossipQueueBounded(t *testing.T) {
	n := startNode(t, "rx", func(c *Config) { c.HintRate = 1e6; c.HintBurst = 1e6 })
	fakeMembers(n.Membership, "busy")
	n.SetHintHandlers(newSink(), nil)
	for i := range maxQueuedBroadcasts + 1000 {
		enc, _ := EncodeHint(Hint{Key: testKey(fmt.Sprint("k", i)), State: HintOpen, Generation: 1, Origin: "busy"})
		n.receiveHint(enc, false)
	}
	if q := n.queue.NumQueued(); q > maxQueuedBroadcasts {
		t.Errorf("%d broadcasts queued, want at most %d", q, maxQueuedBroadcasts)
	}
}
