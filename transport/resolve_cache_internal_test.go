package transport

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"
)

type countingResolver struct {
	mu    sync.Mutex
	calls map[string]int
}

func (r *countingResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls[host]++
	return []netip.Addr{netip.MustParseAddr("192.0.2.1")}, nil
}

// A full lookup cache drops its expired entries before it is wiped: one
// tenant's many hosts, looked up once long ago, no longer make every other
// tenant's next submit look its host up again.
func TestResolveCacheDropsExpiredFirst(t *testing.T) {
	r := &countingResolver{calls: map[string]int{}}
	p := &Policy{Resolver: r}
	ctx := context.Background()
	p.lookup(ctx, "keep.example")
	p.mu.Lock()
	for i := range resolveEntries - 1 {
		p.resolved[fmt.Sprintf("old-%d.example", i)] = resolvedHost{at: time.Now().Add(-time.Minute)}
	}
	p.mu.Unlock()
	p.lookup(ctx, "new.example") // the cache is full
	p.lookup(ctx, "keep.example")
	if n := r.calls["keep.example"]; n != 1 {
		t.Fatalf("a fresh entry was looked up %d times; the expired ones should have made room", n)
	}
	if n := len(p.resolved); n != 2 {
		t.Fatalf("%d entries kept, want the 2 fresh ones", n)
	}
}
