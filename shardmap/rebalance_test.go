package shardmap

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestNewValidates(t *testing.T) {
	for _, n := range []int{0, -1, MaxShards + 1} {
		if _, err := New(n); err == nil || !strings.Contains(err.Error(), "NumShards") {
			t.Errorf("New(%d) error = %v, want one naming NumShards", n, err)
		}
	}
	m := mustNew(t, 8)
	if m.Version != 0 || m.NumShards != 8 || len(m.Shards) != 8 {
		t.Fatalf("New(8) = %+v", m)
	}
	for i, a := range m.Shards {
		if a != (Assignment{Shard: i}) {
			t.Fatalf("New(8).Shards[%d] = %+v, want unowned at epoch 0", i, a)
		}
	}
}

func TestValidate(t *testing.T) {
	good := mustNew(t, 4)
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		m    *Map
		want string
	}{
		"nil":        {nil, "nil map"},
		"zero":       {&Map{}, "NumShards 0"},
		"huge":       {&Map{NumShards: MaxShards + 1}, "NumShards"},
		"short":      {&Map{NumShards: 4, Shards: good.Shards[:3]}, "Shards has 3 entries"},
		"misordered": {&Map{NumShards: 2, Shards: []Assignment{{Shard: 1}, {Shard: 0}}}, "Shards[0].Shard is 1"},
	} {
		err := c.m.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Validate() = %v, want error containing %q", name, err, c.want)
		}
		if _, _, err := Rebalance(c.m, []string{"a"}, nil); err == nil {
			t.Errorf("%s: Rebalance accepted an invalid map", name)
		}
		if _, _, err := Release(c.m, 0); err == nil {
			t.Errorf("%s: Release accepted an invalid map", name)
		}
	}
}

func TestRebalanceEpochs(t *testing.T) {
	m0 := mustNew(t, 64)
	m1, changed, err := Rebalance(m0, []string{"a", "b", "c"}, nil)
	if err != nil || !changed {
		t.Fatalf("first placement: changed=%v err=%v", changed, err)
	}
	if m1.Version != 1 {
		t.Fatalf("Version = %d, want 1", m1.Version)
	}
	for _, a := range m1.Shards {
		if a.Owner == "" || a.Epoch != 1 {
			t.Fatalf("after first placement %+v: want an owner at epoch 1 (\"\" → owner is a change)", a)
		}
	}
	if m0.Shards[0].Owner != "" || m0.Version != 0 {
		t.Fatal("Rebalance modified its argument")
	}

	// Unchanged input: prev itself, not committed again.
	same, changed, err := Rebalance(m1, []string{"c", "b", "a", "a"}, map[int]string{})
	if err != nil || changed || same != m1 {
		t.Fatalf("no-op rebalance: changed=%v same=%v err=%v", changed, same == m1, err)
	}

	// A join: epochs bump exactly for the shards that moved.
	m2 := mustRebalance(t, m1, []string{"a", "b", "c", "d"}, nil)
	if m2.Version != 2 {
		t.Fatalf("Version = %d, want 2", m2.Version)
	}
	moved := 0
	for i, a := range m2.Shards {
		old := m1.Shards[i]
		switch {
		case a.Owner != old.Owner:
			moved++
			if a.Owner != "d" || a.Epoch != old.Epoch+1 {
				t.Errorf("shard %d moved %s→%s epoch %d→%d", i, old.Owner, a.Owner, old.Epoch, a.Epoch)
			}
		case a.Epoch != old.Epoch:
			t.Errorf("shard %d kept owner %s but epoch went %d→%d", i, a.Owner, old.Epoch, a.Epoch)
		}
	}
	if moved == 0 {
		t.Fatal("a join moved no shard")
	}

	// Everyone gone: every owner is "", every epoch bumps, so a returning
	// owner is fenced.
	m3 := mustRebalance(t, m2, nil, nil)
	for i, a := range m3.Shards {
		if a.Owner != "" || a.Epoch != m2.Shards[i].Epoch+1 {
			t.Fatalf("with no members shard %d = %+v (was %+v)", i, a, m2.Shards[i])
		}
	}
	if _, changed, _ := Rebalance(m3, []string{""}, nil); changed {
		t.Fatal("no members twice changed the map")
	}
	// They come back: placed as a fresh cluster would be (nothing to keep).
	m4 := mustRebalance(t, m3, []string{"a", "b", "c", "d"}, nil)
	fresh := mustRebalance(t, m0, []string{"a", "b", "c", "d"}, nil)
	for i, a := range m4.Shards {
		if a.Owner != fresh.Shards[i].Owner || a.Epoch != m2.Shards[i].Epoch+2 {
			t.Fatalf("after return shard %d = %+v, want owner %s at epoch %d", i, a, fresh.Shards[i].Owner, m2.Shards[i].Epoch+2)
		}
		if err := CheckEpoch(m4, i, a.Owner, m2.Shards[i].Epoch); !errors.Is(err, ErrWrongOwner) {
			t.Fatalf("old epoch of shard %d accepted after the owner came back: %v", i, err)
		}
	}
}

