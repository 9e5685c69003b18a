package shardmap

import (
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// TestRebalanceProperties runs random sequences of joins, leaves, pins,
// unpins, closes and drains, and checks after every step that each shard has
// exactly one owner, a live member (when any member is live), pins are
// honoured, epochs never decrease and move exactly with owners, versions
// move by one per committed change, and movement is minimal.
func TestRebalanceProperties(t *testing.T) {
	pool := []string{"node-1", "node-2", "node-3", "node-4", "node-5", "7f3a9c", "c0ffee-01", "z"}
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 48).Draw(t, "shards")
		cur := mustNew(t, n)
		live := map[string]bool{}
		pins := map[int]string{}

		members := func() []string {
			var out []string
			for _, id := range pool {
				if live[id] {
					out = append(out, id)
				}
			}
			return out
		}
		// rebalance commits Rebalance(cur, ms, pins) after checking its
		// contract against cur.
		rebalance := func(t *rapid.T, ms []string) {
			prev := cur
			next, changed, err := Rebalance(prev, ms, pins)
			if err != nil {
				t.Fatal(err)
			}
			checkStep(t, prev, next, changed)
			for i, a := range next.Shards {
				if a.Pinned != pins[i] {
					t.Fatalf("shard %d Pinned %q, pins say %q", i, a.Pinned, pins[i])
				}
				if a.Owner != prev.Shards[i].Owner && a.Epoch != prev.Shards[i].Epoch+1 {
					t.Fatalf("shard %d changed owner %q→%q but epoch %d→%d", i, prev.Shards[i].Owner, a.Owner, prev.Shards[i].Epoch, a.Epoch)
				}
			}
			// Same inputs in another order give the same map.
			shuffled := slices.Clone(ms)
			rand.New(rand.NewPCG(uint64(len(ms)), next.Version)).Shuffle(len(shuffled), func(i, j int) {
				shuffled[i], shuffled[j] = shuffled[j], shuffled[i]
			})
			again, _, err := Rebalance(prev, shuffled, pins)
			if err != nil || !again.Equal(next) {
				t.Fatalf("Rebalance depends on member order (%v vs %v)", ms, shuffled)
			}
			// And applying it again is a no-op.
			if same, changed, _ := Rebalance(next, ms, pins); changed || same != next {
				t.Fatal("Rebalance of its own result changed the map")
			}
			checkOwners(t, next, ms, pins)
			checkFreeBalanced(t, next, ms, pins)
			cur = next
		}

		t.Repeat(map[string]func(*rapid.T){
			"join": func(t *rapid.T) {
				id := rapid.SampledFrom(pool).Draw(t, "node")
				if live[id] {
					t.Skip("already live")
				}
				before := cur
				live[id] = true
				rebalance(t, members())
				if slices.Contains(slices.Collect(maps.Values(pins)), id) {
					// A pin to the joiner takes effect: that shard leaves
					// the balanced set, and restoring the balance may
					// move one shard between old members.
					return
				}
				for i, a := range cur.Shards {
					if a.Owner != before.Shards[i].Owner && before.Shards[i].Owner != "" && a.Owner != id && a.Owner != pins[i] {
						t.Fatalf("join of %s moved shard %d %s→%s", id, i, before.Shards[i].Owner, a.Owner)
					}
				}
			},
			"leave": func(t *rapid.T) {
				id := rapid.SampledFrom(pool).Draw(t, "node")
				if !live[id] {
					t.Skip("not live")
				}
				before := cur
				delete(live, id)
				rebalance(t, members())
				for i, a := range cur.Shards {
					if a.Owner != before.Shards[i].Owner && before.Shards[i].Owner != id && pins[i] != id {
						t.Fatalf("leave of %s moved shard %d %s→%s", id, i, before.Shards[i].Owner, a.Owner)
					}
				}
			},
			"pin": func(t *rapid.T) {
				pins[rapid.IntRange(0, n-1).Draw(t, "shard")] = rapid.SampledFrom(pool).Draw(t, "node")
				rebalance(t, members())
			},
			"unpin": func(t *rapid.T) {
				delete(pins, rapid.IntRange(0, n-1).Draw(t, "shard"))
				rebalance(t, members())
			},
			"close": func(t *rapid.T) {
				shards := rapid.SliceOfN(rapid.IntRange(0, n-1), 1, 4).Draw(t, "shards")
				prev := cur
				released, changed, err := Release(prev, shards...)
				if err != nil {
					t.Fatal(err)
				}
				checkStep(t, prev, released, changed)
				for i, a := range released.Shards {
					old := prev.Shards[i]
					closed := slices.Contains(shards, i) && old.Owner != ""
					switch {
					case closed && (a.Owner != "" || a.Epoch != old.Epoch+1 || a.Pinned != old.Pinned):
						t.Fatalf("closed shard %d: %+v → %+v", i, old, a)
					case !closed && a != old:
						t.Fatalf("close of %v changed shard %d", shards, i)
					}
				}
				cur = released
				rebalance(t, members())
				for _, s := range shards {
					if o := prev.Shards[s]; o.Owner != "" && cur.Shards[s].Epoch <= o.Epoch+1 {
						t.Fatalf("closed shard %d re-acquired at epoch %d, was %d", s, cur.Shards[s].Epoch, o.Epoch)
					}
				}
			},
			"drain": func(t *rapid.T) {
				id := rapid.SampledFrom(pool).Draw(t, "node")
				if !live[id] {
					t.Skip("not live")
				}
				rebalance(t, Drain(members(), id))
				if owned := cur.OwnedBy(id); len(owned) != 0 {
					t.Fatalf("drained %s still owns %v", id, owned)
				}
				rebalance(t, members()) // drain over
			},
		})
	})
}

