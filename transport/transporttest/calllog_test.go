package transporttest

import (
	"fmt"
	"testing"
)

// TestCallLogAcrossChunks records more calls than a chunk holds, of two
// kinds, and checks that every call comes back once in arrival order and
// that the counts agree with them.
func TestCallLogAcrossChunks(t *testing.T) {
	var l callLog
	const n = 2*callChunk + 7
	for i := range n {
		k := KindCallback
		if i%3 == 0 {
			k = KindHealth
		}
		l.add(Call{Kind: k, RequestID: fmt.Sprint(i)})
	}
	all := l.all()
	if len(all) != n || l.n != n {
		t.Fatalf("%d calls returned, %d counted, want %d", len(all), l.n, n)
	}
	health := 0
	for i, c := range all {
		if c.RequestID != fmt.Sprint(i) {
			t.Fatalf("call %d has request id %q: out of order", i, c.RequestID)
		}
		if c.Kind == KindHealth {
			health++
		}
	}
	if l.byKind[KindHealth] != health || l.byKind[KindCallback] != n-health {
		t.Fatalf("counts %v, want %d health and %d callback", l.byKind, health, n-health)
	}
}
