package node

import (
	"net"
	"strings"
	"testing"
	"time"

	"fusebox/api"
	"fusebox/dynconfig"
	"fusebox/internal/testwait"
	"fusebox/raftstore/state"
	"fusebox/transport/transporttest"
)

// The allowlist is checked at submit (400 naming destination) and again at
// every attempt: narrowing it dead-letters a pending task with the reason
// (shown redacted in the DLQ), and widening it again lets a redrive
// deliver it.
func TestAllowlistAtSubmitAndAttempt(t *testing.T) {
	n, _ := secureNode(t)
	const ns = "ns-allow"
	dest := transporttest.NewDestination(t)
	if err := dest.SetMode(transporttest.ModeRefuse); err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(dest.Addr())
	configSet(t, n, dynconfig.KeyCallbackAllowedAddresses, ns, `[{"Pattern":"127.0.0.1:*","AllowInsecure":true}]`)

	submit := func(url, wf string) (api.TaskAccepted, error) {
		ts := callbackTask(url, wf, wf)
		ts.NamespaceID = ns
		return n.client().SubmitTask(ctxT(t), ts)
	}
	_, err := submit("http://localhost:"+port+"/callback", "wf-not-listed")
	wantField(t, err, "destination")
	configSet(t, n, dynconfig.KeyCallbackAllowedAddresses, ns, `[{"Pattern":"127.0.0.1:*"}]`)
	_, err = submit(dest.CallbackURL(), "wf-insecure")
	wantField(t, err, "destination") // http needs AllowInsecure
	configSet(t, n, dynconfig.KeyCallbackAllowedAddresses, ns, `[{"Pattern":"127.0.0.1:*","AllowInsecure":true}]`)

	acc, err := submit(dest.CallbackURL()+"?sig=dlq-secret", "wf-pending")
	if err != nil {
		t.Fatal(err)
	}
	waitTask(t, n, acc.TaskID, "tried", func(tk api.Task) bool { return tk.Attempts >= 1 })
	configSet(t, n, dynconfig.KeyCallbackAllowedAddresses, ns, `[{"Pattern":"hooks.example.com"}]`)
	tk := waitTask(t, n, acc.TaskID, "dead-lettered", func(tk api.Task) bool { return tk.Status == state.TaskDLQ })
	if tk.LastAnswer == nil || !strings.Contains(tk.LastAnswer.Message, dynconfig.KeyCallbackAllowedAddresses) {
		t.Fatalf("last answer %+v does not say the allowlist refused it", tk.LastAnswer)
	}
	dlq := getRaw(t, n, "/v1/dlq")
	if !strings.Contains(dlq, acc.TaskID) || strings.Contains(dlq, "dlq-secret") {
		t.Fatalf("DLQ listing (want the task, redacted): %s", dlq)
	}

	configSet(t, n, dynconfig.KeyCallbackAllowedAddresses, ns, `[{"Pattern":"127.0.0.1:*","AllowInsecure":true}]`)
	if err := dest.SetMode(transporttest.ModeUp); err != nil {
		t.Fatal(err)
	}
	if _, err := n.client().Redrive(ctxT(t), api.Redrive{IDs: []string{acc.TaskID}}); err != nil {
		t.Fatal(err)
	}
	waitTask(t, n, acc.TaskID, "succeeded after the redrive", func(tk api.Task) bool { return tk.Status == state.TaskSucceeded })
}

