package pgstore

import (
	"testing"
	"time"
)

// SeenBy records a cluster and returns the others recorded within the
// window, most recent first; its own row and old rows are not returned.
func TestSeenBy(t *testing.T) {
	s := openTest(t)
	if others, err := s.SeenBy(t.Context(), "a", time.Minute); err != nil || len(others) != 0 {
		t.Fatalf("first cluster: %v, %v", others, err)
	}
	if _, err := s.pool.Exec(t.Context(), `INSERT INTO fusebox_clusters VALUES ('old', now() - interval '1 hour')`); err != nil {
		t.Fatal(err)
	}
	others, err := s.SeenBy(t.Context(), "b", time.Minute)
	if err != nil || len(others) != 1 || others[0].ClusterID != "a" || others[0].Ago < 0 || others[0].Ago > time.Minute {
		t.Fatalf("b sees %+v, %v; want a alone, seen within the minute", others, err)
	}
	if others, err := s.SeenBy(t.Context(), "a", time.Minute); err != nil || len(others) != 1 || others[0].ClusterID != "b" {
		t.Fatalf("a sees %+v, %v; want b", others, err)
	}
	if _, err := s.SeenBy(t.Context(), "", time.Minute); err == nil {
		t.Fatal("an empty cluster id was recorded")
	}
}
