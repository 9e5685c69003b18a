package authtoken

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"regexp"
	"strings"
)

// File-format limits: anything larger is a mistake, not a token file.
const (
	// MinTokenLength is the shortest named token accepted (32 characters,
	// e.g. `openssl rand -hex 16`). A legacy bare token is exempt, with a
	// warning.
	MinTokenLength = 32
	// MaxTokenLength bounds one token.
	MaxTokenLength = 512
	// MaxFileBytes bounds the file.
	MaxFileBytes = 1 << 20
	// MaxTokens bounds the entries (every lookup compares against all).
	MaxTokens = 1024
	// LegacyName is the name a file holding one bare token gives it.
	LegacyName = "admin"
)

var nameRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$`)

// Token is one named credential.
type Token struct {
	Name string
	Role Role
	// Legacy is set for a file holding one bare token.
	Legacy bool
	secret string
	digest [sha256.Size]byte
}

// Set is an immutable, parsed token file.
type Set struct {
	tokens   []Token
	warnings []string
}

// ParseError names the line and the field at fault; it never holds a
// token's value.
type ParseError struct {
	Line   int // 1-based; 0 for the file as a whole
	Field  string
	Reason string
}

func (e *ParseError) Error() string {
	if e.Line == 0 {
		return "token file: " + e.Reason
	}
	if e.Field == "" {
		return fmt.Sprintf("token file line %d: %s", e.Line, e.Reason)
	}
	return fmt.Sprintf("token file line %d: %s: %s", e.Line, e.Field, e.Reason)
}

// Parse reads a token file. Each entry is one line `<name> <role> <token>`
// separated by spaces or tabs; blank lines and lines starting with '#' are
// ignored. A file whose only entry is a single field is the legacy form: one
// bare admin token named "admin".
func Parse(data []byte) (*Set, error) {
	if len(data) > MaxFileBytes {
		return nil, &ParseError{Reason: fmt.Sprintf("%d bytes; at most %d", len(data), MaxFileBytes)}
	}
	type entry struct {
		line   int
		fields []string
	}
	var entries []entry
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), MaxFileBytes+1)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		entries = append(entries, entry{n, strings.Fields(line)})
	}
	if err := sc.Err(); err != nil {
		return nil, &ParseError{Reason: err.Error()}
	}
	if len(entries) == 0 {
		return nil, &ParseError{Reason: "no tokens (want lines of `<name> <role> <token>`)"}
	}
	if len(entries) > MaxTokens {
		return nil, &ParseError{Reason: fmt.Sprintf("%d tokens; at most %d", len(entries), MaxTokens)}
	}
	s := &Set{}
	if len(entries) == 1 && len(entries[0].fields) == 1 {
		tok := entries[0].fields[0]
		if err := checkSecret(tok, 1); err != nil {
			err.Line = entries[0].line
			return nil, err
		}
		if len(tok) < MinTokenLength {
			s.warnings = append(s.warnings, fmt.Sprintf("the bare admin token is %d characters; use %d or more (and named tokens, see docs/operations.md)", len(tok), MinTokenLength))
		}
		s.tokens = []Token{newToken(LegacyName, RoleAdmin, tok, true)}
		return s, nil
	}
	names := map[string]int{}
	digests := map[[sha256.Size]byte]int{}
	for _, e := range entries {
		if len(e.fields) != 3 {
			reason := fmt.Sprintf("want `<name> <role> <token>`, got %d fields", len(e.fields))
			if len(e.fields) == 1 {
				reason += " (a bare token is accepted only as the file's only entry)"
			}
			return nil, &ParseError{Line: e.line, Reason: reason}
		}
		name, roleName, secret := e.fields[0], e.fields[1], e.fields[2]
		if !nameRe.MatchString(name) {
			return nil, &ParseError{Line: e.line, Field: "name", Reason: fmt.Sprintf("%q: want 1–64 letters, digits, '.', '_', '@' or '-', starting with a letter or digit", clip(name))}
		}
		if prev, ok := names[name]; ok {
			return nil, &ParseError{Line: e.line, Field: "name", Reason: fmt.Sprintf("%q is already used on line %d", name, prev)}
		}
		names[name] = e.line
		role, err := ParseRole(roleName)
		if err != nil {
			return nil, &ParseError{Line: e.line, Field: "role", Reason: fmt.Sprintf("%q of token %q: want submit, read, node or admin", clip(roleName), name)}
		}
		if perr := checkSecret(secret, MinTokenLength); perr != nil {
			perr.Line = e.line
			perr.Reason += fmt.Sprintf(" (token %q)", name)
			return nil, perr
		}
		t := newToken(name, role, secret, false)
		if prev, ok := digests[t.digest]; ok {
			return nil, &ParseError{Line: e.line, Field: "token", Reason: fmt.Sprintf("token %q has the same value as line %d's; every token must be distinct", name, prev)}
		}
		digests[t.digest] = e.line
		s.tokens = append(s.tokens, t)
	}
	return s, nil
}

// checkSecret validates a token's value without ever quoting it.
func checkSecret(tok string, minLen int) *ParseError {
	if len(tok) < minLen {
		return &ParseError{Field: "token", Reason: fmt.Sprintf("%d characters; want at least %d", len(tok), minLen)}
	}
	if len(tok) > MaxTokenLength {
		return &ParseError{Field: "token", Reason: fmt.Sprintf("%d characters; at most %d", len(tok), MaxTokenLength)}
	}
	for i := 0; i < len(tok); i++ {
		if c := tok[i]; c < 0x21 || c > 0x7e {
			return &ParseError{Field: "token", Reason: fmt.Sprintf("byte %d is not printable ASCII", i+1)}
		}
	}
	return nil
}

func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

func newToken(name string, role Role, secret string, legacy bool) Token {
	return Token{Name: name, Role: role, Legacy: legacy, secret: secret, digest: sha256.Sum256([]byte(secret))}
}

// Single is a set of one admin token (named "admin"), for callers that
// hold a bare token (node.Config.AdminToken in tests). Empty gives nil.
func Single(token string) *Set {
	if token == "" {
		return nil
	}
	return &Set{tokens: []Token{newToken(LegacyName, RoleAdmin, token, true)}}
}

// Warnings are advice about an accepted file (a short legacy token).
func (s *Set) Warnings() []string {
	if s == nil {
		return nil
	}
	return s.warnings
}

// Len is the number of tokens; a nil set has none.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.tokens)
}

// Tokens lists the tokens' names and roles (never their values).
func (s *Set) Tokens() []Token {
	if s == nil {
		return nil
	}
	out := make([]Token, len(s.tokens))
	for i, t := range s.tokens {
		out[i] = Token{Name: t.Name, Role: t.Role, Legacy: t.Legacy}
	}
	return out
}

// Lookup finds the token whose value is presented. It compares SHA-256
// digests of the presented value against every token's, with no early
// exit, so the time taken depends on the number of tokens only: not on
// which one matched, how much of a value matched, or its length.
func (s *Set) Lookup(presented string) (Token, bool) {
	if s == nil {
		return Token{}, false
	}
	d := sha256.Sum256([]byte(presented))
	found := -1
	for i := range s.tokens {
		eq := subtle.ConstantTimeCompare(d[:], s.tokens[i].digest[:])
		found = subtle.ConstantTimeSelect(eq, i, found)
	}
	if found < 0 {
		return Token{}, false
	}
	t := s.tokens[found]
	return Token{Name: t.Name, Role: t.Role, Legacy: t.Legacy}, true
}

// Outgoing is the value a node presents to its peers: the first node
// token in the file, else the first admin token, else "".
func (s *Set) Outgoing() string {
	if s == nil {
		return ""
	}
	for _, want := range []Role{RoleNode, RoleAdmin} {
		for _, t := range s.tokens {
			if t.Role == want {
				return t.secret
			}
		}
	}
	return ""
}
