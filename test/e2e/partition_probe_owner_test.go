package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"fusebox/internal/testwait"
	"fusebox/transport/transporttest"
)

// TestPartitionedProbeOwner: a destination is down and every node's
// breaker for it is open; one node owns the key's probe (it probes each
// Timeout and its open hints hold the others). That node is cut off from
// its peers — not from the destination — and the destination comes back.
// The others must not wait for the owner's closed hint, which cannot reach
// them: they recover while it is still cut off (their hold ends at its
// fallback, or at once when gossip finds the owner failed and no tripper
// is left to wait for; hintpolicy/DESIGN.md, "Owner change"). The cut owner
// calls nothing (out of contact with the Raft leader, it is not fresh) and
// its shards move to the others. After the heal every node is closed and
// every task succeeds.
func TestPartitionedProbeOwner(t *testing.T) {
	const timeout = 3 * time.Second
	sc := newLabScenario(t, "owner", "ep-owner", fmt.Sprintf(`{"Timeout":%q}`, timeout.String()), 40*time.Millisecond, nil)
	lab, c, dest, key, l, nodeOf := sc.lab, sc.c, sc.dest, sc.key, sc.l, sc.nodeOf
	defer l.Stop()
	sc.waitBreakersEverywhere(t)

	dest.SetMode(t, transporttest.ModeUnavailable)
	testwait.ForErr(t, convergeTimout, "every breaker open", breakersAllIn(c, key, "open"))
	// The owner is the node that probes as owner each Timeout; the others
	// hold. Wait for one such probe past the opening.
	probes := func(p *Process) (float64, error) {
		m, err := scrapeMetrics(p)
		if err != nil {
			return 0, err
		}
		return metricSum(m, "fusebox_breaker_probes_total", `role="owner"`), nil
	}
	base := map[string]float64{}
	for _, p := range c.Procs {
		v, err := probes(p)
		if err != nil {
			t.Fatal(err)
		}
		base[p.Name()] = v
	}
	idx := -1
	testwait.ForErr(t, convergeTimout, "one node probing as the key's owner", func() error {
		var owners []int
		for i, p := range c.Procs {
			v, err := probes(p)
			if err != nil {
				return err
			}
			if v > base[p.Name()] {
				owners = append(owners, i)
			}
		}
		if len(owners) != 1 {
			return fmt.Errorf("nodes probing as owner since the opening: %v", owners)
		}
		idx = owners[0]
		return nil
	})
	owner := c.Procs[idx]

	lab.cut(idx)
	owner.SetIsolated(true)
	upAt := time.Now()
	dest.SetMode(t, transporttest.ModeUp)
	var viewer *Process
	for _, p := range c.Live() {
		viewer = p
		break
	}
	var majorityAt time.Time
	testwait.ForErr(t, convergeTimout, "the majority closed and delivering, the owner still cut off", func() error {
		bs, unreachable, err := clusterBreakers(viewer, key)
		if err != nil {
			return err
		}
		closed := 0
		for _, b := range bs {
			if b.Node != owner.Name() && b.State == "closed" {
				closed++
			}
		}
		per := callsPerNode(dest.Calls(), nodeOf, upAt)
		for _, p := range c.Live() {
			if per[p.Name()] == 0 {
				return fmt.Errorf("%s has made no call since the destination came back (%v); breakers %s", p.Name(), per, breakerLine(bs))
			}
		}
		if closed != len(c.Procs)-1 {
			return fmt.Errorf("%d of %d closed (unreachable %v): %s", closed, len(c.Procs)-1, unreachable, breakerLine(bs))
		}
		majorityAt = time.Now()
		return nil
	})
	// The bound the design gives: a hold ends at most one fallback
	// (Timeout × [2, 2.5) on a Timeout jittered by [1, 1.2)) after the
	// owner's last open hint, which came before the cut; one Timeout more
	// for the probe and the polls. Past it, the others were held by a node
	// they could not hear (the episode's own bound, 8 Timeouts more, would
	// end it much later).
	if took, bound := majorityAt.Sub(upAt), 4*timeout; took > bound {
		t.Errorf("the majority recovered %v after the destination came back, past one fallback (%v): held by a probe owner it could not hear",
			took.Round(time.Millisecond), bound)
	}
	per := callsPerNode(dest.Calls(), nodeOf, upAt)
	var roles []string
	for _, p := range c.Live() {
		m, err := scrapeMetrics(p)
		if err != nil {
			t.Fatal(err)
		}
		roles = append(roles, fmt.Sprintf("%s: owner %v, fallback %v", p.Name(),
			metricSum(m, "fusebox_breaker_probes_total", `role="owner"`)-base[p.Name()],
			metricSum(m, "fusebox_breaker_probes_total", `role="fallback"`)))
	}
	t.Logf("owner %s cut off as the destination came back; the majority closed and delivering %v later (Timeout %v); calls since per node %v; probes since the opening: %s",
		owner.Name(), majorityAt.Sub(upAt).Round(time.Millisecond), timeout, per, strings.Join(roles, "; "))
	lab.heal(idx)
	owner.SetIsolated(false)
	l.Stop()
	rep := l.Check(t, convergeTimout)
	testwait.ForErr(t, convergeTimout, "the breaker for "+key.String()+" closed on every node", breakersAllIn(c, key, "closed"))
	t.Logf("after the heal: %v", rep)
	c.CheckInvariants(t, convergeTimout)
	c.StopAll(t)
}
