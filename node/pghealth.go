package node

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"fusebox/cluster"
	"fusebox/shardmap"
	"fusebox/taskstore/pgstore"
)

// A node that cannot reach the database while its peers can (a firewall,
// a broken route, its own pool wedged) used to keep its shards: Raft and
// gossip still reached it, so nothing moved them, and their tasks waited
// for the database to come back to that one node
// (TestPostgresUnreachableFromOneNode: 111 of 456 tasks after 45 s). So
// each node looks at its path to the database (pgHealthTiming.interval: a
// statement the database answered since the last look, else a ping) and,
// once its looks have failed for a streak (after: 3 s, 1 s at fast timing), says so
// in its gossip metadata (Meta.TaskStoreUnreachable); it clears the flag
// once they have worked as long. While flagged, with its last look failed
// and another member reaching the database, it starts no call and refuses
// task reads and writes at once (pgTasks.failing). The raft leader
// places no shard on a flagged member (ownership Config.Unfit), but only
// while it reaches the database itself — a look of its own at that moment,
// after a streak of good ones longer than a member's flag needs to clear:
// with the database down for every node (a restart, a failover) moving
// shards helps no one and would delay the return, and right after such an
// outage the leader's looks succeed a moment before the others' flags
// clear. A flagged leader hands its leadership to a voter that is not
// flagged, so the next leader judges; it waits until its flag has stood
// for another streak and it has led for two, so that in an outage for
// everyone, where the flags come up a look or two apart, leadership does
// not run along the voters.

// pgHealth timing: the look period and the streak that changes the flag.
type pgHealthTiming struct {
	interval, after time.Duration
}

func (n *Node) pgHealthTiming() pgHealthTiming {
	if n.cfg.Timing == "fast" {
		return pgHealthTiming{interval: 200 * time.Millisecond, after: time.Second}
	}
	return pgHealthTiming{interval: time.Second, after: 3 * time.Second}
}

// pgHealth is the watch's state; the loop alone writes it.
type pgHealth struct {
	timing pgHealthTiming
	gauge  prometheus.Gauge
	shared prometheus.Gauge // fusebox_task_store_shared (checkClusters)
	// okSince is when the current streak of good looks began (UnixNano;
	// 0 outside one): the leader judges others only after a streak of its
	// own longer than theirs needs to clear their flags (unfitOwners).
	okSince atomic.Int64
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	once    sync.Once

	leadingMu    sync.Mutex
	leadingSince time.Time // zero while not leading
}

// startPGHealth starts the watch (its goroutine is stopped by
// stopPGHealth, before the membership closes) and the leader's side.
func (n *Node) startPGHealth() error {
	h := &pgHealth{timing: n.pgHealthTiming(), gauge: prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "fusebox_task_store_unreachable",
		Help: "1 while this node advertises that it cannot reach its task store (PostgreSQL): the raft leader places no shard on it.",
	})}
	h.shared = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "fusebox_task_store_shared",
		Help: "1 while another fusebox cluster has recorded, lately, that it uses this node's task store (PostgreSQL database): the node is not ready and its leader raises no shard epoch past the database's fences.",
	})
	for _, g := range []prometheus.Gauge{h.gauge, h.shared} {
		if err := n.reg.Register(g); err != nil {
			return err
		}
	}
	n.pgHealth = h
	n.store.OnLeader(func(ctx context.Context) {
		h.leadingMu.Lock()
		h.leadingSince = time.Now()
		h.leadingMu.Unlock()
		<-ctx.Done()
		h.leadingMu.Lock()
		h.leadingSince = time.Time{}
		h.leadingMu.Unlock()
	})
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	h.wg.Go(func() { n.watchPG(ctx, h) })
	return nil
}

// stopPGHealth stops the watch and waits for it. Idempotent.
func (n *Node) stopPGHealth() {
	if h := n.pgHealth; h != nil {
		h.once.Do(func() {
			h.cancel()
			h.wg.Wait()
		})
	}
}

