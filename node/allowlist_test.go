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

// A node's API, Raft and gossip ports are protected at their bound
// addresses, not only at the advertised ones: bound to 127.0.0.1 while
// advertising 127.0.0.2 (API, gossip) or 192.0.2.1 (Raft; TEST-NET-1,
// never routed, and a lone node dials nothing at its own address), each
// port is refused at both, and at localhost, at submit and at dial. And a
// node that advertises its Raft beyond loopback is not a loopback-only
// node: it allows no destination by default. (Tests bind loopback only;
// a wildcard bind's every-local-address rule is transport's,
// TestDialRefusesZonedMember and the member tests there.)
func TestBoundAddressesAreMembers(t *testing.T) {
	cfg := testConfig(t, "b1", 1, nil)
	cfg.AdvertiseHTTPAddr, cfg.AdvertiseRaftAddr, cfg.AdvertiseGossipAddr = "127.0.0.2", "192.0.2.1", "127.0.0.2"
	cfg.Insecure = true // Raft advertised beyond loopback without TLS: this test only
	n := startNode(t, cfg)
	(&testCluster{t: t, nodes: []*testNode{n}}).waitReady(30 * time.Second)
	testwait.For(t, 30*time.Second, "shards placed", func() bool { return shardsSettled(t, []*Node{n.Node}) })

	const ns = "ns-bound"
	configSet(t, n, dynconfig.KeyCallbackAllowedAddresses, ns, `[{"Pattern":"127.0.0.*:*","AllowInsecure":true},{"Pattern":"192.0.2.1:*","AllowInsecure":true},{"Pattern":"localhost:*","AllowInsecure":true}]`)
	policy := n.newDestinationPolicy()
	if policy.DefaultAllow {
		t.Error("a node advertising its Raft beyond loopback allows every destination by default")
	}
	bound := n.boundAddrs() // API, Raft, gossip
	for i, what := range []string{"http", "raft", "gossip"} {
		host, port, _ := net.SplitHostPort(bound[i])
		adv := map[string]string{"http": "127.0.0.2", "raft": "192.0.2.1", "gossip": "127.0.0.2"}[what]
		if host != "127.0.0.1" {
			t.Fatalf("%s bound to %s, want 127.0.0.1", what, bound[i])
		}
		for _, h := range []string{"127.0.0.1", adv, "localhost"} {
			url := "http://" + net.JoinHostPort(h, port) + "/v1/breakers/force"
			ts := callbackTask(url, "wf-bound-"+what, "bound-"+what)
			ts.NamespaceID = ns
			_, err := n.client().SubmitTask(ctxT(t), ts)
			wantField(t, err, "destination")
			if !strings.Contains(err.Error(), "member") {
				t.Errorf("%s %s: error %v does not say why", what, url, err)
			}
			if h == "localhost" {
				continue
			}
			if err := policy.DialControl("tcp", net.JoinHostPort(h, port), nil); err == nil {
				t.Errorf("%s: the dialer allows %s:%s", what, h, port)
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
