package errcode

import "testing"

func TestTable(t *testing.T) {
	for _, c := range All() {
		if !Known(c) {
			t.Fatalf("%s listed but not known", c)
		}
	}
	if Known("no_such_code") || Retryable("no_such_code") {
		t.Fatal("an unknown code is neither known nor retryable")
	}
	for c, want := range map[string]bool{NotLeader: true, NoLeader: true, Unavailable: true, Overloaded: true, InvalidArgument: false, WrongOwner: false, UpgradePending: false, Internal: false} {
		if Retryable(c) != want {
			t.Errorf("Retryable(%s) = %v, want %v", c, !want, want)
		}
	}
}
