package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"fusebox/api"
	"fusebox/breakerpool"
	"fusebox/dynconfig"
	"fusebox/internal/pgtest"
	"fusebox/internal/testwait"
	"fusebox/transport"
	"fusebox/transport/transporttest"
)

// chaosParams are the knobs of TestChaosRandom, from the environment.
type chaosParams struct {
	seed     uint64
	nodes    int
	steps    int
	duration time.Duration
	// store is the task store: "raft" (default) or "postgres"
	// (FUSEBOX_CHAOS_STORE, make chaos STORE=postgres), where the schedule
	// also crashes the database (immediate shutdown) and starts it again.
	store string
	// dest (FUSEBOX_CHAOS_DEST=1, make chaos DEST=1) adds outages of the
	// task destination to the schedule: 503s or answers held past the
	// request timeout, so breakers open, gossip and close under node
	// faults. Off, the draws are those of the schedules before it.
	dest bool
	// badRequests (FUSEBOX_CHAOS_DEST=2) adds a third kind of outage: 400
	// for every call, a non-retryable answer that ends each task called
	// then failed with it. The seeds of DEST=1 replay unchanged.
	badRequests bool
	// ops (FUSEBOX_CHAOS_OPS=1) adds operator steps (actOperator). Off, the
	// draws are those of the schedules before it.
	ops bool
}

func chaosParamsFromEnv(t *testing.T) chaosParams {
	t.Helper()
	p := chaosParams{seed: uint64(time.Now().UnixNano()), steps: 12, duration: 3 * time.Minute}
	if s := os.Getenv("SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("SEED=%q: want an unsigned integer: %v", s, err)
		}
		p.seed = v
	}
	rng := rand.New(rand.NewPCG(p.seed, 0x5eed))
	p.nodes = []int{3, 5}[rng.IntN(2)]
	if s := os.Getenv("FUSEBOX_CHAOS_STEPS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 || v > 1000 {
			t.Fatalf("FUSEBOX_CHAOS_STEPS=%q: want 1–1000", s)
		}
		p.steps = v
	}
	if s := os.Getenv("FUSEBOX_CHAOS_DURATION"); s != "" {
		v, err := time.ParseDuration(s)
		if err != nil || v <= 0 || v > time.Hour {
			t.Fatalf("FUSEBOX_CHAOS_DURATION=%q: want a duration up to 1h", s)
		}
		p.duration = v
	}
	switch v := os.Getenv("FUSEBOX_CHAOS_DEST"); v {
	case "", "0":
	case "1":
		p.dest = true
	case "2":
		p.dest, p.badRequests = true, true
	default:
		t.Fatalf("FUSEBOX_CHAOS_DEST=%q: want 0, 1 (503 and slow outages) or 2 (and 400 outages)", v)
	}
	switch v := os.Getenv("FUSEBOX_CHAOS_OPS"); v {
	case "", "0":
	case "1":
		p.ops = true
	default:
		t.Fatalf("FUSEBOX_CHAOS_OPS=%q: want 0 or 1 (operator steps: leader transfers, shard moves and closes)", v)
	}
	switch s := os.Getenv("FUSEBOX_CHAOS_STORE"); s {
	case "", "raft":
		p.store = "raft"
	case "postgres":
		p.store = s
	default:
		t.Fatalf("FUSEBOX_CHAOS_STORE=%q: want raft or postgres", s)
	}
	return p
}

// chaosAction is one step of the schedule.
type chaosAction string

const (
	actKill    chaosAction = "kill"    // SIGKILL
	actPause   chaosAction = "pause"   // SIGSTOP
	actStop    chaosAction = "stop"    // SIGTERM, expect a clean exit
	actRestart chaosAction = "restart" // SIGTERM then start again at once
	actRecover chaosAction = "recover" // bring a down node back (SIGCONT or start)
	// actDBCrash (postgres store only) stops PostgreSQL with an immediate
	// shutdown, or hangs it (every server process SIGSTOPped: connections
	// open, no answers), for a drawn time, then starts or continues it.
	actDBCrash chaosAction = "db-crash"
	// actDestDown (FUSEBOX_CHAOS_DEST=1 only) takes the task destination
	// down for a drawn time: 503s, or answers held until the caller gives
	// up, then up again.
	actDestDown chaosAction = "dest-down"
	// actOperator (FUSEBOX_CHAOS_OPS=1 only) is an operator's planned
	// change through a live node's API: a leadership transfer, a shard
	// moved to a drawn node and unpinned again, or a shard closed. Each
	// is preceded by a hand-over, so it adds no duplicate of its own
	// beyond calls longer than the hand-over's wait.
	actOperator chaosAction = "operator"
)

