package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"fusebox/internal/pgtest"
	"fusebox/transport/transporttest"
)

// summaryTimeout bounds the final reads (metrics, task counts).
const summaryTimeout = 20 * time.Second

// demo is one run: what it started, in start order, so teardown can undo
// it in reverse.
type demo struct {
	cfg    Config
	sc     *screen
	logger *slog.Logger
	dir    string
	logf   *os.File

	dests    map[string]*transporttest.Destination
	cl       *cluster
	wl       *workload
	obs      *observer
	out      *outage
	fl       *fleet
	sum      *Summary
	pg       *pgtest.Server // --task-store postgres (postgres.go)
	torndown bool
}

// run performs a whole demo: start, live view until ctx ends or
// cfg.Duration passes, teardown, summary. Everything it starts is stopped
// before it returns, also when it panics (the nodes are then killed; the
// kernel kills them too if the demo dies, see sysProcAttr).
func run(ctx context.Context, cfg Config, w io.Writer, tty bool) (sum *Summary, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	d := &demo{cfg: cfg, sc: newScreen(w, tty), dests: map[string]*transporttest.Destination{}, sum: newSummary()}
	defer func() {
		if r := recover(); r != nil {
			d.teardown(true)
			panic(r)
		}
		d.teardown(false)
		sum = d.sum
	}()
	if err := d.start(ctx); err != nil {
		d.sum.Err = err.Error()
		return d.sum, err
	}
	d.loop(ctx)
	return d.sum, nil
}

func (d *demo) start(ctx context.Context) error {
	cfg := d.cfg
	var err error
	if cfg.Dir != "" {
		d.dir = cfg.Dir
		err = os.MkdirAll(d.dir, 0o755)
	} else {
		d.dir, err = os.MkdirTemp("", "fusebox-demo-")
	}
	if err != nil {
		return err
	}
	d.sum.Dir = d.dir
	if d.logf, err = os.Create(filepath.Join(d.dir, "demo.log")); err != nil {
		return err
	}
	d.logger = slog.New(slog.NewTextHandler(d.logf, nil))
	d.sc.message("fusebox demo: data and logs in " + d.dir)

	bin := cfg.Bin
	if bin == "" {
		if bin, err = buildBinary(ctx, d.sc); err != nil {
			return err
		}
	}
	if bin, err = filepath.Abs(bin); err != nil {
		return err
	}
	for _, name := range []string{destHealthy, destFlaky} {
		dst, err := transporttest.New()
		if err != nil {
			return fmt.Errorf("start destination %s: %w", name, err)
		}
		d.dests[name] = dst
		d.sc.message(fmt.Sprintf("destination %s listening on %s", name, dst.Addr()))
	}

	if d.cl, err = newCluster(cfg.Nodes, bin, d.dir, cfg.Secure); err != nil {
		return err
	}
	if cfg.TaskStore == taskStorePostgres {
		if err := d.startPostgres(ctx); err != nil {
			return err
		}
	}
	for _, p := range d.cl.nodes {
		d.sum.Nodes = append(d.sum.Nodes, NodeSummary{ID: p.id})
	}
	rctx, cancel := context.WithTimeout(ctx, cfg.ReadyTimeout)
	defer cancel()
	if err := d.cl.start(rctx, d.sc.message); err != nil {
		return fmt.Errorf("cluster did not come up: %w", err)
	}
	d.sum.NodesReady = len(d.cl.nodes)
	for i := range d.sum.Nodes {
		d.sum.Nodes[i].Ready = true
	}
	if err := d.cl.setup(rctx, cfg, d.dests[destHealthy].NexusURL(), d.dests[destFlaky].NexusURL(), d.dests[destFlaky].HealthURL()); err != nil {
		return err
	}
	d.sc.message(fmt.Sprintf("endpoints %s and %s registered; breaker Timeout set to %v", destHealthy, destFlaky, cfg.BreakerTimeout))
	if s := d.cl.sec; s != nil {
		d.sc.message(fmt.Sprintf("secure: HTTPS API and mutual-TLS Raft from the CA %s, encrypted gossip, tokens in %s", s.caFile, s.tokenFile))
		d.sc.message(fmt.Sprintf("status page (read token; trust the CA or accept the warning): https://%s/ui/#token=%s", d.cl.nodes[0].httpAddr, s.viewerToken))
	}
	d.obs = newObserver(d.cl, d.dests)
	d.out = newOutage(cfg)
	d.fl = newFleet(cfg)
	d.wl = newWorkload(d.cl, cfg.Rate, d.logger)
	return nil
}

