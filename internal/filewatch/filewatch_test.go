package filewatch

import (
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestReloadsOnlyWhenChanged: reload runs after changed says yes, not
// before; Close stops the goroutine (goleak) and is idempotent.
func TestReloadsOnlyWhenChanged(t *testing.T) {
	var flag, reloads atomic.Int32
	p := Start(time.Millisecond, func() bool { return flag.Swap(0) == 1 }, func() { reloads.Add(1) })
	defer p.Close()
	for range 20 { // a few polls with nothing changed
		time.Sleep(time.Millisecond)
	}
	if n := reloads.Load(); n != 0 {
		t.Fatalf("%d reloads with nothing changed", n)
	}
	flag.Store(1)
	deadline := time.Now().Add(10 * time.Second)
	for reloads.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no reload after a change")
		}
		time.Sleep(time.Millisecond)
	}
	p.Close()
	p.Close()
	var nilPoller *Poller
	nilPoller.Close()
}