// TestChaosRandom runs a seeded random schedule of kill / pause / stop /
// restart against a 3- or 5-node cluster under writes, never taking down
// more than a minority at once, then brings everything back and checks the
// invariants: nothing acknowledged lost, one leader, identical state, no
// process left. FUSEBOX_CHAOS=1 enables it; SEED=… replays a schedule (the
// same cluster size, actions, targets and dwell times).
func TestChaosRandom(t *testing.T) {
	if os.Getenv("FUSEBOX_CHAOS") != "1" {
		t.Skip("FUSEBOX_CHAOS=1 runs the randomized chaos schedule")
	}
	cp := chaosParamsFromEnv(t)
	t.Logf("SEED=%d (nodes %d, steps %d, time bound %v, task store %s, destination outages %v, 400 outages %v, operator steps %v)", cp.seed, cp.nodes, cp.steps, cp.duration, cp.store, cp.dest, cp.badRequests, cp.ops)
	t.Cleanup(func() {
		if t.Failed() {
			dest := ""
			if cp.badRequests {
				dest = "FUSEBOX_CHAOS_DEST=2 "
			} else if cp.dest {
				dest = "FUSEBOX_CHAOS_DEST=1 "
			}
			if cp.ops {
				dest += "FUSEBOX_CHAOS_OPS=1 "
			}
			t.Logf("replay with: FUSEBOX_CHAOS=1 FUSEBOX_CHAOS_STORE=%s %sSEED=%d go test -run TestChaosRandom ./test/e2e/", cp.store, dest, cp.seed)
		}
	})
	rng := rand.New(rand.NewPCG(cp.seed, 0x5eed))
	rng.IntN(2) // the draw that chose the cluster size
	var opts ClusterOptions
	if os.Getenv("FUSEBOX_CHAOS_SECURE") == "1" { // make chaos SECURE=1
		t.Log("secure: TLS, encrypted gossip and named tokens")
		opts = secureClusterOptions(t)
	}
	var db *pgtest.Server
	if cp.store == "postgres" {
		db = pgServer(t)
		opts = withOptions(opts, pgOptions(db.URL("postgres")))
	}
	c := newTestCluster(t, cp.nodes, opts)
	c.WaitForLeader(t, leaderTimeout)
	td := NewDest(t) // the tasks' destination (below)
	if cp.dest {
		chaosDestConfig(t, c, td) // before the writer: its writes keep the states apart
	}
	dest := transporttest.NewDestination(t)
	w := NewWriter(c, "ep-", dest.NexusURL())
	w.Run(10 * time.Millisecond)
	defer w.Stop()
	// A task stream alongside the config writes: Nexus starts and callbacks
	// over namespaces and workflows (every shard), to one destination that
	// holds its answers a little, so calls are in flight at every fault.
	// CheckInvariants verifies every accepted task at the end.
	td.SetHold(50 * time.Millisecond)
	putEndpoint(t, c, "tasks-ep", td.NexusURL())
	tl := NewTaskLoad(c, "chaos", func(i int) (api.TaskSubmit, *Dest) {
		ns, wf := fmt.Sprintf("ns-%d", i%5), fmt.Sprintf("wf-%d", i)
		if i%2 == 0 {
			return nexusTask(ns, wf, "tasks-ep", i), td
		}
		return callbackTask(ns, wf, td.CallbackURL(), i), td
	})
	if cp.badRequests {
		tl.AllowFailedWith(400) // the tasks called during a 400 outage end failed with it
	}
	tl.Run(0, 2, 40*time.Millisecond)
	defer tl.Stop()

	maxDown := (cp.nodes - 1) / 2
	down := map[int]chaosAction{} // node index → how it went down
	deadline := time.Now().Add(cp.duration)
	for step := 0; step < cp.steps && time.Now().Before(deadline); step++ {
		act, idx := nextChaos(rng, cp.nodes, down, maxDown, db != nil, cp.dest, cp.ops)
		if act == actOperator {
			what := chaosOperator(t, c, rng, idx)
			dwell := time.Duration(300+rng.IntN(2700)) * time.Millisecond
			t.Logf("step %d: %s: %s; down %v; dwell %v; writes %v; %v", step, act, what, downNames(c, down), dwell, w.Stats(), tl.Stats())
			<-time.After(dwell) // part of the schedule, as below
			continue
		}
		if act == actDestDown {
			modes := []transporttest.Mode{transporttest.ModeUnavailable, transporttest.ModeSlow}
			if cp.badRequests {
				modes = append(modes, transporttest.ModeBadRequest)
			}
			mode := modes[rng.IntN(len(modes))]
			outage := time.Duration(300+rng.IntN(2700)) * time.Millisecond
			t.Logf("step %d: %s (%v) for %v; down %v; writes %v; %v", step, act, mode, outage, downNames(c, down), w.Stats(), tl.Stats())
			td.SetMode(t, mode)
			<-time.After(outage) // the fault's duration, part of the schedule
			td.SetMode(t, transporttest.ModeUp)
			continue
		}
		if act == actDBCrash {
			outage := time.Duration(300+rng.IntN(2700)) * time.Millisecond
			stop, start, how := db.StopImmediate, db.StartAgain, "immediate shutdown"
			if rng.IntN(2) == 0 {
				stop = func(context.Context) error { return db.Pause() }
				start = func(context.Context) error { return db.Resume() }
				how = "hang: every server process stopped"
			}
			t.Logf("step %d: %s (%s) for %v; down %v; writes %v; %v", step, act, how, outage, downNames(c, down), w.Stats(), tl.Stats())
			if err := stop(t.Context()); err != nil {
				t.Fatalf("step %d: %s: %v", step, act, err)
			}
			<-time.After(outage) // the fault's duration, part of the schedule
			if err := start(t.Context()); err != nil {
				t.Fatalf("step %d: bring PostgreSQL back: %v", step, err)
			}
			continue
		}
		p := c.Procs[idx]
		begin := time.Now()
		var err error
		switch act {
		case actKill:
			err = p.Kill()
		case actPause:
			err = p.Pause()
		case actStop:
			err = p.Stop()
		case actRestart:
			err = p.Restart(context.Background())
		case actRecover:
			if down[idx] == actPause {
				err = p.Resume()
			} else {
				err = p.Start(context.Background())
			}
		}
		if err != nil {
			t.Fatalf("step %d: %s %s: %v", step, act, p.Name(), err)
		}
		switch act {
		case actKill, actPause, actStop:
			down[idx] = act
		case actRecover:
			delete(down, idx)
		}
		dwell := time.Duration(300+rng.IntN(2700)) * time.Millisecond
		t.Logf("step %d: %s %s (%v); down %v; dwell %v; writes %v; %v", step, act, p.Name(),
			time.Since(begin).Round(time.Millisecond), downNames(c, down), dwell, w.Stats(), tl.Stats())
		// The dwell is part of the schedule (time under the fault), not a
		// wait for a condition.
		<-time.After(dwell)
	}
	for idx := range c.Procs { // index order: the replay is the same
		how, ok := down[idx]
		if !ok {
			continue
		}
		p := c.Procs[idx]
		var err error
		if how == actPause {
			err = p.Resume()
		} else {
			err = p.Start(context.Background())
		}
		if err != nil {
			t.Fatalf("bring back %s: %v", p.Name(), err)
		}
	}
	l := c.WaitForLeader(t, leaderTimeout)
	w.Stop()
	t.Logf("schedule done; leader %s; writes: %v", l.Name(), w.Stats())
	w.WaitVerified(t, 2*convergeTimout, c.Procs)
	testwait.ForErr(t, 2*convergeTimout, fmt.Sprintf("%d alive members and voters", cp.nodes), func() error { return c.CheckMembership(cp.nodes) })
	c.CheckInvariants(t, 2*convergeTimout)
	if db != nil {
		// One cluster's history never has a fence in the database ahead
		// of its shard map: a raise here would be the leader mistaking its
		// own fences for another cluster's (ownership/fences.go). Counters
		// of processes restarted since are gone; the live ones are read.
		for _, p := range c.Procs {
			m, err := scrapeMetrics(p)
			if err != nil {
				t.Logf("%v", err)
				continue
			}
			if n := metricSum(m, "fusebox_shard_epochs_raised_total"); n > 0 {
				t.Errorf("%s raised %v shard epochs past the database's fences within one cluster's history", p.Name(), n)
			}
		}
	}
	ts := tl.Stats()
	t.Logf("tasks: %v (last submit error: %v)", ts, ts.LastErr)
	if len(ts.Refused) > 0 {
		t.Errorf("%d valid task submits refused with a non-retryable error (the node answering had not caught up?), e.g. %v", len(ts.Refused), first(ts.Refused, 5))
	}
	c.StopAll(t)
}