// checkStep checks what every map-producing call promises: a valid map,
// prev returned untouched when nothing changed, Version+1 otherwise, and no
// epoch going down.
func checkStep(t *rapid.T, prev, next *Map, changed bool) {
	if err := next.Validate(); err != nil {
		t.Fatal(err)
	}
	if !changed {
		if next != prev {
			t.Fatal("unchanged but a new map was returned")
		}
		return
	}
	if next.Version != prev.Version+1 || next.NumShards != prev.NumShards {
		t.Fatalf("version %d→%d, shards %d→%d", prev.Version, next.Version, prev.NumShards, next.NumShards)
	}
	differs := false
	for i, a := range next.Shards {
		if a.Epoch < prev.Shards[i].Epoch {
			t.Fatalf("shard %d epoch went down %d→%d", i, prev.Shards[i].Epoch, a.Epoch)
		}
		differs = differs || a != prev.Shards[i]
	}
	if !differs {
		t.Fatal("changed reported for an identical map")
	}
}

// checkOwners checks that each shard's single owner is a live member (or ""
// when none is live) and that live pins are honoured.
func checkOwners(t *rapid.T, m *Map, members []string, pins map[int]string) {
	for i, a := range m.Shards {
		if len(members) == 0 {
			if a.Owner != "" {
				t.Fatalf("no live members but shard %d owned by %s", i, a.Owner)
			}
			continue
		}
		if !slices.Contains(members, a.Owner) {
			t.Fatalf("shard %d owned by %q, not a live member of %v", i, a.Owner, members)
		}
		if p := pins[i]; p != "" && slices.Contains(members, p) && a.Owner != p {
			t.Fatalf("shard %d pinned to live %s but owned by %s", i, p, a.Owner)
		}
		if err := CheckEpoch(m, i, a.Owner, a.Epoch); err != nil {
			t.Fatalf("owner refused by CheckEpoch: %v", err)
		}
	}
	total := 0
	for _, id := range members {
		total += len(m.OwnedBy(id))
	}
	if len(members) > 0 && total != m.NumShards {
		t.Fatalf("OwnedBy over live members covers %d of %d shards", total, m.NumShards)
	}
}

// checkFreeBalanced checks the balance bound with pins: the shards not
// pinned to a live member are spread so that every live member owns
// ⌊F/k⌋ or ⌈F/k⌉ of them.
func checkFreeBalanced(t *rapid.T, m *Map, members []string, pins map[int]string) {
	if len(members) == 0 {
		return
	}
	free := map[string]int{}
	total := 0
	for i, a := range m.Shards {
		if p := pins[i]; p != "" && slices.Contains(members, p) {
			continue
		}
		free[a.Owner]++
		total++
	}
	lo, hi := total/len(members), (total+len(members)-1)/len(members)
	for _, id := range members {
		if c := free[id]; c < lo || c > hi {
			t.Fatalf("%s owns %d unpinned shards, want %d..%d (%v)", id, c, lo, hi, free)
		}
	}
}

// TestPlacementBoundsProperty checks the placement bounds for random shard
// counts, cluster sizes and node names, through a random sequence of joins
// and leaves: after every step each member owns ⌊S/N⌋ or ⌈S/N⌉ shards (so
// max/mean ≤ ⌈S/N⌉/(S/N)); a join moves shards only to the joiner, and
// only its share; a leave moves exactly the leaver's shards; the result
// does not depend on member order; and the same inputs give the same map.
func TestPlacementBoundsProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := rapid.IntRange(1, 2048).Draw(t, "shards")
		name := rapid.StringMatching(`[a-z0-9][a-z0-9.:-]{0,20}`)
		members := rapid.SliceOfNDistinct(name, 1, 24, rapid.ID[string]).Draw(t, "members")
		cur := mustRebalance(t, mustNew(t, s), members, nil)
		checkBalanced(t, ownersOf(cur), members)

		for step := range rapid.IntRange(1, 6).Draw(t, "steps") {
			prev, before := cur, slices.Clone(members)
			join := len(members) == 1 || rapid.Bool().Draw(t, "join")
			var who string
			if join {
				who = name.Filter(func(id string) bool { return !slices.Contains(members, id) }).Draw(t, "joiner")
				members = append(members, who)
			} else {
				i := rapid.IntRange(0, len(members)-1).Draw(t, "leaver")
				who = members[i]
				members = slices.Delete(members, i, i+1)
			}
			cur = mustRebalance(t, prev, members, nil)
			owners := ownersOf(cur)
			checkBalanced(t, owners, members)

			moved := 0
			for i, a := range cur.Shards {
				was := prev.Shards[i].Owner
				if a.Owner == was {
					continue
				}
				moved++
				if join && a.Owner != who {
					t.Fatalf("step %d: join of %s moved shard %d %s → %s", step, who, i, was, a.Owner)
				}
				if !join && was != who {
					t.Fatalf("step %d: leave of %s moved shard %d %s → %s", step, who, i, was, a.Owner)
				}
			}
			if share := loads(ownersOf(prev))[who]; !join && moved != share {
				t.Fatalf("step %d: leave of %s moved %d shards, it owned %d", step, who, moved, share)
			}
			if join && (moved != loads(owners)[who] || moved > (s+len(members)-1)/len(members)) {
				t.Fatalf("step %d: join of %s moved %d shards to a node now owning %d (S=%d, N=%d)", step, who, moved, loads(owners)[who], s, len(members))
			}

			shuffled := rapid.Permutation(members).Draw(t, "order")
			again, _, err := Rebalance(prev, append(shuffled, shuffled[0], ""), nil)
			if err != nil || !again.Equal(cur) {
				t.Fatalf("step %d: placement depends on member order (%v vs %v)", step, before, shuffled)
			}
		}
	})
}