func TestRebalancePins(t *testing.T) {
	members := []string{"a", "b", "c"}
	m1 := mustRebalance(t, mustNew(t, 32), members, nil)
	// Pin shard 5 to a node that does not own it now.
	target := "a"
	if m1.Shards[5].Owner == "a" {
		target = "b"
	}
	pins := map[int]string{5: target, 6: ""}
	m2, changed, err := Rebalance(m1, members, pins)
	if err != nil || !changed {
		t.Fatalf("pin: changed=%v err=%v", changed, err)
	}
	if a := m2.Shards[5]; a.Owner != target || a.Pinned != target || a.Epoch != m1.Shards[5].Epoch+1 {
		t.Fatalf("pinned shard = %+v, want owner and pin %s at epoch %d", a, target, m1.Shards[5].Epoch+1)
	}
	if m2.Shards[6].Pinned != "" {
		t.Fatalf("a \"\" pin recorded: %+v", m2.Shards[6])
	}
	for i, a := range m2.Shards {
		if i != 5 && a != m1.Shards[i] {
			t.Fatalf("pinning shard 5 changed shard %d: %+v → %+v", i, m1.Shards[i], a)
		}
	}
	if got := m2.Pins(); len(got) != 1 || got[5] != target {
		t.Fatalf("Pins() = %v", got)
	}

	// The pinned node dies: placement takes over, the pin stays recorded.
	alive := Drain(members, target)
	m3 := mustRebalance(t, m2, alive, m2.Pins())
	if a := m3.Shards[5]; a.Owner == target || a.Owner == "" || a.Pinned != target {
		t.Fatalf("pin to dead node: %+v, want placed on a live node, pin kept", a)
	}
	// It returns: the shard goes back to it, with a new epoch.
	m4 := mustRebalance(t, m3, members, m3.Pins())
	if a := m4.Shards[5]; a.Owner != target || a.Epoch != m3.Shards[5].Epoch+1 {
		t.Fatalf("pinned node back: %+v", a)
	}

	// Unpin: the shard counts towards the balance again. If that puts its
	// holder over its share, one shard (shard 5 or another of the holder's)
	// moves; nothing else does.
	m5 := mustRebalance(t, m4, members, nil)
	if a := m5.Shards[5]; a.Pinned != "" {
		t.Fatalf("unpinned: %+v", a)
	}
	checkBalanced(t, ownersOf(m5), members)
	moved := 0
	for i, a := range m5.Shards {
		if a.Owner != m4.Shards[i].Owner {
			moved++
			if m4.Shards[i].Owner != target {
				t.Errorf("unpin moved shard %d off %s; only %s was over its share", i, m4.Shards[i].Owner, target)
			}
		}
	}
	if moved > 1 {
		t.Errorf("unpin moved %d shards, want at most 1", moved)
	}

	// A pin outside the map is refused, naming the shard.
	for _, s := range []int{-1, 32} {
		_, _, err := Rebalance(m1, members, map[int]string{s: "a"})
		if !errors.Is(err, ErrNoSuchShard) {
			t.Errorf("pin of shard %d: err = %v, want ErrNoSuchShard", s, err)
		}
	}
}