// loop runs the workload and the live view until ctx ends or the duration
// passes, switching flaky down and up on schedule.
func (d *demo) loop(ctx context.Context) {
	cfg := d.cfg
	begin := time.Now()
	since := func() time.Duration { return time.Since(begin) }
	d.wl.start()
	tick := time.NewTicker(cfg.Refresh)
	defer tick.Stop()
	var durC, downC, upC, throttleC, unthrottleC <-chan time.Time
	if cfg.Duration > 0 {
		t := time.NewTimer(cfg.Duration)
		defer t.Stop()
		durC = t.C
	}
	if d.out.phase == phaseScheduled {
		t := time.NewTimer(cfg.OutageAt)
		defer t.Stop()
		downC = t.C
	}
	if d.fl.phase == throttleScheduled {
		t := time.NewTimer(cfg.ThrottleAt)
		defer t.Stop()
		throttleC = t.C
	}
	flaky := d.dests[destFlaky]
	for {
		select {
		case <-ctx.Done():
			d.finishRun(since())
			return
		case <-durC:
			d.finishRun(since())
			return
		case <-downC:
			counts := d.obs.flakyByNode(ctx)
			mode := transporttest.ModeRefuse
			if cfg.OutageMode == outageUnavailable {
				mode = transporttest.ModeUnavailable
			}
			if err := flaky.SetMode(mode); err != nil {
				d.logger.Error("switch flaky down", "err", err)
			}
			d.out.begin(since(), counts, d.obs.receivedDown(destFlaky), d.wl.stats().Submitted[destFlaky])
			d.logger.Info("flaky down", "mode", cfg.OutageMode, "for", cfg.OutageFor)
			t := time.NewTimer(cfg.OutageFor)
			defer t.Stop()
			upC = t.C
		case <-upC:
			if err := flaky.SetMode(transporttest.ModeUp); err != nil {
				d.logger.Error("switch flaky up", "err", err)
			}
			d.out.finish(since(), d.obs.flakyByNode(ctx), d.obs.receivedDown(destFlaky), d.wl.stats().Submitted[destFlaky])
			d.logger.Info("flaky up")
		case <-throttleC:
			counts := d.obs.flakyByNode(ctx)
			flaky.SetRetryAfter(strconv.Itoa(int(cfg.RetryAfter / time.Second)))
			if err := flaky.SetMode(transporttest.ModeTooManyRequests); err != nil {
				d.logger.Error("switch flaky to 429", "err", err)
			}
			d.fl.begin(since(), counts, d.obs.receivedIn(destFlaky, transporttest.ModeTooManyRequests))
			d.logger.Info("flaky answers 429", "retry_after", cfg.RetryAfter)
			t := time.NewTimer(cfg.RetryAfter)
			defer t.Stop()
			unthrottleC = t.C
		case <-unthrottleC:
			if err := flaky.SetMode(transporttest.ModeUp); err != nil {
				d.logger.Error("switch flaky up after 429", "err", err)
			}
			d.fl.finish(since(), d.obs.flakyByNode(ctx), d.obs.receivedIn(destFlaky, transporttest.ModeTooManyRequests))
			d.logger.Info("flaky answers normally again")
		case <-tick.C:
			d.sc.show(viewInfo{cfg: cfg, dir: d.dir}, d.snapshot(ctx, since()))
		}
	}
}

