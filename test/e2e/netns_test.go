package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"fusebox/internal/testwait"
	"fusebox/transport/transporttest"
)

// netLab is a private network of namespaces built for one test: a bridge in
// its own namespace, one namespace per node on a veth into the bridge, and
// one veth from the test's namespace into the bridge so the test can reach
// the nodes' APIs. Addresses are in 198.18.<sub>.0/24 (RFC 2544 benchmark
// range) on veths the test creates; nothing is routed anywhere else.
type netLab struct {
	t      *testing.T
	tag    string
	sub    int
	bridge string   // namespace holding br0
	nodes  []string // per-node namespaces
	hostIf string   // test-side veth
	// destIfs are the test-side ends of the destination links
	// (addDestination).
	destIfs []string
}

// netnsAvailable reports why namespaces cannot be used here, or "".
func netnsAvailable() string {
	if os.Getenv("FUSEBOX_E2E_NETNS") == "0" {
		return "FUSEBOX_E2E_NETNS=0 turns the partition test off"
	}
	if runtime.GOOS != "linux" {
		return "network namespaces are Linux only"
	}
	if os.Geteuid() != 0 {
		return "network namespaces need root"
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return "no ip command: " + err.Error()
	}
	return ""
}

// run runs ip with args, returning its output in the error.
func runIP(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

func nsIP(ns string, args ...string) error {
	return runIP(append([]string{"netns", "exec", ns, "ip"}, args...)...)
}

// newNetLab builds the network for n nodes and removes it in t.Cleanup
// (registered first, so it runs after the processes are killed). If the
// machine does not allow it, the test is skipped with the reason.
func newNetLab(t *testing.T, n int) *netLab {
	t.Helper()
	id := os.Getpid() % 10000
	l := &netLab{t: t, tag: fmt.Sprintf("fb%d", id), sub: id%250 + 1}
	l.bridge = l.tag + "-br"
	l.hostIf = l.tag + "h"
	t.Cleanup(l.teardown)
	if err := l.build(n); err != nil {
		t.Skipf("network namespaces are not usable here: %v", err)
	}
	return l
}

func (l *netLab) build(n int) error {
	steps := [][]string{
		{"netns", "add", l.bridge},
		{"netns", "exec", l.bridge, "ip", "link", "add", "br0", "type", "bridge"},
		{"netns", "exec", l.bridge, "ip", "link", "set", "br0", "up"},
		// The test's own leg into the bridge.
		{"link", "add", l.hostIf, "type", "veth", "peer", "name", l.hostIf + "b"},
		{"link", "set", l.hostIf + "b", "netns", l.bridge},
		{"netns", "exec", l.bridge, "ip", "link", "set", l.hostIf + "b", "master", "br0", "up"},
		{"addr", "add", fmt.Sprintf("198.18.%d.1/24", l.sub), "dev", l.hostIf},
		{"link", "set", l.hostIf, "up"},
	}
	for i := range n {
		ns := fmt.Sprintf("%s-n%d", l.tag, i+1)
		a, b := l.nodeIf(i)+"a", l.nodeIf(i)+"b"
		l.nodes = append(l.nodes, ns)
		steps = append(steps,
			[]string{"netns", "add", ns},
			[]string{"netns", "exec", ns, "ip", "link", "set", "lo", "up"},
			[]string{"link", "add", a, "type", "veth", "peer", "name", b},
			[]string{"link", "set", a, "netns", ns},
			[]string{"link", "set", b, "netns", l.bridge},
			[]string{"netns", "exec", l.bridge, "ip", "link", "set", b, "master", "br0", "up"},
			[]string{"netns", "exec", ns, "ip", "addr", "add", l.nodeIP(i) + "/24", "dev", a},
			[]string{"netns", "exec", ns, "ip", "link", "set", a, "up"},
		)
	}
	for _, s := range steps {
		if err := runIP(s...); err != nil {
			return err
		}
	}
	return nil
}

func (l *netLab) nodeIf(i int) string { return fmt.Sprintf("%sn%d", l.tag, i+1) }

func (l *netLab) nodeIP(i int) string { return fmt.Sprintf("198.18.%d.%d", l.sub, 10+i) }

// hosts is every node's IP, for ClusterOptions.Hosts.
func (l *netLab) hosts() []string {
	var out []string
	for i := range l.nodes {
		out = append(out, l.nodeIP(i))
	}
	return out
}

// cut takes node i's bridge port down: it can reach no peer and the test
// cannot reach it. heal brings it back.
func (l *netLab) cut(i int) {
	l.t.Helper()
	if err := nsIP(l.bridge, "link", "set", l.nodeIf(i)+"b", "down"); err != nil {
		l.t.Fatal(err)
	}
}

func (l *netLab) heal(i int) {
	l.t.Helper()
	if err := nsIP(l.bridge, "link", "set", l.nodeIf(i)+"b", "up"); err != nil {
		l.t.Fatal(err)
	}
}

// cutTogether cuts nodes idx off from the rest and from the test, but not
// from each other: their bridge ports move to a second bridge (br1) of
// their own. A single node is cut as cut does. healTogether moves them
// back.
func (l *netLab) cutTogether(idx ...int) {
	l.t.Helper()
	if len(idx) == 1 {
		l.cut(idx[0])
		return
	}
	if err := nsIP(l.bridge, "link", "show", "br1"); err != nil {
		for _, s := range [][]string{{"link", "add", "br1", "type", "bridge"}, {"link", "set", "br1", "up"}} {
			if err := nsIP(l.bridge, s...); err != nil {
				l.t.Fatal(err)
			}
		}
	}
	for _, i := range idx {
		if err := nsIP(l.bridge, "link", "set", l.nodeIf(i)+"b", "master", "br1"); err != nil {
			l.t.Fatal(err)
		}
	}
}

func (l *netLab) healTogether(idx ...int) {
	l.t.Helper()
	if len(idx) == 1 {
		l.heal(idx[0])
		return
	}
	for _, i := range idx {
		if err := nsIP(l.bridge, "link", "set", l.nodeIf(i)+"b", "master", "br0"); err != nil {
			l.t.Fatal(err)
		}
	}
}

// addDestination gives every node a path to the test's namespace that
// does not go through the bridge, and returns the address a destination
// there listens on: 198.19.<k>.254, routed from node i
// over its own veth (198.19.<k>.<4i+2>/30 in the node, .<4i+1> here). A cut
// (the bridge port down) then separates a node from its peers and the
// test's API calls but not from the destination: the split a shard owner's
// fencing is for. Calls arrive from the node's link address (DestSource).
// The address sits on the test's bridge leg (no node routes to it that
// way); Linux takes a packet for any local address on any interface.
func (l *netLab) addDestination() string {
	l.t.Helper()
	addr := fmt.Sprintf("198.19.%d.254", l.sub)
	steps := [][]string{{"addr", "add", addr + "/32", "dev", l.hostIf}}
	for i, ns := range l.nodes {
		a, b := fmt.Sprintf("%sd%da", l.tag, i+1), fmt.Sprintf("%sd%db", l.tag, i+1)
		l.destIfs = append(l.destIfs, b)
		steps = append(steps,
			[]string{"link", "add", a, "type", "veth", "peer", "name", b},
			[]string{"link", "set", a, "netns", ns},
			[]string{"addr", "add", fmt.Sprintf("198.19.%d.%d/30", l.sub, 4*i+1), "dev", b},
			[]string{"link", "set", b, "up"},
			[]string{"netns", "exec", ns, "ip", "addr", "add", l.DestSource(i) + "/30", "dev", a},
			[]string{"netns", "exec", ns, "ip", "link", "set", a, "up"},
			[]string{"netns", "exec", ns, "ip", "route", "add", addr + "/32", "via", fmt.Sprintf("198.19.%d.%d", l.sub, 4*i+1)},
		)
	}
	for _, s := range steps {
		if err := runIP(s...); err != nil {
			l.t.Skipf("a destination link is not usable here: %v", err)
		}
	}
	return addr
}

// addDestinationAddr adds another address on the test's side, reached by
// every node the way the destination is (addDestination first): 198.19.<k>.<host>.
// A service there (a database) can then be cut from one node alone
// (cutEgress with this address) while its destination calls still work.
func (l *netLab) addDestinationAddr(host int) string {
	l.t.Helper()
	addr := fmt.Sprintf("198.19.%d.%d", l.sub, host)
	if err := runIP("addr", "add", addr+"/32", "dev", l.hostIf); err != nil {
		l.t.Fatal(err)
	}
	for i := range l.nodes {
		l.restoreEgress(i, addr)
	}
	return addr
}

// cutEgress makes node i's calls to the destination fail at once ("no
// route to host"), as a node whose own egress broke: its peers and the test
// still reach it. restoreEgress routes them again.
func (l *netLab) cutEgress(i int, destAddr string) {
	l.t.Helper()
	if err := nsIP(l.nodes[i], "route", "replace", "unreachable", destAddr+"/32"); err != nil {
		l.t.Fatal(err)
	}
}

func (l *netLab) restoreEgress(i int, destAddr string) {
	l.t.Helper()
	if err := nsIP(l.nodes[i], "route", "replace", destAddr+"/32", "via", fmt.Sprintf("198.19.%d.%d", l.sub, 4*i+1)); err != nil {
		l.t.Fatal(err)
	}
}

// destNet is the network of every node's destination link (CIDR).
func (l *netLab) destNet() string { return fmt.Sprintf("198.19.%d.0/24", l.sub) }

// callers maps the address each of c's nodes calls the destination from
// (DestSource) to the node's name, for callsPerNode.
func (l *netLab) callers(c *Cluster) map[string]string {
	out := map[string]string{}
	for i, p := range c.Procs {
		out[l.DestSource(i)] = p.Name()
	}
	return out
}

// DestSource is the address node i's calls to the destination come from.
func (l *netLab) DestSource(i int) string { return fmt.Sprintf("198.19.%d.%d", l.sub, 4*i+2) }

// teardown deletes what the lab created; deleting a namespace deletes the
// veth ends in it, and with them their peers.
func (l *netLab) teardown() {
	for _, ns := range append(l.nodes, l.bridge) {
		_ = exec.Command("ip", "netns", "del", ns).Run()
	}
	for _, dev := range append([]string{l.hostIf}, l.destIfs...) {
		_ = exec.Command("ip", "link", "del", dev).Run()
	}
}

// TestPartitionHeal is scenario 8: cut the leader off the network while
// writes flow through the majority, then heal. The majority elects a new
// leader and keeps acknowledging; after the heal the cut node rejoins,
// steps down if it still thought it led, and catches up.
func TestPartitionHeal(t *testing.T) {
	if why := netnsAvailable(); why != "" {
		t.Skip(why)
	}
	const n = 3
	lab := newNetLab(t, n)
	var hosts []string
	for i := range n {
		hosts = append(hosts, lab.nodeIP(i))
	}
	c := NewCluster(t, n, ClusterOptions{Hosts: hosts, Netns: lab.nodes})
	requireClusterAPI(t, c.Procs[0])
	old := c.WaitForLeader(t, leaderTimeout)
	idx := -1
	for i, p := range c.Procs {
		if p == old {
			idx = i
		}
	}
	dest := transporttest.NewDestination(t)
	// The destination listens on loopback, which the nodes cannot reach; the
	// endpoints are only registry entries here.
	w := NewWriter(c, "ep-", dest.NexusURL())
	w.Run(10 * time.Millisecond)
	defer w.Stop()
	testwait.ForErr(t, convergeTimout, "10 acknowledged writes before the partition", atLeast(w, 10))

	cutAt := time.Now()
	lab.cut(idx)
	old.SetIsolated(true)
	ackedAtCut := w.Acked()
	nl := c.WaitForLeader(t, leaderTimeout)
	toLeader := time.Since(cutAt)
	testwait.ForErr(t, convergeTimout, "20 more acknowledged writes through the majority", atLeast(w, ackedAtCut+20))
	healAt := time.Now()
	lab.heal(idx)
	old.SetIsolated(false)
	testwait.ForErr(t, convergeTimout, "one leader agreed by every node, the healed one included", func() error {
		_, err := c.Leader()
		return err
	})
	w.Stop()
	w.WaitVerified(t, convergeTimout, c.Procs)
	t.Logf("cut leader %s: new leader %s after %v; healed, agreed and caught up after %v; writes: %v",
		old.Name(), nl.Name(), toLeader.Round(time.Millisecond), time.Since(healAt).Round(time.Millisecond), w.Stats())
	testwait.ForErr(t, convergeTimout, "3 alive members and 3 voters", func() error { return c.CheckMembership(n) })
	c.CheckInvariants(t, convergeTimout)
	c.StopAll(t)
}
