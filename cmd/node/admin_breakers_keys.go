package main

import (
	"fmt"
	"io"
	"net/url"
	"sort"
	"strings"

	"fusebox/api"
)

// warnUnseenKey warns on w when no node had a breaker for the key the
// cluster forced (a typo forces a key nothing uses) and lists the keys
// that match closely: the same destination host, or a destination within a
// few edits. The force still goes ahead: an operator may force a key
// before its first task. before is the nodes' breakers read just before
// the force (after it, the force itself makes the key). fb is the API's
// answer: its destination is the normalised key (a callback URL's
// scheme://host[:port]) as redacted for display, so neither the comparison
// nor the warning sees the URL's path or query as given.
func warnUnseenKey(before api.BreakerList, fb api.ForcedBreaker, w io.Writer) {
	seen := map[string]bool{}
	var close []string
	for _, b := range before.Breakers {
		if b.TaskGroup == fb.TaskGroup && b.Namespace == fb.Namespace && b.Destination == fb.Destination {
			return
		}
		k := b.TaskGroup + "/" + b.Namespace + "/" + b.Destination
		if !seen[k] && similarKey(fb.Destination, b) {
			seen[k] = true
			close = append(close, k)
		}
	}
	sort.Strings(close)
	fmt.Fprintf(w, "warning: no node has a breaker for %s/%s/%s (never seen, or evicted when idle)\n", fb.TaskGroup, fb.Namespace, fb.Destination)
	if len(close) > 0 {
		fmt.Fprintf(w, "close matches: %s\n", strings.Join(close, ", "))
	}
}

// similarKey: the same destination under another group or namespace, the
// same URL host, or a destination within 3 edits.
func similarKey(dest string, b api.Breaker) bool {
	if strings.EqualFold(dest, b.Destination) {
		return true
	}
	if h := destHost(dest); h != "" && h == destHost(b.Destination) {
		return true
	}
	return editDistance(strings.ToLower(dest), strings.ToLower(b.Destination)) <= 3
}

func destHost(d string) string {
	u, err := url.Parse(d)
	if err != nil || u.Host == "" {
		return ""
	}
	return strings.ToLower(u.Hostname())
}

// editDistance is the Levenshtein distance of a and b (bytes).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
