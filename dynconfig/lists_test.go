package dynconfig

import (
	"slices"
	"strings"
	"testing"
)

func TestAllowedAddresses(t *testing.T) {
	s, err := NewSnapshot([]Entry{
		ent(KeyCallbackAllowedAddresses, "", "", `[{"Pattern":"*.example.com"}]`),
		ent(KeyCallbackAllowedAddresses, "dev", "", `[{"Pattern":"127.0.0.1:*","AllowInsecure":true},{"Pattern":"api.partner.io:8443"}]`),
		ent(KeyCallbackAllowedAddresses, "locked", "", `[]`),
	})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		ns, scheme, host string
		want             bool
	}{
		{"other", "https", "cb.example.com", true},       // global rule
		{"other", "https", "a.b.example.com", true},      // '*' spans dots, as Temporal's
		{"other", "http", "cb.example.com", false},       // http needs AllowInsecure
		{"other", "https", "example.com", false},         // "*." needs a label
		{"other", "https", "cb.example.com.evil", false}, // anchored
		{"other", "https", "CB.EXAMPLE.COM", true},       // case-insensitive
		{"dev", "http", "127.0.0.1:9000", true},          // the namespace's list wins…
		{"dev", "https", "cb.example.com", false},        // …and replaces the global one
		{"dev", "https", "api.partner.io:8443", true},
		{"dev", "https", "api.partner.io", false}, // the port is part of the host
		{"locked", "https", "cb.example.com", false},
	}
	for _, c := range cases {
		rules, set := s.AllowedAddresses(c.ns)
		if !set {
			t.Fatalf("%s: allowlist not set", c.ns)
		}
		if got := rules.Allows(c.scheme, c.host); got != c.want {
			t.Errorf("namespace %s: Allows(%s, %s) = %v, want %v", c.ns, c.scheme, c.host, got, c.want)
		}
	}
	if _, set := (*Snapshot)(nil).AllowedAddresses("x"); set {
		t.Error("an empty snapshot reports an allowlist as set; the node default must apply")
	}
	// Every pattern of every list, for the dialer's IP-literal opt-in.
	pats := s.AllowedAddressPatterns()
	slices.Sort(pats)
	if want := []string{"*.example.com", "127.0.0.1:*", "api.partner.io:8443"}; !slices.Equal(pats, want) {
		t.Errorf("AllowedAddressPatterns() = %q, want %q", pats, want)
	}
	if pats := (*Snapshot)(nil).AllowedAddressPatterns(); pats != nil {
		t.Errorf("an empty snapshot has patterns %q", pats)
	}
}

func TestRedactHeaderNamesPrecedence(t *testing.T) {
	s, err := NewSnapshot([]Entry{
		ent(KeyRedactHeaderNames, "", "", `["X-Global"]`),
		ent(KeyRedactHeaderNames, "ns", "", `["X-Ns"]`),
		ent(KeyRedactHeaderNames, "ns", "https://h", `["X-Pair"]`),
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		ns, dest string
		want     []string
	}{
		{"", "", []string{"x-global"}},
		{"ns", "", []string{"x-ns"}},
		{"ns", "https://h", []string{"x-pair"}},
		{"other", "https://h", []string{"x-global"}},
	} {
		if got := s.RedactHeaderNames(c.ns, c.dest); !slices.Equal(got, c.want) {
			t.Errorf("RedactHeaderNames(%q, %q) = %v, want %v", c.ns, c.dest, got, c.want)
		}
	}
	if got := (*Snapshot)(nil).RedactHeaderNames("", ""); len(got) != 0 {
		t.Errorf("default = %v, want none", got)
	}
}

// FuzzAddressPattern: a pattern is accepted only if it is made of host
// characters and '*'; an accepted pattern matches itself with every '*'
// removed, never matches a string containing '/', '@' or '?', and its
// compiled form is anchored.
func FuzzAddressPattern(f *testing.F) {
	for _, p := range []string{"*", "*.example.com", "127.0.0.1:*", "[::1]:8080", "a.b", "https://x", "a/b", "a?b", "", "x.*.y"} {
		f.Add(p, "a.example.com")
	}
	f.Fuzz(func(t *testing.T, p, host string) {
		re, err := ParseAddressPattern(p)
		if err != nil {
			return
		}
		lp := strings.ToLower(p)
		if strings.ContainsAny(lp, "/@?# ") || len(p) > MaxAddressPatternBytes {
			t.Fatalf("pattern %q accepted", p)
		}
		if lit := strings.ReplaceAll(lp, "*", ""); !re.MatchString(lit) {
			t.Fatalf("pattern %q does not match %q", p, lit)
		}
		if re.MatchString(host) && strings.ContainsAny(host, "/@?") && !strings.Contains(lp, "*") {
			t.Fatalf("pattern %q without wildcard matches %q", p, host)
		}
		if !strings.Contains(lp, "*") && re.MatchString(host) && host != lp {
			t.Fatalf("literal pattern %q matches %q", p, host)
		}
	})
}