// lookPG is one look at this node's path to the database, bounded by d:
// nil at once if the database answered a statement within d, else a ping.
func (n *Node) lookPG(ctx context.Context, d time.Duration) error {
	if time.Since(n.pg.store.LastAnswer()) <= d {
		return nil
	}
	if ok, why := n.pg.open(); !ok {
		return errors.New("not open: " + why)
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return n.pg.store.Ping(ctx)
}

func (n *Node) watchPG(ctx context.Context, h *pgHealth) {
	t := time.NewTicker(h.timing.interval)
	defer t.Stop()
	var (
		flagged       bool
		badSince      time.Time // the failing streak's start; zero outside it (the good one's is h.okSince)
		lastErr       error
		transferTried time.Time
		nextClusters  time.Time // when checkClusters is next due
	)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		// A statement the database answered since the last look is as good
		// as a ping, and costs nothing more; under load a ping only waited
		// for one of the pool's connections (pgstore/answered.go).
		err := n.lookPG(ctx, h.timing.interval)
		if ctx.Err() != nil {
			return
		}
		if err == nil && !time.Now().Before(nextClusters) && n.checkClusters(ctx, h) {
			nextClusters = time.Now().Add(clustersEvery * h.timing.interval)
		}
		now := time.Now()
		if err == nil {
			badSince = time.Time{}
			h.okSince.CompareAndSwap(0, now.UnixNano())
		} else {
			lastErr = err
			h.okSince.Store(0)
			if badSince.IsZero() {
				badSince = now
			}
		}
		want := flagged
		switch ok := h.okSince.Load(); {
		case !flagged && !badSince.IsZero() && now.Sub(badSince) >= h.timing.after:
			want = true
		case flagged && ok != 0 && now.Sub(time.Unix(0, ok)) >= h.timing.after:
			want = false
		}
		// Refuse and hold back only while the path fails now, and while
		// another member reaches the database (pgTasks.failing): then this
		// node's shards are about to move, and a call whose result it
		// cannot write would be made again by their next owner. The flag
		// clears a streak after the database returns (for the placement's
		// sake), and holding calls that long delayed the return after an
		// outage for everyone (1.4 s at fast timing in
		// TestPostgresRestartedMidRun, against 0.1–0.2 s); in such an
		// outage the results wait and are written on its return.
		// Set before the flag is advertised, not after: UpdateMeta waits
		// until gossip has carried it (up to the membership's LeaveTimeout;
		// a second in one run), by which time the leader may have moved the
		// shards and told nobody to go elsewhere: a submit to this node
		// waited out the client's 5 s in one run of
		// TestPostgresUnreachableFromOneNode. If the flag cannot be
		// advertised, refusing still costs nothing: a result could not be
		// written from here either.
		if want && err != nil && len(n.pgReachers(false)) > 0 {
			n.pg.failedLook.Store(now.UnixNano())
		} else {
			n.pg.failedLook.Store(0)
		}
		if want != flagged {
			if uerr := n.members.UpdateMeta(func(m *cluster.Meta) { m.TaskStoreUnreachable = want }); uerr != nil {
				n.log.Warn("could not advertise the task store's reachability; trying again", "unreachable", want, "err", uerr)
			} else {
				flagged = want
				n.logFlag(h, flagged, now.Sub(badSince), lastErr)
			}
		}
		// A leader that cannot reach the database hands its leadership to
		// one that can, once its flag has stood for another streak: in an
		// outage for everyone each node's flag comes up within a look or
		// two of the others', and by then every flag has been gossiped.
		if flagged && now.Sub(badSince) >= 2*h.timing.after && now.Sub(transferTried) >= 2*h.timing.after {
			if n.handLeadershipToReacher(ctx, h) {
				transferTried = now
			}
		}
	}
}

// pgReachers are the other alive members that do not advertise the task
// store unreachable (an older build, which advertises nothing, counts),
// sorted; with servers, only those that run Raft.
func (n *Node) pgReachers(servers bool) []string {
	var out []string
	for _, m := range n.members.Members() {
		if m.ID != n.cfg.NodeID && m.State == cluster.StateAlive && !m.Meta.TaskStoreUnreachable && (!servers || m.Meta.RaftAddr != "") {
			out = append(out, m.ID)
		}
	}
	slices.Sort(out)
	return out
}

// logFlag records a change of this node's flag (gauge and log).
func (n *Node) logFlag(h *pgHealth, flagged bool, failingFor time.Duration, lastErr error) {
	if flagged {
		h.gauge.Set(1)
		n.log.Warn("the task store is unreachable from this node; asking the cluster to place its shards elsewhere",
			"for", failingFor.Round(time.Millisecond), "err", pgstore.PublicReason(lastErr))
		return
	}
	h.gauge.Set(0)
	n.log.Info("the task store is reachable again from this node; it may own shards again")
}

