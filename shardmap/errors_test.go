package shardmap

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestWrongOwnerErrorIsAs(t *testing.T) {
	var err error = &WrongOwnerError{Shard: 7, Owner: "node-2", Epoch: 9}
	wrapped := fmt.Errorf("append task: %w", fmt.Errorf("shard write: %w", err))
	if !errors.Is(wrapped, ErrWrongOwner) {
		t.Fatal("errors.Is(wrapped, ErrWrongOwner) = false")
	}
	var woe *WrongOwnerError
	if !errors.As(wrapped, &woe) || *woe != (WrongOwnerError{Shard: 7, Owner: "node-2", Epoch: 9}) {
		t.Fatalf("errors.As = %+v", woe)
	}
	if msg := wrapped.Error(); !strings.Contains(msg, `shard 7 is owned by "node-2" at epoch 9`) {
		t.Fatalf("message %q", msg)
	}
	if msg := (&WrongOwnerError{Shard: 1, Epoch: 2}).Error(); !strings.Contains(msg, "shard 1 has no owner") {
		t.Fatalf("message %q", msg)
	}
	if errors.Is(errors.New("shardmap: wrong shard owner"), ErrWrongOwner) {
		t.Fatal("an unrelated error with the same text matched")
	}
	if errors.Is(fmt.Errorf("x: %w", ErrNoSuchShard), ErrWrongOwner) {
		t.Fatal("ErrNoSuchShard matched ErrWrongOwner")
	}
}

// TestWrongOwnerErrorWire rebuilds the error from its JSON fields, as a
// client does (the API sends them with code "wrong_owner"), and checks it
// still matches.
func TestWrongOwnerErrorWire(t *testing.T) {
	sent := &WrongOwnerError{Shard: 3, Owner: "node-9", Epoch: 12}
	body, err := json.Marshal(struct {
		Code string `json:"code"`
		*WrongOwnerError
	}{"wrong_owner", sent})
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Code string `json:"code"`
		WrongOwnerError
	}
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	if got.Code != "wrong_owner" || got.WrongOwnerError != *sent {
		t.Fatalf("wire round trip: %s → %+v", body, got)
	}
	rebuilt := fmt.Errorf("remote: %w", &got.WrongOwnerError)
	if !errors.Is(rebuilt, ErrWrongOwner) {
		t.Fatal("rebuilt error does not match ErrWrongOwner")
	}
}

func TestCheckEpoch(t *testing.T) {
	m := mustRebalance(t, mustNew(t, 4), []string{"a", "b"}, map[int]string{0: "a", 1: "b"})
	a0, _ := m.Owner(0)
	if err := CheckEpoch(m, 0, "a", a0.Epoch); err != nil {
		t.Fatalf("owner at its epoch refused: %v", err)
	}
	for name, c := range map[string]struct {
		node  string
		epoch uint64
	}{
		"other node":    {"b", a0.Epoch},
		"stale epoch":   {"a", a0.Epoch - 1},
		"future epoch":  {"a", a0.Epoch + 1},
		"empty node id": {"", a0.Epoch},
	} {
		err := CheckEpoch(m, 0, c.node, c.epoch)
		var woe *WrongOwnerError
		if !errors.As(err, &woe) || *woe != (WrongOwnerError{Shard: 0, Owner: "a", Epoch: a0.Epoch}) {
			t.Errorf("%s: CheckEpoch = %v, want WrongOwnerError naming a@%d", name, err, a0.Epoch)
		}
	}
	// An unowned shard refuses everyone, even ("", its epoch).
	released, _, _ := Release(m, 1)
	a1, _ := released.Owner(1)
	if err := CheckEpoch(released, 1, "", a1.Epoch); !errors.Is(err, ErrWrongOwner) {
		t.Fatalf("unowned shard accepted a write: %v", err)
	}
	if err := CheckEpoch(nil, 2, "a", 1); !errors.Is(err, ErrWrongOwner) {
		t.Fatalf("nil map: %v", err)
	}
	for _, s := range []int{-1, 4} {
		err := CheckEpoch(m, s, "a", 1)
		if !errors.Is(err, ErrNoSuchShard) || errors.Is(err, ErrWrongOwner) {
			t.Errorf("CheckEpoch(shard %d) = %v, want ErrNoSuchShard", s, err)
		}
	}
}
