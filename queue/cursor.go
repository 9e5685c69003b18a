package queue

import "time"

// A shard's read cursor (shard.cursor, DESIGN.md "Read cursor" and
// "Reported lows"): where each read of the store starts, so that a read
// does not walk the tasks the shard already has in flight.

const (
	// cursorLag re-reads the tasks due shortly before the cursor: a new
	// task is due at its submit stamp, and submits commit out of stamp
	// order (a batch forwarded or retried commits after later-stamped
	// ones; a node's clock is behind). Tasks in flight in that window are
	// skipped, so the lag's cost is the window's tasks per read.
	cursorLag = 250 * time.Millisecond
	// fullReadEvery bounds how long a task due before cursor-cursorLag can
	// wait to be read. Measured: under bulk submits with a dead destination
	// slowing commits, new tasks commit up to ~400 ms out of stamp order;
	// with a 1 s backstop the healthy destination kept 0.38 of its
	// throughput, with 100 ms 0.99. A full read walks the shard's pending
	// tasks once, so ten a second per shard is cheap next to one per wake.
	// With a store that reports the tasks committed behind the cursor
	// (DueLowStore), a full read finds nothing a read from the reported low
	// would not: its period is Config.FullReadBackstop, a safety net.
	fullReadEvery = 100 * time.Millisecond
)

// readFrom is where the next read starts: the zero time for a full read
// (rescan, no cursor yet, or the backstop's time), else the cursor, or
// earlier: the carry of a read cut short, the low the store reports for
// tasks committed behind the cursor, or, when the store reports none,
// cursorLag before it. Called with s.mu held, just before the read: the
// store's low is taken before the read loads its view (DueLowStore).
func (s *shard) readFrom(now time.Time) time.Time {
	var low time.Time
	lowSet := false
	lows := s.lowsNow()
	if lows != nil {
		low, lowSet = lows.TakeDueLow(s.id) // taken by every read, a full one included
	}
	if s.rescan.Swap(false) || s.cursor.IsZero() || now.Sub(s.lastFull) >= fullPeriod(lows, s.q.cfg) {
		s.lastFull = now
		s.carrySet = false
		return time.Time{}
	}
	from := s.cursor
	if lows == nil {
		from = from.Add(-cursorLag)
	} else if lowSet && low.Before(from) {
		from = low
	}
	if s.carrySet && s.carry.Before(from) {
		from = s.carry
	}
	s.carrySet = false
	return from
}

// readAgainFrom makes the next read start at at, or earlier. Called with
// s.mu held.
func (s *shard) readAgainFrom(at time.Time) {
	if !s.carrySet || at.Before(s.carry) {
		s.carry, s.carrySet = at, true
	}
}

// fullEvery is the period of the backstop full read.
func (s *shard) fullEvery() time.Duration { return fullPeriod(s.lowsNow(), s.q.cfg) }

// fullPeriod is the backstop full read's period for a reader whose store's
// reports are lows (nil: none, or lapsed).
func fullPeriod(lows DueLowStore, cfg Config) time.Duration {
	if lows != nil {
		return cfg.FullReadBackstop
	}
	return fullReadEvery
}

// lowsNow is the store's reports of tasks committed behind the cursor, nil
// when it has none or its tracking has lapsed (DueLowTracker).
func (s *shard) lowsNow() DueLowStore {
	if s.lows == nil || (s.lowsTracker != nil && !s.lowsTracker.DueLowsTracked()) {
		return nil
	}
	return s.lows
}
