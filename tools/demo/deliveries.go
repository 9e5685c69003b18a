package main

import (
	"net/http"

	"fusebox/transport/transporttest"
)

// deliveries tallies what one destination's server saw, reading its
// recorded calls incrementally: requests received, distinct tasks delivered
// (a Nexus start answered 200, counted once per Nexus-Request-Id, which is
// the task id on every redelivery), and duplicate deliveries (a task
// answered 200 again). Used from the demo's main loop only.
//
// transporttest records every request (about 1 KiB each) and Calls copies
// the record, so a run costs memory and a copy per refresh proportional to
// its length: fine for a demo of minutes, not for days.
type deliveries struct {
	dst       *transporttest.Destination
	read      int // calls already tallied
	delivered map[string]bool
	received  int
	down      int // received while not in ModeUp
	byMode    map[transporttest.Mode]int
	dups      int
}

func newDeliveries(dst *transporttest.Destination) *deliveries {
	return &deliveries{dst: dst, delivered: map[string]bool{}, byMode: map[transporttest.Mode]int{}}
}

// update tallies the calls recorded since the last update.
func (d *deliveries) update() {
	calls := d.dst.Calls()
	for _, c := range calls[min(d.read, len(calls)):] {
		if c.Kind != transporttest.KindStart {
			continue
		}
		d.received++
		d.byMode[c.Mode]++
		if c.Mode != transporttest.ModeUp {
			d.down++
		}
		if c.Status != http.StatusOK || c.RequestID == "" {
			continue
		}
		if d.delivered[c.RequestID] {
			d.dups++
		} else {
			d.delivered[c.RequestID] = true
		}
	}
	d.read = len(calls)
}

// Delivered is how many distinct tasks were answered 200.
func (d *deliveries) Delivered() int { return len(d.delivered) }
