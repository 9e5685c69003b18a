package dynconfig

import (
	"encoding/json"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// ent builds an entry; value is raw JSON text.
func ent(key, ns, dest, value string) Entry {
	return Entry{Key: key, Namespace: ns, Destination: dest, Value: json.RawMessage(value)}
}

func mustSnapshot(t testing.TB, entries ...Entry) *Snapshot {
	t.Helper()
	s, err := NewSnapshot(entries)
	if err != nil {
		t.Fatalf("NewSnapshot: %v", err)
	}
	return s
}

// NewSnapshot is buildSnapshot from nothing, for tests (the node builds
// snapshots through Collection.Update).
func NewSnapshot(entries []Entry) (*Snapshot, error) { return buildSnapshot(entries, nil) }
