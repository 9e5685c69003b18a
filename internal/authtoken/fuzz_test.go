package authtoken

import (
	"strings"
	"testing"
)

// FuzzParse: any input either parses into a set whose every token is found
// by its own value under its own name, or fails with a *ParseError that
// never quotes a token value.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"", "tok\n", "# c\n" + tokA + "\n",
		"p submit " + tokA + "\nn node " + tokB + "\na admin " + tokC + "\n",
		"x read short\n", "x writer " + tokA, "a read " + tokA + "\na read " + tokB,
		"a read " + tokA + "\nb read " + tokA, "\t \r\n#\n  x   read   " + tokA + "  \r\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Parse(data)
		if err != nil {
			if _, ok := err.(*ParseError); !ok {
				t.Fatalf("error %T %v, want *ParseError", err, err)
			}
			return
		}
		if s.Len() == 0 {
			t.Fatal("a parsed set with no tokens")
		}
		names := map[string]bool{}
		for _, tk := range s.tokens {
			if names[tk.Name] {
				t.Fatalf("duplicate name %q", tk.Name)
			}
			names[tk.Name] = true
			got, ok := s.Lookup(tk.secret)
			if !ok || got.Name != tk.Name || got.Role != tk.Role {
				t.Fatalf("Lookup of %q's own value = %v %v", tk.Name, got, ok)
			}
			if strings.ContainsAny(tk.secret, " \t\r\n") || tk.secret == "" {
				t.Fatalf("token value with whitespace or empty: %q", tk.secret)
			}
			if !tk.Legacy && len(tk.secret) < MinTokenLength {
				t.Fatalf("named token %q shorter than %d", tk.Name, MinTokenLength)
			}
		}
	})
}
