package dynconfig

import (
	"encoding/json"
	"net/url"
	"strconv"
	"strings"
)

// KeyDestinationHealthPath gives a callback destination (scheme://host, the
// breaker's destination) an active health check: while its breaker is open,
// the key's probe owner GETs scheme://host + this path (healthprobe). "" (the
// default) means none. Nexus endpoints name their own health check when
// registered (PUT /v1/endpoints/{name}, "health").
const KeyDestinationHealthPath = "fusebox.destination.healthPath"

// maxHealthPath bounds a health path.
const maxHealthPath = 512

// healthPathKey registers a string key holding "" or an absolute path
// (optionally with a query) to append to a scheme://host.
func healthPathKey(name string, scope Scope, desc string) *definition {
	decode := func(raw []byte) (any, *ValidationError) {
		var s string
		if raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
			return nil, bad("want a string (a path such as \"/healthz\", or \"\" for none), got %s", echo(raw))
		}
		if s == "" {
			return s, nil
		}
		if err := checkHealthPath(s); err != "" {
			return nil, bad("%s, got %s", err, strconv.Quote(truncate(s, maxEcho)))
		}
		return s, nil
	}
	return newDefinition(name, "path", desc, scope, "", decode, mustMarshal)
}

// checkHealthPath says what is wrong with a non-empty health path, or "".
func checkHealthPath(s string) string {
	if len(s) > maxHealthPath {
		return "longer than " + strconv.Itoa(maxHealthPath) + " bytes"
	}
	if !strings.HasPrefix(s, "/") || strings.HasPrefix(s, "//") {
		return "must be an absolute path starting with a single /"
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f || r == '#' || r == '\\' {
			return "must not contain control characters, # or \\"
		}
	}
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil {
		return "must be a path (and query), not a URL"
	}
	return ""
}

// HealthPath returns fusebox.destination.healthPath for (ns, dest): "" when
// the destination has no health check.
func (s *Snapshot) HealthPath(ns, dest string) string {
	return s.get(idxHealthPath, ns, dest).(string)
}

// MaxOutputBytes returns fusebox.tasks.maxOutputBytes for (ns, dest).
func (s *Snapshot) MaxOutputBytes(ns, dest string) int {
	return s.get(idxMaxOutputBytes, ns, dest).(int)
}