// nextChaos draws the next action and its target from rng alone (never
// from cluster state), so a seed replays the same schedule. With db, one
// draw in five of a fault is a database crash (target -1); without, the
// draws are those of the schedules before the postgres mode. With dest,
// one draw in four of what is left is a destination outage (target -1).
// With ops, one draw in four of what is left then is an operator step,
// through an up node (the target).
func nextChaos(rng *rand.Rand, n int, down map[int]chaosAction, maxDown int, db, dest, ops bool) (chaosAction, int) {
	var ups, downs []int
	for i := range n {
		if _, ok := down[i]; ok {
			downs = append(downs, i)
		} else {
			ups = append(ups, i)
		}
	}
	if len(downs) > 0 && (len(downs) >= maxDown || rng.IntN(3) == 0) {
		return actRecover, downs[rng.IntN(len(downs))]
	}
	if db && rng.IntN(5) == 0 {
		return actDBCrash, -1
	}
	if dest && rng.IntN(4) == 0 {
		return actDestDown, -1
	}
	if ops && rng.IntN(4) == 0 {
		return actOperator, ups[rng.IntN(len(ups))]
	}
	acts := []chaosAction{actKill, actPause, actStop, actRestart}
	return acts[rng.IntN(len(acts))], ups[rng.IntN(len(ups))]
}

