package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"fusebox/internal/authtoken"
	"fusebox/raftstore/state"
)

type recordHandover struct {
	mu     sync.Mutex
	shards map[int]uint64
	hold   time.Duration
	wait   time.Duration
}

// handedOverResults ride in the answer (an owner that cannot reach its
// task store hands them to the leader).
var handedOverResults = []state.TaskResult{
	{TaskID: "t-1", Status: state.TaskSucceeded, Attempts: 1, HTTPStatus: 200, Output: json.RawMessage(`{"x":1}`)},
	{TaskID: "t-2", Status: state.TaskPending, Attempts: 2, NextAttemptAt: time.Date(2026, 12, 6, 14, 0, 0, 0, time.UTC), Message: "503"},
}

func (r *recordHandover) HandOver(ctx context.Context, shards map[int]uint64, hold time.Duration) []HandedOverShard {
	dl, _ := ctx.Deadline()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.shards, r.hold, r.wait = shards, hold, time.Until(dl)
	return []HandedOverShard{{Shard: 3, Epoch: shards[3], WaitedMS: 12, Unfinished: 3, UnderWay: 1, Results: handedOverResults}}
}

// POST /internal/v1/shards/handover: node (and admin) only; a bad field is
// a 400 naming it; the queue gets the shards, the hold, and the wait as
// its context's deadline, and its answer comes back.
func TestHandOverRoute(t *testing.T) {
	set, err := authtoken.Parse([]byte("n node node-0123456789abcdef0123456789abcdef\ns submit submit-0123456789abcdef0123456789abcdef\n"))
	if err != nil {
		t.Fatal(err)
	}
	rec := &recordHandover{}
	hs := httptest.NewServer(New(Config{Tokens: authtoken.Static(set)}, Deps{Handover: rec}, nil).Handler())
	t.Cleanup(hs.Close)
	node := NewClient(hs.URL, "node-0123456789abcdef0123456789abcdef", nil)
	submit := NewClient(hs.URL, "submit-0123456789abcdef0123456789abcdef", nil)
	ctx := t.Context()
	good := HandOverRequest{Shards: []ShardEpoch{{Shard: 3, Epoch: 7}, {Shard: 5, Epoch: 2}}, WaitMS: 1500, HoldMS: 4500}

	var e *Error
	if _, err := submit.HandOver(ctx, good); !errors.As(err, &e) || e.Status != http.StatusForbidden {
		t.Fatalf("a submit token: %v, want 403", err)
	}
	ans, err := node.HandOver(ctx, good)
	if err != nil {
		t.Fatal(err)
	}
	if want := (HandedOverShard{Shard: 3, Epoch: 7, WaitedMS: 12, Unfinished: 3, UnderWay: 1, Results: handedOverResults}); len(ans.Shards) != 1 || !reflect.DeepEqual(ans.Shards[0], want) {
		t.Fatalf("answer %+v", ans)
	}
	rec.mu.Lock()
	if len(rec.shards) != 2 || rec.shards[3] != 7 || rec.shards[5] != 2 || rec.hold != 4500*time.Millisecond ||
		rec.wait <= 0 || rec.wait > 1500*time.Millisecond {
		t.Fatalf("queue got shards %v hold %v wait %v", rec.shards, rec.hold, rec.wait)
	}
	rec.mu.Unlock()

	for _, tc := range []struct {
		in    HandOverRequest
		field string
	}{
		{HandOverRequest{WaitMS: 1, HoldMS: 1}, "shards"},
		{HandOverRequest{Shards: []ShardEpoch{{Shard: -1}}, HoldMS: 1}, "shards[0].shard"},
		{HandOverRequest{Shards: []ShardEpoch{{Shard: 1}, {Shard: 1}}, HoldMS: 1}, "shards[1].shard"},
		{HandOverRequest{Shards: []ShardEpoch{{Shard: 1}}, WaitMS: -1, HoldMS: 1}, "wait_ms"},
		{HandOverRequest{Shards: []ShardEpoch{{Shard: 1}}, WaitMS: 61000, HoldMS: 90000}, "wait_ms"},
		{HandOverRequest{Shards: []ShardEpoch{{Shard: 1}}, WaitMS: 2000, HoldMS: 1000}, "hold_ms"},
		{HandOverRequest{Shards: []ShardEpoch{{Shard: 1}}, WaitMS: 2000, HoldMS: 121000}, "hold_ms"},
	} {
		_, err := node.HandOver(ctx, tc.in)
		if !errors.As(err, &e) || e.Status != http.StatusBadRequest || e.Field != tc.field {
			t.Errorf("%+v: %v, want 400 naming %s", tc.in, err, tc.field)
		}
	}
	// Unknown fields and trailing data are refused like every body.
	req, _ := http.NewRequest(http.MethodPost, hs.URL+"/internal/v1/shards/handover", strings.NewReader(`{"shards":[{"shard":1}],"hold_ms":1,"extra":1}`))
	req.Header.Set("Authorization", "Bearer node-0123456789abcdef0123456789abcdef")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("unknown field: %d", resp.StatusCode)
	}
}

// FuzzHandOverRequest: any body is either refused with a field or yields
// shards that are non-negative, distinct and bounded, with wait ≤ hold.
func FuzzHandOverRequest(f *testing.F) {
	f.Add([]byte(`{"shards":[{"shard":3,"epoch":7}],"wait_ms":1000,"hold_ms":4000}`))
	f.Add([]byte(`{"shards":[{"shard":-1}],"hold_ms":1}`))
	f.Add([]byte(`{"shards":[{"shard":1},{"shard":1}],"wait_ms":0,"hold_ms":0}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		rec := &recordHandover{}
		s := New(Config{}, Deps{Handover: rec}, nil)
		req := httptest.NewRequest(http.MethodPost, "/internal/v1/shards/handover", strings.NewReader(string(body)))
		w := httptest.NewRecorder()
		s.Handler().ServeHTTP(w, req)
		switch w.Code {
		case http.StatusOK:
			rec.mu.Lock()
			defer rec.mu.Unlock()
			if len(rec.shards) == 0 || len(rec.shards) > maxHandOverShards || rec.hold > maxHandOverHold || rec.wait > maxHandOverWait {
				t.Fatalf("accepted %q: shards %d, hold %v, wait %v", body, len(rec.shards), rec.hold, rec.wait)
			}
			for id := range rec.shards {
				if id < 0 {
					t.Fatalf("accepted %q with shard %d", body, id)
				}
			}
		case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType:
		default:
			t.Fatalf("%q: status %d %s", body, w.Code, w.Body.String())
		}
	})
}