func TestReleaseGivesNewEpoch(t *testing.T) {
	members := []string{"node-1", "node-2", "node-3"}
	m1 := mustRebalance(t, mustNew(t, 16), members, map[int]string{3: "node-2"})
	owner, epoch := m1.Shards[3].Owner, m1.Shards[3].Epoch

	m2, changed, err := Release(m1, 3, 3)
	if err != nil || !changed || m2.Version != m1.Version+1 {
		t.Fatalf("Release: changed=%v err=%v version=%d", changed, err, m2.Version)
	}
	if a := m2.Shards[3]; a.Owner != "" || a.Epoch != epoch+1 || a.Pinned != "node-2" {
		t.Fatalf("released shard = %+v, want unowned at epoch %d, pin kept", a, epoch+1)
	}
	if err := CheckEpoch(m2, 3, owner, epoch); !errors.Is(err, ErrWrongOwner) {
		t.Fatalf("old owner not fenced after release: %v", err)
	}
	for i, a := range m2.Shards {
		if i != 3 && a != m1.Shards[i] {
			t.Fatalf("Release(3) changed shard %d", i)
		}
	}
	// Re-placed on the same node, with a new epoch.
	m3 := mustRebalance(t, m2, members, m2.Pins())
	if a := m3.Shards[3]; a.Owner != owner || a.Epoch != epoch+2 {
		t.Fatalf("after close shard 3 = %+v, want %s at epoch %d", a, owner, epoch+2)
	}
	if err := CheckEpoch(m3, 3, owner, epoch); !errors.Is(err, ErrWrongOwner) {
		t.Fatal("pre-close epoch accepted after re-acquire on the same node")
	}
	if err := CheckEpoch(m3, 3, owner, epoch+2); err != nil {
		t.Fatalf("new epoch refused: %v", err)
	}

	// Close every shard at once: all land where they were, all with a new epoch.
	all := make([]int, m3.NumShards)
	for i := range all {
		all[i] = i
	}
	released, _, err := Release(m3, all...)
	if err != nil {
		t.Fatal(err)
	}
	m4 := mustRebalance(t, released, members, released.Pins())
	for i, a := range m4.Shards {
		if a.Owner != m3.Shards[i].Owner || a.Epoch != m3.Shards[i].Epoch+2 {
			t.Fatalf("close-all: shard %d %+v → %+v", i, m3.Shards[i], a)
		}
	}

	// Releasing an unowned shard is a no-op; an unknown shard is an error.
	if same, changed, err := Release(m2, 3); err != nil || changed || same != m2 {
		t.Fatalf("release of unowned shard: changed=%v err=%v", changed, err)
	}
	if _, _, err := Release(m1, 16); !errors.Is(err, ErrNoSuchShard) {
		t.Fatalf("Release(16) err = %v, want ErrNoSuchShard", err)
	}
}

func TestDrain(t *testing.T) {
	members := nodeIDs("node-", 5)
	m1 := mustRebalance(t, mustNew(t, 256), members, map[int]string{7: "node-3"})
	if len(m1.OwnedBy("node-3")) == 0 {
		t.Fatal("node-3 owns nothing before the drain")
	}
	drained := Drain(members, "node-3")
	if len(members) != 5 || slices.Contains(drained, "node-3") || len(drained) != 4 {
		t.Fatalf("Drain = %v (members %v)", drained, members)
	}
	m2 := mustRebalance(t, m1, drained, m1.Pins())
	if got := m2.OwnedBy("node-3"); len(got) != 0 {
		t.Fatalf("node-3 still owns %v after the drain", got)
	}
	for i, a := range m2.Shards {
		if m1.Shards[i].Owner != "node-3" && a.Owner != m1.Shards[i].Owner {
			t.Fatalf("drain moved shard %d, which node-3 did not own", i)
		}
	}
	if m2.Shards[7].Pinned != "node-3" {
		t.Fatal("drain dropped the pin")
	}
}

func TestOwnerAndOwnedBy(t *testing.T) {
	var nilMap *Map
	if _, ok := nilMap.Owner(0); ok {
		t.Fatal("Owner on nil map returned ok")
	}
	if nilMap.OwnedBy("a") != nil {
		t.Fatal("OwnedBy on nil map")
	}
	m := mustRebalance(t, mustNew(t, 100), []string{"a", "b"}, nil)
	for _, s := range []int{-1, 100, 1 << 40} {
		if _, ok := m.Owner(s); ok {
			t.Errorf("Owner(%d) ok on a 100-shard map", s)
		}
	}
	total := 0
	for _, node := range []string{"a", "b"} {
		owned := m.OwnedBy(node)
		if !slices.IsSorted(owned) {
			t.Errorf("OwnedBy(%s) not sorted", node)
		}
		for _, s := range owned {
			if a, ok := m.Owner(s); !ok || a.Owner != node || a.Shard != s {
				t.Errorf("OwnedBy(%s) has %d, Owner says %+v", node, s, a)
			}
		}
		total += len(owned)
	}
	if total != 100 || m.OwnedBy("") != nil || m.OwnedBy("c") != nil {
		t.Fatalf("OwnedBy covers %d shards", total)
	}
}

func TestMapJSONRoundTrip(t *testing.T) {
	m := mustRebalance(t, mustNew(t, 8), []string{"a", "b"}, map[int]string{2: "b"})
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	for _, field := range []string{`"version":1`, `"num_shards":8`, `"owner":"`, `"epoch":1`, `"pinned":"b"`} {
		if !strings.Contains(string(b), field) {
			t.Errorf("JSON %s lacks %s", b, field)
		}
	}
	var back Map
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if err := back.Validate(); err != nil || !back.Equal(m) {
		t.Fatalf("round trip: %v, equal=%v", err, back.Equal(m))
	}
	back.Shards[0].Epoch++
	if back.Equal(m) || m.Equal(nil) || !(*Map)(nil).Equal(nil) {
		t.Fatal("Equal")
	}
}
