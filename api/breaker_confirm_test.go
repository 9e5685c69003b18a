package api

import (
	"context"
	"net/http"
	"testing"

	"fusebox/breakerpool"
)

type twoBreakers struct{ keys []breakerpool.Key }

func (b twoBreakers) List() []breakerpool.Status {
	var out []breakerpool.Status
	for _, k := range b.keys {
		out = append(out, breakerpool.Status{Key: k, State: 2, Source: breakerpool.SourceHint, Mode: breakerpool.ModeAuto})
	}
	return out
}
func (twoBreakers) Get(breakerpool.Key) *breakerpool.Breaker { return nil }

type fakeConfirm map[breakerpool.Key]BreakerConfirm

func (f fakeConfirm) ConfirmOf(k breakerpool.Key) (BreakerConfirm, bool) {
	c, ok := f[k]
	return c, ok
}

// TestBreakerListConfirm: a breaker whose open came from a confirmed hint
// says so (outcome, reporter, confirming node); one without a round has no
// confirm field.
func TestBreakerListConfirm(t *testing.T) {
	a := breakerpool.Key{TaskGroup: "callback", NamespaceID: "ns", Destination: "https://a.example"}
	b := breakerpool.Key{TaskGroup: "callback", NamespaceID: "ns", Destination: "https://b.example"}
	_, c := newTestServer(t, Config{}, Deps{Breakers: twoBreakers{[]breakerpool.Key{a, b}},
		Confirm: fakeConfirm{a: {Outcome: "confirmed", Accused: "n0", Designated: "n2", By: "n2"}}})
	var list BreakerList
	if err := c.Do(context.Background(), http.MethodGet, "/v1/breakers", nil, nil, &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Breakers) != 2 {
		t.Fatalf("breakers = %+v", list.Breakers)
	}
	for _, br := range list.Breakers {
		switch br.Destination {
		case a.Destination:
			if br.Confirm == nil || br.Confirm.Outcome != "confirmed" || br.Confirm.Accused != "n0" || br.Confirm.By != "n2" {
				t.Fatalf("confirm of %s = %+v", br.Destination, br.Confirm)
			}
		case b.Destination:
			if br.Confirm != nil {
				t.Fatalf("confirm of %s = %+v, want none", br.Destination, br.Confirm)
			}
		}
	}
}
