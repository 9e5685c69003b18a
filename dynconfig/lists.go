package dynconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Limits of the list keys.
const (
	// MaxListEntries bounds the entries of a list value.
	MaxListEntries = 100
	// MaxHeaderNameBytes bounds one header name of KeyRedactHeaderNames.
	MaxHeaderNameBytes = 128
	// MaxAddressPatternBytes bounds one Pattern of KeyCallbackAllowedAddresses
	// (a 253-byte DNS name, ':' and a 5-digit port, with room for brackets).
	MaxAddressPatternBytes = 261
)

// headerNamesKey registers a list of HTTP header names. The canonical form
// is lower case, sorted, without duplicates.
func headerNamesKey(name string, scope Scope, desc string) *definition {
	decode := func(raw []byte) (any, *ValidationError) {
		items, err := decodeArray(raw)
		if err != nil {
			return nil, err
		}
		out := make([]string, 0, len(items))
		for i, it := range items {
			var s string
			if len(it) == 0 || it[0] != '"' || json.Unmarshal(it, &s) != nil {
				return nil, &ValidationError{Field: fmt.Sprintf("[%d]", i), Reason: "want a header name string, got " + echo(it)}
			}
			if len(s) > MaxHeaderNameBytes || !validToken(s) {
				return nil, &ValidationError{Field: fmt.Sprintf("[%d]", i),
					Reason: fmt.Sprintf("not an HTTP header name (1-%d token characters): %s", MaxHeaderNameBytes, strconv.Quote(truncate(s, maxEcho)))}
			}
			out = append(out, strings.ToLower(s))
		}
		slices.Sort(out)
		return slices.Compact(out), nil
	}
	return newDefinition(name, "list(string)", desc, scope, []string{}, decode, mustMarshal)
}

// validToken reports whether s is an RFC 9110 token (a header name).
func validToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// AddressRule is one entry of component.callbacks.allowedAddresses, spelled
// as in Temporal: Pattern is a host[:port] glob ('*' matches any run of
// characters, as Temporal's does) compared with the URL's host[:port];
// AllowInsecure also allows http (https always is).
type AddressRule struct {
	Pattern       string `json:"Pattern"`
	AllowInsecure bool   `json:"AllowInsecure"`
	re            *regexp.Regexp
}

// AddressRules is a decoded allowlist; it implements transport.AddressMatcher.
type AddressRules []AddressRule

// Allows reports whether scheme://host matches a rule. host is the URL's
// host[:port]; both compare in lower case.
func (rs AddressRules) Allows(scheme, host string) bool {
	scheme, host = strings.ToLower(scheme), strings.ToLower(host)
	for _, r := range rs {
		if r.re == nil || !r.re.MatchString(host) {
			continue
		}
		if scheme == "https" || (scheme == "http" && r.AllowInsecure) {
			return true
		}
	}
	return false
}

// patternChars are the characters a Pattern may hold: those of a host name,
// an IPv4 or bracketed IPv6 address, a port, and '*'.
var patternChars = regexp.MustCompile(`^[a-z0-9.\-_:\[\]*]+$`)

// ParseAddressPattern validates a Pattern and compiles it to the regexp it
// stands for (anchored, '*' → ".*", everything else literal).
func ParseAddressPattern(p string) (*regexp.Regexp, error) {
	lp := strings.ToLower(p)
	switch {
	case p == "":
		return nil, errors.New("required")
	case len(p) > MaxAddressPatternBytes:
		return nil, fmt.Errorf("longer than %d bytes", MaxAddressPatternBytes)
	case !patternChars.MatchString(lp):
		return nil, fmt.Errorf("%s: want host[:port] with '*' wildcards (letters, digits, '.', '-', '_', ':', '[', ']', '*'); no scheme, path or credentials",
			strconv.Quote(truncate(p, maxEcho)))
	}
	parts := strings.Split(lp, "*")
	for i := range parts {
		parts[i] = regexp.QuoteMeta(parts[i])
	}
	return regexp.Compile("^" + strings.Join(parts, ".*") + "$")
}

// allowedAddressesKey registers a Temporal-shaped allowlist:
// [{"Pattern": "host[:port] glob", "AllowInsecure": bool}, …]. Unlike
// Temporal, which skips invalid entries, an invalid entry refuses the write
// with the entry's index and field.
func allowedAddressesKey(name string, scope Scope, desc string) *definition {
	decode := func(raw []byte) (any, *ValidationError) {
		items, err := decodeArray(raw)
		if err != nil {
			return nil, err
		}
		out := make(AddressRules, 0, len(items))
		for i, it := range items {
			r, err := decodeAddressRule(it)
			if err != nil {
				err.Field = fmt.Sprintf("[%d]%s", i, err.Field)
				return nil, err
			}
			out = append(out, r)
		}
		return out, nil
	}
	return newDefinition(name, "list(object)", desc, scope, AddressRules{}, decode, mustMarshal)
}

