package shardmap

import (
	"hash/fnv"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestShardOfGolden pins the hash. If this fails, every existing cluster's
// workflows would change shards: do not update the values, revert the change.
func TestShardOfGolden(t *testing.T) {
	for _, c := range []struct {
		ns, wf     string
		hash       uint64
		s1024, s4k int
	}{
		{"", "", 0x96c655313fb7adaf, 431, 3503},
		{"ns", "wf", 0x2f6ab02a53c8a589, 393, 1417},
		{"7c1b2f4e-2d8a-4b8e-9a55-0f3c2e8d1a77", "order-12345", 0xe4afacaa146cf2d5, 725, 725},
	} {
		if got := KeyHash(c.ns, c.wf); got != c.hash {
			t.Errorf("KeyHash(%q, %q) = %#x, want %#x", c.ns, c.wf, got, c.hash)
		}
		if got := ShardOf(c.ns, c.wf, 1024); got != c.s1024 {
			t.Errorf("ShardOf(%q, %q, 1024) = %d, want %d", c.ns, c.wf, got, c.s1024)
		}
		if got := ShardOf(c.ns, c.wf, 4096); got != c.s4k {
			t.Errorf("ShardOf(%q, %q, 4096) = %d, want %d", c.ns, c.wf, got, c.s4k)
		}
	}
}

// refKeyHash is the documented definition built from the standard library:
// FNV-1a 64 of namespaceID + "_" + workflowID, then the SplitMix64 finalizer.
func refKeyHash(ns, wf string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(ns + "_" + wf))
	return mix64(h.Sum64())
}

func TestKeyHashMatchesDefinition(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	for range 1000 {
		ns, wf := randString(r, 40), randString(r, 80)
		if got, want := KeyHash(ns, wf), refKeyHash(ns, wf); got != want {
			t.Fatalf("KeyHash(%q, %q) = %#x, want %#x", ns, wf, got, want)
		}
	}
}

func TestShardOfRange(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	for _, n := range []int{1, 2, 3, 7, 1024, 4096, 1 << 20} {
		for range 2000 {
			ns, wf := randString(r, 20), randString(r, 30)
			s := ShardOf(ns, wf, n)
			if s < 0 || s >= n {
				t.Fatalf("ShardOf(..., %d) = %d, out of range", n, s)
			}
			if s2 := ShardOf(ns, wf, n); s2 != s {
				t.Fatalf("ShardOf not deterministic: %d then %d", s, s2)
			}
		}
	}
	for _, n := range []int{0, -1, -1 << 62} {
		if s := ShardOf("ns", "wf", n); s != 0 {
			t.Errorf("ShardOf(..., %d) = %d, want 0", n, s)
		}
	}
}

// TestShardOfUniform is a chi-square goodness-of-fit test of ShardOf over
// sequential workflow ids (the adversarial case for a weak hash: inputs that
// differ only in their last bytes). For 1023 degrees of freedom the statistic
// has mean 1023 and standard deviation ~45; 1300 is ~6 standard deviations.
func TestShardOfUniform(t *testing.T) {
	const n, perShard = 1024, 100
	counts := make([]int, n)
	for i := range n * perShard {
		counts[ShardOf("7c1b2f4e-2d8a-4b8e-9a55-0f3c2e8d1a77", "wf-"+itoa(i), n)]++
	}
	if chi := chiSquare(counts); chi > 1300 {
		t.Fatalf("chi-square %.0f over %d shards: ShardOf is not uniform", chi, n)
	}
}

func TestShardOfNoAlloc(t *testing.T) {
	ns := strings.Repeat("\xff\x00", 1<<16)
	allocs := testing.AllocsPerRun(20, func() {
		_ = ShardOf(ns, ns, 1024)
	})
	if allocs != 0 {
		t.Fatalf("ShardOf allocates %.0f times per call", allocs)
	}
}

// FuzzShardOf checks the hash on arbitrary bytes: never panics, always in
// range, deterministic, and equal to the documented definition.
func FuzzShardOf(f *testing.F) {
	f.Add("", "", 1024)
	f.Add("ns", "wf", 1)
	f.Add("\xff\xfe\x00", strings.Repeat("x", 4096), 7)
	f.Add("a_b", "c", -5)
	f.Fuzz(func(t *testing.T, ns, wf string, n int) {
		s := ShardOf(ns, wf, n)
		want := 0
		if n > 1 {
			want = int(refKeyHash(ns, wf) % uint64(n))
		}
		if s != want {
			t.Fatalf("ShardOf(%q, %q, %d) = %d, want %d", ns, wf, n, s, want)
		}
		if n >= 1 && (s < 0 || s >= n) {
			t.Fatalf("ShardOf(..., %d) = %d, out of range", n, s)
		}
	})
}

func chiSquare(counts []int) float64 {
	total := 0
	for _, c := range counts {
		total += c
	}
	exp := float64(total) / float64(len(counts))
	var chi float64
	for _, c := range counts {
		d := float64(c) - exp
		chi += d * d / exp
	}
	return chi
}

func randString(r *rand.Rand, maxLen int) string {
	b := make([]byte, r.IntN(maxLen+1))
	for i := range b {
		b[i] = byte(r.UintN(256))
	}
	return string(b)
}