func downNames(c *Cluster, down map[int]chaosAction) []string {
	var out []string
	for i := range c.Procs {
		if how, ok := down[i]; ok {
			out = append(out, c.Procs[i].Name()+":"+string(how))
		}
	}
	return out
}

// chaosDestConfig gives the task destination's breakers a 1 s Timeout and
// its calls a 2 s timeout (both task groups), so an outage of a few seconds
// opens breakers that probe and close within the schedule, and a held
// answer gives up quickly. At the defaults (60 s, 10 s) the tasks refused
// by an open breaker would wait a minute or more for its probe, most of
// the invariants' 90 s wait.
func chaosDestConfig(t *testing.T, c *Cluster, td *Dest) {
	t.Helper()
	cb := transport.BreakerDestination(breakerpool.TaskGroupCallback, td.CallbackURL())
	for _, dest := range []string{"tasks-ep", cb} {
		setConfig(t, c, keyBreaker, dest, `{"Timeout":"1s"}`)
	}
	setConfig(t, c, dynconfig.KeyCallbackRequestTimeout, cb, `"2s"`)
	setConfig(t, c, dynconfig.KeyNexusRequestTimeout, "tasks-ep", `"2s"`)
}

// chaosOperator runs one operator step through node via, drawn from rng
// alone: a leadership transfer (to a drawn node, or raft's choice), a
// shard moved to a drawn node and unpinned again, or a shard closed
// (force). The step's answer is logged, not required: an operator's call
// meets the faults of the schedule too (no leader during an election, a
// target that is down), and is simply refused then. Returns what it did.
func chaosOperator(t *testing.T, c *Cluster, rng *rand.Rand, via int) string {
	t.Helper()
	kind, target, shardDraw := rng.IntN(3), rng.IntN(len(c.Procs)+1), rng.IntN(1<<16)
	p := c.Procs[via]
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	to := ""
	if target < len(c.Procs) {
		to = c.Procs[target].Name()
	}
	shards := 0
	if m, _, err := shardMap(p); err == nil {
		shards = len(m)
	}
	if kind > 0 && shards == 0 {
		return fmt.Sprintf("no shard map through %s", p.Name())
	}
	switch kind {
	case 0:
		res, err := p.Client().TransferLeader(ctx, to)
		return fmt.Sprintf("transfer-leader to %q through %s: %+v, %v", to, p.Name(), res, err)
	case 1:
		if to == "" {
			to = p.Name()
		}
		shard := shardDraw % shards
		a, err := p.Client().MoveShard(ctx, shard, to)
		out := fmt.Sprintf("move shard %d to %s through %s: %s@%d, %v", shard, to, p.Name(), a.Owner, a.Epoch, err)
		u, err := p.Client().UnpinShard(ctx, shard)
		return out + fmt.Sprintf("; unpin: %s@%d, %v", u.Owner, u.Epoch, err)
	default:
		shard := shardDraw % shards
		a, err := p.Client().CloseShard(ctx, shard, nil)
		return fmt.Sprintf("close shard %d through %s: %s@%d, %v", shard, p.Name(), a.Owner, a.Epoch, err)
	}
}