// handLeadershipToReacher transfers this node's Raft leadership, if it has
// led for two streaks (2×after), to a voter whose metadata says it reaches
// the task store; it reports whether it tried.
func (n *Node) handLeadershipToReacher(ctx context.Context, h *pgHealth) bool {
	h.leadingMu.Lock()
	since := h.leadingSince
	h.leadingMu.Unlock()
	if since.IsZero() || time.Since(since) < 2*h.timing.after {
		return false
	}
	to := n.pgReachers(true)
	if len(to) == 0 {
		return false
	}
	for _, id := range to {
		tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := n.store.TransferLeader(tctx, id)
		cancel()
		if err == nil {
			n.log.Warn("handed raft leadership to a node that reaches the task store, so that it moves this node's shards", "to", id)
			return true
		}
		n.log.Info("could not hand raft leadership over", "to", id, "err", err)
	}
	return true
}

// unfitOwners is ownership's Config.Unfit on the postgres store: the
// members that advertise their task store unreachable, judged only while
// this node (the leader) reaches the database itself, now, and has for
// longer than a member needs to clear its flag (the streak plus three
// looks, for the looks' phase and gossip's moment): when the database returns after an outage for
// everyone, the leader's looks succeed a moment before the others' flags
// clear, and judging then moved every shard to the leader and back.
func (n *Node) unfitOwners(ctx context.Context) map[string]string {
	h := n.pgHealth
	ok := h.okSince.Load()
	if ok == 0 || time.Since(time.Unix(0, ok)) < h.timing.after+3*h.timing.interval {
		return nil
	}
	var out map[string]string
	for _, m := range n.members.Members() {
		if m.Meta.TaskStoreUnreachable {
			if out == nil {
				out = map[string]string{}
			}
			out[m.ID] = "its task store (PostgreSQL) is unreachable"
		}
	}
	if len(out) == 0 {
		return nil
	}
	if err := n.lookPG(ctx, time.Second); err != nil {
		return nil // down for this node too: maybe for every node
	}
	return out
}

// pgFences is ownership's Config.StoreFences on the postgres store: the
// database's fence of each shard, read only while this node's last look
// at the database succeeded (a placement does not wait on a database that
// is down) and no other cluster uses the database (checkClusters).
func (n *Node) pgFences(ctx context.Context) (map[int]shardmap.Assignment, error) {
	if h := n.pgHealth; h != nil && h.okSince.Load() == 0 {
		return nil, errors.New("the task store is unreachable from this node")
	}
	if o := n.pg.shared.Load(); o != nil {
		return nil, fmt.Errorf("another cluster (%s) uses the task store: its fences are not raised past", o.ClusterID)
	}
	return n.pg.store.Fences(ctx)
}

// clustersEvery is how many look periods go between two records of this
// cluster in the database (checkClusters): every 10 s, 2 s at fast timing.
const clustersEvery = 10

// clustersWindow is how recent another cluster's record must be for the
// database to count as shared: three of its nodes' periods. A cluster
// started afresh on the database of one just gone waits that long.
func (h *pgHealth) clustersWindow() time.Duration { return 3 * clustersEvery * h.timing.interval }

// checkClusters records that this cluster uses the database and looks for
// another that does (pgstore.SeenBy): two clusters sharing one database
// fence each other's owners out by turns, each leader raising the epochs
// the other's acquired, with duplicate calls and stalls for as long. While
// another is seen, this node is not ready and its leader raises no epoch
// past the database's fences (pgFences), so the two stop fighting and an
// operator is told (/readyz, fusebox_task_store_shared, an ERROR log) to
// give each its own database. It reports whether it asked the database (not
// before this node knows its cluster id).
func (n *Node) checkClusters(ctx context.Context, h *pgHealth) bool {
	id := n.state.ClusterID()
	if id == "" {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, h.timing.interval)
	defer cancel()
	others, err := n.pg.store.SeenBy(ctx, id, h.clustersWindow())
	if err != nil {
		n.log.Debug("could not record this cluster in the task store", "err", err)
		return false // the last answer stands; asked again at the next look
	}
	var now *pgstore.OtherCluster
	if len(others) > 0 {
		now = &others[0]
		h.shared.Set(1)
	} else {
		h.shared.Set(0)
	}
	switch prev := n.pg.shared.Swap(now); {
	case now != nil && (prev == nil || prev.ClusterID != now.ClusterID):
		n.log.Error("another fusebox cluster uses this task store (PostgreSQL database): this node is not ready and raises no shard epoch until it is gone. Give each cluster its own database",
			"other_cluster_id", now.ClusterID, "seen_ago", now.Ago.Round(time.Millisecond), "cluster_id", id)
	case now == nil && prev != nil:
		n.log.Info("no other fusebox cluster uses this task store any more", "cluster_id", id)
	}
	return true
}