// snapshot observes once and folds in the workload and the outage.
func (d *demo) snapshot(ctx context.Context, at time.Duration) snapshot {
	s := d.obs.observe(ctx, at)
	d.out.observeSettings(s.Breakers)
	d.out.update(at, nodeFlaky(s), d.obs.receivedDown(destFlaky), d.wl.stats().Submitted[destFlaky])
	s.Workload = d.wl.stats()
	for i := range s.Dests {
		s.Dests[i].Submitted = s.Workload.Submitted[s.Dests[i].Name]
	}
	s.Outage = d.out.view()
	healthy := 0
	for _, dv := range s.Dests {
		if dv.Name == destHealthy {
			healthy = dv.Received
		}
	}
	d.fl.observe(at, time.Now().Add(-at), nodeFlaky(s), d.obs.receivedIn(destFlaky, transporttest.ModeTooManyRequests), healthy, s.Breakers)
	s.Fleet = d.fl.view(s.Breakers, s.Outage, d.obs.trips)
	return s
}

// finishRun stops the workload and reads the final figures while the
// nodes still run.
func (d *demo) finishRun(ran time.Duration) {
	d.wl.stop()
	d.sum.Ran = ran
	ctx, cancel := context.WithTimeout(context.Background(), summaryTimeout)
	defer cancel()
	s := d.snapshot(ctx, ran)
	// An outage still under way keeps phase down: snapshot's update made
	// its figures final.
	d.sum.Outage = d.out.view()
	d.sum.Transitions = transitionsFrom(s)
	d.sum.Events = d.obs.events
	d.sum.Trips = s.Trips
	d.sum.Fleet = s.Fleet
	ws := d.wl.stats()
	d.sum.Submitted, d.sum.SubmitFailed, d.sum.Overloaded = ws.Submitted, ws.Failed, ws.Overloaded
	tasks, err := countTasks(ctx, d.cl)
	if err != nil {
		d.sum.TasksErr = err.Error()
	} else {
		d.sum.Tasks = tasks
	}
}

// teardown undoes start in reverse order: workload, nodes (SIGTERM, or
// SIGKILL when panicking), destinations, temp dir. It runs once.
func (d *demo) teardown(panicking bool) {
	if d.torndown {
		return
	}
	d.torndown = true
	if d.wl != nil {
		d.wl.stop()
	}
	if d.cl != nil {
		if panicking {
			d.cl.killAll()
		} else {
			if err := d.cl.stop(d.cfg.StopTimeout, d.lastLeader()); err != nil {
				d.sum.StopErr = err.Error()
			}
		}
		d.sum.LeftRunning = d.cl.leftRunning()
		for i, p := range d.cl.nodes {
			if i < len(d.sum.Nodes) {
				d.sum.Nodes[i].Pids = p.Pids()
			}
		}
		d.cl.close()
	}
	d.stopPostgres()
	for _, name := range []string{destFlaky, destHealthy} {
		if dst := d.dests[name]; dst != nil {
			_ = dst.Close()
			if d.obs != nil { // the final tally, now that nothing more arrives
				dl := d.obs.dests[name]
				dl.update()
				d.sum.Received[name], d.sum.Delivered[name], d.sum.Duplicates[name] = dl.received, dl.Delivered(), dl.dups
			}
		}
	}
	if d.logf != nil {
		_ = d.logf.Close()
	}
	if d.dir != "" && !d.cfg.Keep && d.cfg.Dir == "" {
		d.sum.DirRemoved = os.RemoveAll(d.dir) == nil
	}
}

func (d *demo) lastLeader() string {
	ctx, cancel := context.WithTimeout(context.Background(), apiTimeout)
	defer cancel()
	for _, c := range d.cl.clients {
		if info, err := c.Raft(ctx); err == nil && info.Leader != "" {
			return info.Leader
		}
	}
	return ""
}

// buildBinary builds bin/fusebox in the module root and returns its path.
func buildBinary(ctx context.Context, sc *screen) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("find the module root (go env GOMOD): %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("not inside the fusebox module: run from the repository, or pass --bin")
	}
	root := filepath.Dir(gomod)
	bin := filepath.Join(root, "bin", "fusebox")
	sc.message("building " + bin + " …")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/node")
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/node: %w\n%s", err, b)
	}
	return bin, nil
}