// A callback or endpoint aimed at the node's own API, Raft or gossip port is
// refused at submit, also through a name that resolves to loopback; an
// endpoint re-pointed at the node behind the API's back is refused by the
// dialer, and the task fails as blocked without reaching it.
func TestMemberAddressesRefused(t *testing.T) {
	n, _ := secureNode(t)
	for _, addr := range []string{n.HTTPAddr(), n.RaftAddr(), n.GossipAddr()} {
		_, port, _ := net.SplitHostPort(addr)
		for _, url := range []string{"http://" + addr + "/v1/breakers/force", "http://localhost:" + port + "/v1/breakers/force"} {
			_, err := n.client().SubmitTask(ctxT(t), callbackTask(url, "wf-self", "self"))
			wantField(t, err, "destination")
			if !strings.Contains(err.Error(), "member") {
				t.Errorf("%s: error %v does not say why", url, err)
			}
		}
	}
	_, apiPort, _ := net.SplitHostPort(n.HTTPAddr())
	_, err := n.client().PutEndpoint(ctxT(t), api.Endpoint{Name: "self", URL: "http://localhost:" + apiPort + "/nexus"})
	wantField(t, err, "url")
	// A URL with a port and no host name: Go dials it on this host.
	_, err = n.client().SubmitTask(ctxT(t), callbackTask("http://:"+apiPort+"/v1/breakers/force", "wf-nohost", "nohost"))
	wantField(t, err, "destination")
	_, err = n.client().PutEndpoint(ctxT(t), api.Endpoint{Name: "nohost", URL: "http://:" + apiPort + "/nexus"})
	wantField(t, err, "url")
	_, err = n.client().PutEndpoint(ctxT(t), api.Endpoint{Name: "creds", URL: "http://user:password@127.0.0.1:9/nexus"})
	wantField(t, err, "url")

	// An endpoint stored with credentials before they were refused is
	// listed without them.
	if _, err := n.store.PutEndpoint(ctxT(t), state.PutEndpointCommand{Name: "legacy", URL: "http://user:password@127.0.0.1:9/nexus"}); err != nil {
		t.Fatal(err)
	}
	if eps := getRaw(t, n, "/v1/endpoints"); strings.Contains(eps, "password") || !strings.Contains(eps, "legacy") {
		t.Fatalf("endpoint list: %s", eps)
	}

	// At dial: the endpoint is valid at submit, then re-pointed (directly in
	// the store, as a DNS change would) at the node's own API.
	dest := transporttest.NewDestination(t)
	if err := dest.SetMode(transporttest.ModeRefuse); err != nil {
		t.Fatal(err)
	}
	if _, err := n.client().PutEndpoint(ctxT(t), api.Endpoint{Name: "moving", URL: dest.NexusURL()}); err != nil {
		t.Fatal(err)
	}
	acc, err := n.client().SubmitTask(ctxT(t), echoTask("moving", "wf-moving", "moving"))
	if err != nil {
		t.Fatal(err)
	}
	waitTask(t, n, acc.TaskID, "tried", func(tk api.Task) bool { return tk.Attempts >= 1 })
	if _, err := n.store.PutEndpoint(ctxT(t), state.PutEndpointCommand{Name: "moving", URL: "http://localhost:" + apiPort + "/nexus"}); err != nil {
		t.Fatal(err)
	}
	tk := waitTask(t, n, acc.TaskID, "failed", func(tk api.Task) bool { return tk.Status == state.TaskFailed })
	if tk.LastAnswer == nil || !strings.Contains(tk.LastAnswer.Message, "blocked") {
		t.Fatalf("last answer %+v; want the dialer's refusal", tk.LastAnswer)
	}
}

// A node's Raft and gossip ports are protected at their bound addresses,
// not only at the advertised ones: bound to 0.0.0.0 (Raft) or to 127.0.0.1
// while advertising 127.0.0.2 (gossip, API), the ports stay refused on
// 127.0.0.1 and on every other local address, at submit and at dial. And a
// node whose Raft listens on every interface is not a loopback-only node,
// whatever it advertises: it allows no destination by default.
func TestBoundAddressesAreMembers(t *testing.T) {
	cfg := testConfig(t, "b1", 1, nil)
	cfg.RaftAddr = "0.0.0.0:0"
	cfg.AdvertiseHTTPAddr, cfg.AdvertiseRaftAddr, cfg.AdvertiseGossipAddr = "127.0.0.2", "127.0.0.2", "127.0.0.2"
	cfg.Insecure = true // Raft beyond loopback without TLS: this test only
	n := startNode(t, cfg)
	(&testCluster{t: t, nodes: []*testNode{n}}).waitReady(30 * time.Second)
	testwait.For(t, 30*time.Second, "shards placed", func() bool { return shardsSettled(t, []*Node{n.Node}) })

	const ns = "ns-bound"
	configSet(t, n, dynconfig.KeyCallbackAllowedAddresses, ns, `[{"Pattern":"127.0.0.*:*","AllowInsecure":true},{"Pattern":"localhost:*","AllowInsecure":true}]`)
	policy := n.newDestinationPolicy()
	if policy.DefaultAllow {
		t.Error("a node with Raft bound on 0.0.0.0 allows every destination by default")
	}
	for what, addr := range map[string]string{"http": n.HTTPAddr(), "raft": n.RaftAddr(), "gossip": n.GossipAddr()} {
		_, port, _ := net.SplitHostPort(addr)
		for _, host := range []string{"127.0.0.1", "127.0.0.2", "127.0.0.3", "localhost"} {
			url := "http://" + net.JoinHostPort(host, port) + "/v1/breakers/force"
			ts := callbackTask(url, "wf-bound-"+what, "bound-"+what)
			ts.NamespaceID = ns
			_, err := n.client().SubmitTask(ctxT(t), ts)
			if host == "127.0.0.3" && what != "raft" {
				// Only the wildcard-bound listener covers every local address.
				continue
			}
			wantField(t, err, "destination")
			if !strings.Contains(err.Error(), "member") {
				t.Errorf("%s %s: error %v does not say why", what, url, err)
			}
			if host == "localhost" {
				continue
			}
			if err := policy.DialControl("tcp", net.JoinHostPort(host, port), nil); err == nil {
				t.Errorf("%s: the dialer allows %s:%s", what, host, port)
			}
		}
	}
	// No list for the namespace and none globally: refused by default.
	dest := transporttest.NewDestination(t)
	ts := callbackTask(dest.CallbackURL(), "wf-default", "default")
	ts.NamespaceID = "ns-unlisted"
	_, err := n.client().SubmitTask(ctxT(t), ts)
	wantField(t, err, "destination")
	if !strings.Contains(err.Error(), "allowedAddresses") {
		t.Errorf("error %v does not name the allowlist", err)
	}
}
