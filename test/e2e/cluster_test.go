package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"fusebox/api"
	"fusebox/internal/testwait"
)

// ClusterOptions tune NewCluster; the zero value is the default profile.
type ClusterOptions struct {
	Timing     string // default "fast"
	LogLevel   string // default "debug"
	AdminToken string
	ExtraArgs  []string
	// Hosts, when set, gives node i the IP Hosts[i] and the network
	// namespace Netns[i] (partition tests); default 127.0.0.1, no netns.
	Hosts []string
	Netns []string
	// Tweak, when set, adjusts each node's config before launch (TLS).
	Tweak func(*ProcessConfig)
}

// withOptions is a with b's settings added: b's ExtraArgs after a's, b's
// Tweak after a's, and b's other fields where b sets them.
func withOptions(a, b ClusterOptions) ClusterOptions {
	out := a
	out.ExtraArgs = append(append([]string(nil), a.ExtraArgs...), b.ExtraArgs...)
	if b.Timing != "" {
		out.Timing = b.Timing
	}
	if b.LogLevel != "" {
		out.LogLevel = b.LogLevel
	}
	if b.AdminToken != "" {
		out.AdminToken = b.AdminToken
	}
	if b.Hosts != nil {
		out.Hosts, out.Netns = b.Hosts, b.Netns
	}
	if ta, tb := a.Tweak, b.Tweak; tb != nil {
		out.Tweak = func(c *ProcessConfig) {
			if ta != nil {
				ta(c)
			}
			tb(c)
		}
	}
	return out
}

// Cluster is n fusebox processes formed with --bootstrap-expect n.
type Cluster struct {
	t     testing.TB
	Procs []*Process
	// loads are the task streams sent to this cluster (NewTaskLoad);
	// CheckInvariants verifies their tasks.
	loads []*TaskLoad
}

