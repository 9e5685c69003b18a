package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync"
	"time"

	"fusebox/api"
	"fusebox/dynconfig"
	"fusebox/internal/localproc"
)

// apiTimeout bounds one API call: a stuck node must not freeze the view.
const apiTimeout = 3 * time.Second

// cluster is the demo's nodes and a client for each.
type cluster struct {
	nodes   []*nodeProc
	clients []*api.Client
	hc      *http.Client
	sec     *secure // nil unless --secure
}

func newCluster(n int, bin, dir string, withTLS bool) (*cluster, error) {
	tr := &http.Transport{MaxIdleConnsPerHost: 8, IdleConnTimeout: 10 * time.Second}
	c := &cluster{hc: &http.Client{Timeout: apiTimeout + time.Second, Transport: tr}}
	ids := make([]string, n)
	for i := range n {
		ids[i] = fmt.Sprintf("n%d", i+1)
	}
	if withTLS {
		var err error
		if c.sec, err = newSecure(dir, ids); err != nil {
			return nil, fmt.Errorf("--secure: %w", err)
		}
		tr.TLSClientConfig = c.sec.client
		c.hc.Transport = localproc.Bearer{Token: c.sec.adminToken, Next: tr}
	}
	for _, id := range ids {
		p, err := newNodeProc(id, bin, dir, n)
		if err != nil {
			return nil, err
		}
		if c.sec != nil {
			p.extra, p.scheme = c.sec.args(id), "https"
		}
		c.nodes = append(c.nodes, p)
	}
	c.setJoins()
	return c, nil
}

// setJoins has every node join every other node's gossip address (a node
// whose only seed is itself never reports joined).
func (c *cluster) setJoins() {
	c.clients = c.clients[:0]
	for _, p := range c.nodes {
		p.join = p.join[:0]
		for _, q := range c.nodes {
			if q != p {
				p.join = append(p.join, q.gossipAddr)
			}
		}
		token := ""
		if c.sec != nil {
			token = c.sec.adminToken
		}
		c.clients = append(c.clients, api.NewClient(p.scheme+"://"+p.httpAddr, token, c.hc))
	}
}

// start launches every node, then waits for all of them to be ready (none
// is before the cluster has formed). If a port was taken between
// allocation and bind, the whole cluster is relaunched on fresh ports: the
// other nodes' --join lists name the old address. It is rare.
func (c *cluster) start(ctx context.Context, progress func(string)) error {
	for attempt := 0; ; attempt++ {
		for _, p := range c.nodes {
			if err := p.launch(); err != nil {
				return err
			}
			progress(fmt.Sprintf("started %s (pid %d): http %s, gossip %s, raft %s", p.id, p.Pids()[len(p.Pids())-1], p.httpAddr, p.gossipAddr, p.raftAddr))
		}
		err := c.waitReady(ctx, progress)
		if err == nil || !errors.Is(err, errAddrInUse) || attempt == 2 {
			return err
		}
		progress("a port was taken meanwhile; restarting the cluster on new ports")
		c.killAll()
		for _, p := range c.nodes {
			if err := os.RemoveAll(p.dataDir); err != nil { // a fresh cluster
				return err
			}
			if err := p.assignPorts(); err != nil {
				return err
			}
		}
		c.setJoins()
	}
}

