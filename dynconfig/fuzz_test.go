package dynconfig

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzValidate feeds random bytes as the value of a random key with random
// constraints. Validate must never panic; a rejected value of a known key is
// a *ValidationError; an accepted value's canonical form is itself valid and
// canonical, and a snapshot resolves to exactly it.
func FuzzValidate(f *testing.F) {
	for _, tc := range validateCases() {
		f.Add(uint8(byName[tc.e.Key]), tc.e.Namespace, tc.e.Destination, []byte(tc.e.Value))
	}
	f.Add(uint8(0), "", "", []byte(`{"Timeout":"1s","Interval":"2s","BucketPeriod":"1s","FailureRate":0.1,"MinRequests":3}`))
	f.Add(uint8(200), "ns", "", []byte(`1`))
	f.Fuzz(func(t *testing.T, idx uint8, ns, dest string, value []byte) {
		key := "unknown.key"
		if int(idx) < len(registry) {
			key = registry[idx].name
		}
		e := Entry{Key: key, Namespace: ns, Destination: dest, Value: value}
		err := Validate(e)
		canon, cerr := Canonical(e)
		if (err == nil) != (cerr == nil) {
			t.Fatalf("Validate %v but Canonical %v", err, cerr)
		}
		if err != nil {
			var ve *ValidationError
			if !errors.As(err, &ve) && !errors.Is(err, ErrUnknownKey) {
				t.Fatalf("error %v is %T", err, err)
			}
			if (key == "unknown.key") != errors.Is(err, ErrUnknownKey) {
				t.Fatalf("unknown-key error mismatch: %v", err)
			}
			return
		}
		e.Value = canon
		again, err := Canonical(e)
		if err != nil {
			t.Fatalf("canonical %s of %q rejected: %v", canon, value, err)
		}
		if !bytes.Equal(again, canon) {
			t.Fatalf("Canonical not idempotent: %q -> %s -> %s", value, canon, again)
		}
		s, err := NewSnapshot([]Entry{e})
		if err != nil {
			t.Fatalf("NewSnapshot of a valid entry: %v", err)
		}
		got, from, ok := s.Lookup(key, ns, dest)
		if !ok || from != e.Constraint() || !bytes.Equal(got, canon) {
			t.Fatalf("Lookup = %s from %v, want %s from %v", got, from, canon, e.Constraint())
		}
		_ = s.BreakerSettings(ns, dest)
	})
}
