package shardmap

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// nodeIDs returns n node ids "prefix1" … "prefixN".
func nodeIDs(prefix string, n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = prefix + itoa(i+1)
	}
	return ids
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b [20]byte
	p := len(b)
	for ; i > 0; i /= 10 {
		p--
		b[p] = byte('0' + i%10)
	}
	return string(b[p:])
}

// fataler is what the helpers need of *testing.T and *rapid.T.
type fataler interface {
	Helper()
	Fatal(args ...any)
}

// mustNew is New for tests.
func mustNew(t fataler, n int) *Map {
	t.Helper()
	m, err := New(n)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// mustRebalance is Rebalance for tests; it returns the next map.
func mustRebalance(t fataler, prev *Map, members []string, pins map[int]string) *Map {
	t.Helper()
	next, _, err := Rebalance(prev, members, pins)
	if err != nil {
		t.Fatal(err)
	}
	return next
}