// decodeAddressRule reads one {"Pattern", "AllowInsecure"} object. Field
// names match case-insensitively (Temporal's reading); unknown, duplicate
// and null fields are refused.
func decodeAddressRule(raw []byte) (AddressRule, *ValidationError) {
	var r AddressRule
	if len(raw) == 0 || raw[0] != '{' {
		return r, bad("want an object {\"Pattern\": …, \"AllowInsecure\": …}, got %s", echo(raw))
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil {
		return r, bad("value is not valid JSON")
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return r, bad("value is not valid JSON")
		}
		name, _ := tok.(string)
		var fraw json.RawMessage
		if err := dec.Decode(&fraw); err != nil {
			return r, bad("value is not valid JSON")
		}
		// Case-insensitive, as Temporal's mapstructure reads it.
		switch {
		case strings.EqualFold(name, "Pattern"):
			name = "Pattern"
		case strings.EqualFold(name, "AllowInsecure"):
			name = "AllowInsecure"
		}
		field := "." + truncate(name, maxEcho)
		if seen[name] {
			return r, &ValidationError{Field: field, Reason: "set more than once"}
		}
		seen[name] = true
		switch name {
		case "Pattern":
			if fraw[0] != '"' || json.Unmarshal(fraw, &r.Pattern) != nil {
				return r, &ValidationError{Field: field, Reason: "want a string, got " + echo(fraw)}
			}
			re, err := ParseAddressPattern(r.Pattern)
			if err != nil {
				return r, &ValidationError{Field: field, Reason: err.Error()}
			}
			r.Pattern, r.re = strings.ToLower(r.Pattern), re
		case "AllowInsecure":
			switch string(fraw) {
			case "true":
				r.AllowInsecure = true
			case "false":
				r.AllowInsecure = false
			default:
				return r, &ValidationError{Field: field, Reason: "want true or false, got " + echo(fraw)}
			}
		default:
			return r, &ValidationError{Field: field, Reason: "unknown field (want Pattern or AllowInsecure)"}
		}
	}
	if !seen["Pattern"] {
		return r, &ValidationError{Field: ".Pattern", Reason: "required"}
	}
	return r, nil
}

// decodeArray splits a JSON array (at most MaxListEntries items).
func decodeArray(raw []byte) ([]json.RawMessage, *ValidationError) {
	if raw[0] != '[' {
		return nil, bad("want a JSON array, got %s", echo(raw))
	}
	var items []json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&items); err != nil {
		return nil, bad("value is not valid JSON")
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, bad("unexpected data after the array")
	}
	if len(items) > MaxListEntries {
		return nil, bad("%d entries, limit %d", len(items), MaxListEntries)
	}
	for i := range items {
		items[i] = bytes.TrimSpace(items[i])
	}
	return items, nil
}

// RedactHeaderNames returns fusebox.redaction.headerNames for (ns, dest):
// header names redacted on every read on top of the built-in ones (lower
// case; the caller must not modify the slice).
func (s *Snapshot) RedactHeaderNames(ns, dest string) []string {
	return s.get(idxRedactHeaders, ns, dest).([]string)
}

// AllowedAddresses returns component.callbacks.allowedAddresses for ns and
// whether a value is set at all (at the namespace or global level); when it
// is not, the node's default applies (docs/security.md).
func (s *Snapshot) AllowedAddresses(ns string) (AddressRules, bool) {
	v, from := s.resolve(idxAllowedAddresses, ns, "")
	if v == nil || from == ConstraintDefault {
		return nil, false
	}
	return v.v.(AddressRules), true
}

// AllowedAddressPatterns returns the Pattern (lower case) of every rule of
// every component.callbacks.allowedAddresses value set, the global one and
// every namespace's: the IP literals among them are the addresses a node
// that is not loopback-only may dial in loopback, link-local and multicast
// ranges (transport.Policy.AllowlistPatterns).
func (s *Snapshot) AllowedAddressPatterns() []string {
	if s == nil {
		return nil
	}
	kv := &s.keys[idxAllowedAddresses]
	var out []string
	add := func(v *value) {
		if v == nil {
			return
		}
		for _, r := range v.v.(AddressRules) {
			out = append(out, r.Pattern)
		}
	}
	add(kv.global)
	for _, v := range kv.byNS {
		add(v)
	}
	return out
}
