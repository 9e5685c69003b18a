package authtoken

import (
	"errors"
	"strings"
	"testing"
)

const (
	tokA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" // 36 characters
	tokB = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	tokC = "cccccccccccccccccccccccccccccccccccc"
)

func TestParseGood(t *testing.T) {
	s, err := Parse([]byte("# fusebox API tokens\n\n  producer submit " + tokA + "\nops\tadmin\t" + tokB + "  # not a comment?\n"))
	if err == nil {
		t.Fatalf("a trailing field must be refused, got %v", s.Tokens())
	}
	s, err = Parse([]byte("# fusebox API tokens\n\n  producer submit " + tokA + "\nops\tadmin\t" + tokB + "\n# node-to-node\nnodes node " + tokC + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	if s.Len() != 3 || len(s.Warnings()) != 0 {
		t.Fatalf("len %d warnings %v", s.Len(), s.Warnings())
	}
	for tok, want := range map[string]string{tokA: "producer/submit", tokB: "ops/admin", tokC: "nodes/node"} {
		got, ok := s.Lookup(tok)
		if !ok || got.Name+"/"+got.Role.String() != want {
			t.Errorf("Lookup(%s…) = %v %v, want %s", tok[:3], got, ok, want)
		}
	}
	for _, bad := range []string{"", tokA[:35], tokA + "a", "x"} {
		if got, ok := s.Lookup(bad); ok {
			t.Errorf("Lookup(%q) = %v, want no match", bad, got)
		}
	}
	if s.Outgoing() != tokC {
		t.Errorf("Outgoing is not the node token")
	}
	for _, tk := range s.Tokens() {
		if tk.secret != "" {
			t.Errorf("Tokens() leaks the value of %s", tk.Name)
		}
	}
}

func TestParseLegacyBareToken(t *testing.T) {
	s, err := Parse([]byte("s3cret\n"))
	if err != nil {
		t.Fatal(err)
	}
	tk, ok := s.Lookup("s3cret")
	if !ok || tk.Name != "admin" || tk.Role != RoleAdmin || !tk.Legacy {
		t.Fatalf("%+v %v", tk, ok)
	}
	if len(s.Warnings()) != 1 || !strings.Contains(s.Warnings()[0], "6 characters") {
		t.Fatalf("warnings %v: want one about the short token", s.Warnings())
	}
	if s.Outgoing() != "s3cret" {
		t.Fatal("a legacy admin token is the node's outgoing token")
	}
	if s, _ := Parse([]byte("# comment\n" + tokA + "\n")); s == nil || len(s.Warnings()) != 0 {
		t.Fatalf("a long bare token: %v", s)
	}
}

func TestOutgoingFallsBackToAdmin(t *testing.T) {
	s, err := Parse([]byte("r read " + tokA + "\nboss admin " + tokB + "\nroot admin " + tokC + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	if s.Outgoing() != tokB {
		t.Fatal("want the first admin token")
	}
	if s, _ := Parse([]byte("r read " + tokA + "\n")); s.Outgoing() != "" {
		t.Fatal("no node or admin token: want no outgoing token")
	}
}

func TestParseBad(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		line       int
		field      string
		reason     string
	}{
		{"empty", "", 0, "", "no tokens"},
		{"only comments", "# x\n\n", 0, "", "no tokens"},
		{"two bare tokens", tokA + "\n" + tokB + "\n", 1, "", "only entry"},
		{"two fields", "# c\nname " + tokA + "\n", 2, "", "got 2 fields"},
		{"four fields", "n read " + tokA + " extra\n", 1, "", "got 4 fields"},
		{"bad name", "-x read " + tokA + "\n", 1, "name", "starting with"},
		{"duplicate name", "x read " + tokA + "\ny read " + tokB + "\nx admin " + tokC + "\n", 3, "name", "line 1"},
		{"unknown role", "x writer " + tokA + "\n", 1, "role", `"writer"`},
		{"short token", "x read short\n", 1, "token", "want at least 32"},
		{"duplicate token", "x read " + tokA + "\ny admin " + tokA + "\n", 2, "token", "same value as line 1"},
		{"control byte", "x read " + tokA + "\x7f\n", 1, "token", "not printable"},
		{"bare control byte", "ab\x01c\n", 1, "token", "not printable"},
		{"huge", strings.Repeat("#", MaxFileBytes+1), 0, "", "at most"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.file))
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("err = %v, want *ParseError", err)
			}
			if pe.Line != tc.line || pe.Field != tc.field || !strings.Contains(pe.Error(), tc.reason) {
				t.Fatalf("err = %q (line %d field %q), want line %d field %q containing %q", pe, pe.Line, pe.Field, tc.line, tc.field, tc.reason)
			}
			if strings.Contains(pe.Error(), tokA) || strings.Contains(pe.Error(), "short") && tc.name == "short token" {
				t.Fatalf("error quotes a token value: %q", pe)
			}
		})
	}
}

func TestRoles(t *testing.T) {
	rs := Of(RoleRead, RoleNode)
	if !rs.Has(RoleAdmin) || !rs.Has(RoleRead) || rs.Has(RoleSubmit) {
		t.Fatalf("%v", rs)
	}
	if rs.String() != "read, node or admin" || Of().String() != "admin" {
		t.Fatalf("%q %q", rs.String(), Of().String())
	}
	if _, err := ParseRole("root"); err == nil {
		t.Fatal("unknown role accepted")
	}
}

// A file saved with a UTF-8 byte-order mark is refused with the line and
// field named, not accepted with a name or token that silently differs.
func TestParseByteOrderMark(t *testing.T) {
	for _, file := range []string{"\xef\xbb\xbfops admin " + tokA + "\n", "\xef\xbb\xbf" + tokA + "\n"} {
		_, err := Parse([]byte(file))
		var pe *ParseError
		if !errors.As(err, &pe) || pe.Line != 1 {
			t.Fatalf("%q: %v; want a line 1 error", file[:8], err)
		}
	}
}
