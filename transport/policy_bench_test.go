package transport_test

import (
	"context"
	"fmt"
	"testing"

	"fusebox/transport"
)

// BenchmarkPolicyCheck is the submit-time check of one callback URL with
// n members (three listeners each): the list read and parsed at every
// check (a plain MemberAddrs) against once per membership version
// (VersionedMemberAddrs, what a node gives its policy).
func BenchmarkPolicyCheck(b *testing.B) {
	for _, n := range []int{5, 50} {
		var addrs []string
		for i := range n {
			for _, port := range []int{8080, 7000, 7946} {
				addrs = append(addrs, fmt.Sprintf("10.0.%d.%d:%d", i/250, i%250+1, port))
			}
		}
		versioned := &versionedMembers{}
		versioned.addrs.Store(&addrs)
		versioned.ready.Store(true)
		for _, c := range []struct {
			name    string
			members transport.MemberAddrs
		}{{"per-check", staticMembers(addrs)}, {"versioned", versioned}} {
			b.Run(fmt.Sprintf("members=%d/%s", n, c.name), func(b *testing.B) {
				p := &transport.Policy{Members: c.members, DefaultAllow: true}
				ctx := context.Background()
				for b.Loop() {
					if err := p.Check(ctx, "ns", "http://192.0.2.10:9000/callback"); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