func (c *cluster) waitReady(ctx context.Context, progress func(string)) error {
	errs := make([]error, len(c.nodes))
	var wg sync.WaitGroup
	start := time.Now()
	for i, p := range c.nodes {
		wg.Go(func() {
			if errs[i] = p.waitReady(ctx, c.hc); errs[i] == nil {
				progress(fmt.Sprintf("%s ready after %v", p.id, time.Since(start).Round(10*time.Millisecond)))
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// stop stops every node gracefully, followers first and the leader last,
// each within timeout (then killed). It returns every failure.
func (c *cluster) stop(timeout time.Duration, leader string) error {
	order := make([]*nodeProc, 0, len(c.nodes))
	var last *nodeProc
	for i := len(c.nodes) - 1; i >= 0; i-- { // reverse start order
		if p := c.nodes[i]; p.id == leader {
			last = p
		} else {
			order = append(order, p)
		}
	}
	if last != nil {
		order = append(order, last)
	}
	var errs []error
	for _, p := range order {
		errs = append(errs, p.stop(timeout))
	}
	return errors.Join(errs...)
}

// killAll SIGKILLs whatever still runs: the panic and error path.
func (c *cluster) killAll() {
	for _, p := range c.nodes {
		_ = p.kill()
	}
}

// leftRunning names the nodes whose process has not been reaped.
func (c *cluster) leftRunning() []string {
	var out []string
	for _, p := range c.nodes {
		if p.running() {
			out = append(out, p.id)
		}
	}
	return out
}

// call runs f against the nodes in turn, starting at node first, until one
// answers; it returns the last error if none does.
func (c *cluster) call(ctx context.Context, first int, f func(context.Context, *api.Client) error) error {
	var err error
	for i := range c.clients {
		cctx, cancel := context.WithTimeout(ctx, apiTimeout)
		err = f(cctx, c.clients[(first+i)%len(c.clients)])
		cancel()
		if err == nil || ctx.Err() != nil {
			return err
		}
	}
	return err
}

// setup registers the demo's endpoints (flaky with its health check when
// cfg.HealthInterval is set), its breaker settings and healthy's fleet
// budget.
func (c *cluster) setup(ctx context.Context, cfg Config, healthyURL, flakyURL, flakyHealthURL string) error {
	flaky := api.Endpoint{Name: destFlaky, URL: flakyURL, Description: "demo: goes down for a while"}
	if cfg.HealthInterval > 0 {
		flaky.Health = &api.EndpointHealth{URL: flakyHealthURL, Interval: cfg.HealthInterval.String(), Timeout: healthTimeout(cfg.HealthInterval).String()}
	}
	for _, e := range []api.Endpoint{
		{Name: destHealthy, URL: healthyURL, Description: "demo: always up"},
		flaky,
	} {
		err := c.call(ctx, 0, func(ctx context.Context, cl *api.Client) error {
			_, err := cl.PutEndpoint(ctx, e)
			return err
		})
		if err != nil {
			return fmt.Errorf("register endpoint %s: %w", e.Name, err)
		}
	}
	settings, err := json.Marshal(map[string]string{"Timeout": cfg.BreakerTimeout.String()})
	if err != nil {
		return err
	}
	type write struct {
		key string
		api.ConfigWrite
	}
	writes := []write{{dynconfig.KeyBreakerSettings, api.ConfigWrite{Value: settings}}}
	if cfg.HintPolicy != "" {
		v, _ := json.Marshal(cfg.HintPolicy)
		writes = append(writes, write{dynconfig.KeyBreakerHintPolicy, api.ConfigWrite{Value: v}})
	}
	if cfg.FleetRPS > 0 {
		v, _ := json.Marshal(cfg.FleetRPS)
		writes = append(writes, write{dynconfig.KeyFleetRPS, api.ConfigWrite{Namespace: demoNamespace, Destination: destHealthy, Value: v}})
	}
	for _, w := range writes {
		err := c.call(ctx, 0, func(ctx context.Context, cl *api.Client) error {
			_, err := cl.ConfigSet(ctx, w.key, w.ConfigWrite)
			return err
		})
		if err != nil {
			return fmt.Errorf("set %s: %w", w.key, err)
		}
	}
	return nil
}

// healthTimeout is the timeout of flaky's health check: half its
// interval, at most 2 s (fusebox's default).
func healthTimeout(interval time.Duration) time.Duration {
	return min(interval/2, 2*time.Second)
}

func (c *cluster) close() { c.hc.CloseIdleConnections() }
