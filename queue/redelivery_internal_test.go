package queue

import (
	"testing"
	"time"
)

// takeMarks writes a marker only for a call still under way that began at
// least one FlushInterval before the flush; a younger call keeps its mark
// for a later flush, an ended one is forgotten, and max bounds the markers
// of one flush without losing the marks past it.
func TestTakeMarksWaitsOneFlushInterval(t *testing.T) {
	const fi = 10 * time.Millisecond
	s := &shard{q: &Queue{cfg: Config{FlushInterval: fi}}, inflight: map[string]*item{}}
	t0 := time.Unix(1000, 0)
	call := func(id string, calling bool, began time.Time) *item {
		it := &item{task: Task{ID: id}}
		it.calling.Store(calling)
		s.inflight[id] = it
		s.marks = append(s.marks, startMark{it: it, at: began})
		return it
	}
	call("ended", false, t0)
	call("old1", true, t0)
	young := call("young", true, t0.Add(5*time.Millisecond))
	call("old2", true, t0.Add(time.Millisecond))
	call("replaced", true, t0) // its shard forgot it: another item took the id
	s.inflight["replaced"] = &item{}

	ids := func(rs []Result) (out []string) {
		for _, r := range rs {
			if !r.Started {
				t.Errorf("result %s is not a start marker", r.TaskID)
			}
			out = append(out, r.TaskID)
		}
		return out
	}

	now := t0.Add(fi + 2*time.Millisecond) // old1 and old2 are old enough, young is not
	if got := ids(s.takeMarks(1, now)); len(got) != 1 || got[0] != "old1" {
		t.Fatalf("first flush (max 1) wrote markers %v, want [old1]", got)
	}
	if len(s.marks) != 3 { // young, old2 (past max), replaced (past max)
		t.Fatalf("after a flush bounded by max, %d marks kept, want 3: %+v", len(s.marks), s.marks)
	}
	if got := ids(s.takeMarks(10, now)); len(got) != 1 || got[0] != "old2" {
		t.Fatalf("second flush wrote markers %v, want [old2]", got)
	}
	if len(s.marks) != 1 || s.marks[0].it != young {
		t.Fatalf("marks kept %+v, want only the young call's", s.marks)
	}
	if got := ids(s.takeMarks(10, t0.Add(5*time.Millisecond+fi))); len(got) != 1 || got[0] != "young" {
		t.Fatalf("a flush one interval after the young call began wrote %v, want [young]", got)
	}
	if s.marks != nil {
		t.Fatalf("every mark consumed, %d kept", len(s.marks))
	}

	// A call that ends within the interval never costs a marker.
	short := call("short", true, now)
	if got := s.takeMarks(10, now.Add(fi/2)); len(got) != 0 {
		t.Fatalf("a flush during a young call wrote %v", ids(got))
	}
	short.calling.Store(false)
	if got := s.takeMarks(10, now.Add(2*fi)); len(got) != 0 || s.marks != nil {
		t.Fatalf("an ended call's mark wrote %v, kept %d marks", ids(got), len(s.marks))
	}
}