// NewCluster allocates loopback ports for n nodes, launches them all with
// --bootstrap-expect n --join <every other gossip address>, and waits until each
// answers /readyz. A node whose port was taken meanwhile gets new ports and
// is launched again.
func NewCluster(t testing.TB, n int, opts ClusterOptions) *Cluster {
	t.Helper()
	c := &Cluster{t: t}
	for i := range n {
		host := "127.0.0.1"
		if i < len(opts.Hosts) {
			host = opts.Hosts[i]
		}
		cfg := ProcessConfig{
			NodeID:          fmt.Sprintf("n%d", i+1),
			BootstrapExpect: n,
			Timing:          opts.Timing,
			LogLevel:        opts.LogLevel,
			AdminToken:      opts.AdminToken,
			ExtraArgs:       opts.ExtraArgs,
		}
		if i < len(opts.Netns) {
			// A namespace of its own: every port is free there.
			cfg.Netns = opts.Netns[i]
			cfg.HTTPAddr = net.JoinHostPort(host, "7101")
			cfg.GossipAddr = net.JoinHostPort(host, "7102")
			cfg.RaftAddr = net.JoinHostPort(host, "7103")
		} else if err := assignPorts(&cfg, host); err != nil {
			t.Fatal(err)
		}
		if opts.Tweak != nil {
			opts.Tweak(&cfg)
		}
		c.Procs = append(c.Procs, NewProcess(t, cfg))
	}
	// Each node joins every other node (a node whose only --join is itself
	// never reports gossip_joined; a one-node cluster gets no --join).
	for _, p := range c.Procs {
		for _, q := range c.Procs {
			if q != p {
				p.cfg.Join = append(p.cfg.Join, q.cfg.GossipAddr)
			}
		}
	}
	start := time.Now()
	for _, p := range c.Procs {
		if err := p.Launch(); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.waitAllReady(); err != nil {
		t.Fatal(err)
	}
	t.Logf("cluster of %d ready in %v", n, time.Since(start).Round(time.Millisecond))
	return c
}

// waitAllReady waits for every node concurrently (none is ready before the
// cluster has formed), relaunching on new ports a node that lost a port race.
func (c *Cluster) waitAllReady() error {
	errs := make([]error, len(c.Procs))
	var wg sync.WaitGroup
	for i, p := range c.Procs {
		wg.Go(func() {
			for attempt := 0; ; attempt++ {
				err := p.WaitReady(context.Background())
				if err == nil || !errors.Is(err, errAddrInUse) || attempt == 3 {
					errs[i] = err
					return
				}
				host, _, _ := net.SplitHostPort(p.cfg.HTTPAddr)
				c.t.Logf("%s lost a port race; relaunching on new ports", p.Name())
				if err := assignPorts(&p.cfg, host); err != nil {
					errs[i] = err
					return
				}
				if err := p.Launch(); err != nil {
					errs[i] = err
					return
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Node returns the process with node id id, or nil.
func (c *Cluster) Node(id string) *Process {
	for _, p := range c.Procs {
		if p.Name() == id {
			return p
		}
	}
	return nil
}

// Live returns the processes that are running and not paused.
func (c *Cluster) Live() []*Process {
	var out []*Process
	for _, p := range c.Procs {
		if p.Running() && !p.Paused() && !p.Isolated() {
			out = append(out, p)
		}
	}
	return out
}

// Leader returns the node every live node names as Raft leader, if they
// agree and it is live; else an error describing the disagreement.
func (c *Cluster) Leader() (*Process, error) {
	live := c.Live()
	if len(live) == 0 {
		return nil, errors.New("no live node")
	}
	views := map[string][]string{}
	for _, p := range live {
		info, err := p.Client().Raft(context.Background())
		if err != nil {
			return nil, fmt.Errorf("%s: GET /v1/cluster/raft: %w", p.Name(), err)
		}
		views[info.Leader] = append(views[info.Leader], p.Name())
	}
	if len(views) != 1 {
		return nil, fmt.Errorf("nodes disagree on the leader: %v", views)
	}
	for id := range views {
		if id == "" {
			return nil, errors.New("no leader")
		}
		l := c.Node(id)
		if l == nil || !l.Running() || l.Paused() || l.Isolated() {
			return nil, fmt.Errorf("leader %q is not a live node", id)
		}
		return l, nil
	}
	panic("unreachable")
}

// WaitForLeader waits until the live nodes agree on one live leader.
func (c *Cluster) WaitForLeader(t testing.TB, timeout time.Duration) *Process {
	t.Helper()
	var l *Process
	testwait.ForErr(t, timeout, "one leader agreed by every live node", func() error {
		var err error
		l, err = c.Leader()
		return err
	})
	return l
}

// Followers are the live nodes other than the current leader.
func (c *Cluster) Followers(t testing.TB) []*Process {
	t.Helper()
	l := c.WaitForLeader(t, 30*time.Second)
	var out []*Process
	for _, p := range c.Live() {
		if p != l {
			out = append(out, p)
		}
	}
	return out
}

// CheckMembership checks that every live node sees want alive members and a
// Raft configuration of want voters, the same on every node.
func (c *Cluster) CheckMembership(want int) error {
	var first []string
	for _, p := range c.Live() {
		ctx := context.Background()
		ms, err := p.Client().Members(ctx)
		if err != nil {
			return fmt.Errorf("%s: members: %w", p.Name(), err)
		}
		alive := 0
		for _, m := range ms {
			if m.State == "alive" {
				alive++
			}
		}
		if alive != want {
			return fmt.Errorf("%s sees %d alive members, want %d: %+v", p.Name(), alive, want, ms)
		}
		info, err := p.Client().Raft(ctx)
		if err != nil {
			return fmt.Errorf("%s: raft: %w", p.Name(), err)
		}
		voters := raftVoters(info)
		if len(voters) != want {
			return fmt.Errorf("%s has %d voters %v, want %d", p.Name(), len(voters), voters, want)
		}
		if first == nil {
			first = voters
		} else if strings.Join(first, ",") != strings.Join(voters, ",") {
			return fmt.Errorf("%s has voters %v, others %v", p.Name(), voters, first)
		}
	}
	return nil
}

func raftVoters(info api.RaftInfo) []string {
	var out []string
	for _, s := range info.Servers {
		if s.Suffrage == "voter" || s.Suffrage == "Voter" {
			out = append(out, s.ID+"@"+s.Address)
		}
	}
	sort.Strings(out)
	return out
}

// CheckInvariants is run after every scenario: exactly one leader agreed by
// all live nodes; every live node holds the same config and endpoints
// (replication has caught up on all of them); every live node holds the
// same shard map, each shard owned by exactly one live node that works on
// it (sameShardMap); and, for every task load sent to the cluster, every
// accepted task is terminal on every live node and reached its destination
// (TaskLoad.Check, which stops the load first).
func (c *Cluster) CheckInvariants(t testing.TB, timeout time.Duration) {
	t.Helper()
	c.WaitForLeader(t, timeout)
	testwait.ForErr(t, timeout, "every live node to hold the same config and endpoints", c.sameState)
	testwait.ForErr(t, timeout, "every live node to hold the same shard map, each shard worked on by its one live owner", c.sameShardMap)
	for _, l := range c.loads {
		rep := l.Check(t, timeout)
		t.Logf("task invariant for %s*: %v", l.prefix, rep)
	}
}

// sameState compares the config list and the endpoint registry of every
// live node.
func (c *Cluster) sameState() error {
	var ref string
	var refNode string
	for _, p := range c.Live() {
		s, err := stateDigest(p.Client())
		if err != nil {
			return fmt.Errorf("%s: %w", p.Name(), err)
		}
		if refNode == "" {
			ref, refNode = s, p.Name()
		} else if s != ref {
			return fmt.Errorf("%s differs from %s:\n%s\n--- vs ---\n%s", p.Name(), refNode, s, ref)
		}
	}
	return nil
}

// stateDigest renders a node's config entries and endpoints canonically.
func stateDigest(cl *api.Client) (string, error) {
	ctx := context.Background()
	l, err := cl.ConfigList(ctx)
	if err != nil {
		return "", fmt.Errorf("config list: %w", err)
	}
	eps, err := cl.Endpoints(ctx)
	if err != nil {
		return "", fmt.Errorf("endpoints: %w", err)
	}
	var lines []string
	for _, e := range l.Entries {
		lines = append(lines, fmt.Sprintf("config %s ns=%s dest=%s = %s @%d", e.Key, e.Namespace, e.Destination, compactValue(e.Value), e.Index))
	}
	for _, e := range eps {
		lines = append(lines, fmt.Sprintf("endpoint %s = %s @%d", e.Name, e.URL, e.Index))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n"), nil
}

// NoProcessLeft fails the test if any process of the cluster still runs.
func (c *Cluster) NoProcessLeft(t testing.TB) {
	t.Helper()
	for _, p := range c.Procs {
		if p.Running() {
			t.Errorf("%s (pid %d) still running", p.Name(), p.Pid())
		}
	}
}

// StopAll stops every node gracefully, one at a time, followers first and
// the leader last (the way an operator shuts a cluster down), requiring a
// clean exit from each, and checks that none is left running.
func (c *Cluster) StopAll(t testing.TB) {
	t.Helper()
	order := append([]*Process(nil), c.Procs...)
	if l, err := c.Leader(); err == nil {
		sort.SliceStable(order, func(i, j int) bool { return order[j] == l && order[i] != l })
	}
	for _, p := range order {
		if p.Running() {
			if err := p.Stop(); err != nil {
				t.Errorf("stop %s: %v", p.Name(), err)
			}
		}
	}
	c.NoProcessLeft(t)
}

// compactValue renders a JSON value without insignificant space.
func compactValue(v json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Compact(&b, v); err != nil {
		return string(v)
	}
	return b.String()
}
