package queue

import (
	"bytes"
	"encoding/json"
	"testing"
)

// One result write carries at most maxFlushBytes of outputs and messages
// (and always at least one result): 256 outputs of 1 MiB in one write were
// more than a follower may forward or raft-wal reads back as one entry.
func TestFlushCountBoundsBytes(t *testing.T) {
	mib := json.RawMessage(`"` + string(bytes.Repeat([]byte("x"), 1<<20-2)) + `"`)
	big := make([]Result, 300)
	for i := range big {
		big[i].Output = mib
	}
	if n := flushCount(big, 256); n != maxFlushBytes>>20 {
		t.Errorf("flushCount of 1 MiB outputs = %d, want %d", n, maxFlushBytes>>20)
	}
	huge := []Result{{Output: json.RawMessage(bytes.Repeat([]byte("1"), maxFlushBytes+1))}, {Message: "x"}}
	if n := flushCount(huge, 256); n != 1 {
		t.Errorf("flushCount with an oversized first result = %d, want 1 (it goes alone)", n)
	}
	small := make([]Result, 300)
	if n := flushCount(small, 256); n != 256 {
		t.Errorf("flushCount of small results = %d, want the count bound 256", n)
	}
	if n := flushCount(small, 0); n != 0 {
		t.Errorf("flushCount with no room = %d, want 0", n)
	}
}
