package e2e

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"fusebox/api"
	"fusebox/internal/localproc"
	"fusebox/internal/testwait"
	"fusebox/internal/tlsutil"
	"fusebox/raftstore/state"
)

const tlsAdminToken = "e2e-admin-token"

func newTLSCluster(t *testing.T) (*Cluster, *testPKI) {
	t.Helper()
	pki := newTestPKI(t)
	c := NewCluster(t, 3, ClusterOptions{Tweak: pki.Tweak, AdminToken: tlsAdminToken})
	return c, pki
}

// TestTLSClusterFormsForwardsAndDelivers: three nodes with TLS form a
// cluster over mutual-TLS Raft, a write on a follower is forwarded to the
// leader over mutual-TLS HTTP, callback tasks reach a real loopback
// destination, and plain HTTP to the API is refused.
func TestTLSClusterFormsForwardsAndDelivers(t *testing.T) {
	c, _ := newTLSCluster(t)
	ctx := context.Background()
	leader := c.WaitForLeader(t, leaderTimeout)
	f := c.Followers(t)[0]
	before, err := scrapeMetrics(f)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Client().PutEndpoint(ctx, api.Endpoint{Name: "tls-ep", URL: "http://127.0.0.1:9/nexus"}); err != nil {
		t.Fatalf("write on follower %s: %v", f.Name(), err)
	}
	if _, err := leader.Client().Endpoint(ctx, "tls-ep"); err != nil {
		t.Fatalf("the leader does not have the follower's write: %v", err)
	}
	after, err := scrapeMetrics(f)
	if err != nil {
		t.Fatal(err)
	}
	if d := metricSum(after, "fusebox_raft_forwarded_writes_total", `outcome="ok"`) - metricSum(before, "fusebox_raft_forwarded_writes_total", `outcome="ok"`); d < 1 {
		t.Fatalf("%s forwarded %v writes, want ≥ 1", f.Name(), d)
	}

	dest := NewDest(t)
	load := NewTaskLoad(c, "tls", func(i int) (api.TaskSubmit, *Dest) {
		return callbackTask(fmt.Sprintf("ns-%d", i%3), fmt.Sprintf("wf-%d", i), dest.CallbackURL(), i), dest
	})
	load.Run(30, 3, 20*time.Millisecond)
	load.Wait()
	c.CheckInvariants(t, convergeTimout)
	if len(dest.Deliveries()) == 0 {
		t.Fatal("no callback reached the destination")
	}

	// Plain HTTP is not served.
	hc := &http.Client{Timeout: apiTimeout}
	resp, err := hc.Get("http://" + leader.HTTPAddr() + "/v1/cluster/raft")
	if err != nil {
		t.Fatalf("plain HTTP to a TLS node: %v, want Go's 400 answer", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "HTTP request to an HTTPS server") {
		t.Fatalf("plain HTTP to a TLS node: %d %s", resp.StatusCode, b)
	}
	c.StopAll(t)
}

// injectEntry speaks raft's NetworkTransport through stream to addr: an
// AppendEntries with a much higher term carrying a real PutEndpoint
// command for endpoint "injected", as the issue's outside tester did.
func injectEntry(t *testing.T, stream raft.StreamLayer, addr string, info api.RaftInfo) (raft.AppendEntriesResponse, error) {
	t.Helper()
	cmd, err := state.EncodeCommand(state.MsgPutEndpoint, state.PutEndpointCommand{
		CommandMeta: state.CommandMeta{At: time.Now()}, Name: "injected", URL: "http://127.0.0.1:9/evil"})
	if err != nil {
		t.Fatal(err)
	}
	trans := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{Stream: stream, MaxPool: 1, Timeout: 3 * time.Second})
	defer trans.Close()
	req := &raft.AppendEntriesRequest{
		RPCHeader:    raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("stranger"), Addr: []byte("127.0.0.1:1")},
		Term:         info.Term + 100,
		PrevLogEntry: info.LastIndex, PrevLogTerm: info.Term, LeaderCommitIndex: info.LastIndex + 1,
		Entries: []*raft.Log{{Index: info.LastIndex + 1, Term: info.Term + 100, Type: raft.LogCommand,
			Data: append([]byte{1, 0}, cmd...)}}, // entry frame: version 1, empty request id
	}
	var resp raft.AppendEntriesResponse
	err = trans.AppendEntries("victim", raft.ServerAddress(addr), req, &resp)
	return resp, err
}

// checkUntouched: every node still has the term it had, the same Raft
// configuration, and no "injected" endpoint.
func checkUntouched(t *testing.T, c *Cluster, before map[string]api.RaftInfo) {
	t.Helper()
	ctx := context.Background()
	for _, p := range c.Procs {
		info, err := p.Client().Raft(ctx)
		if err != nil {
			t.Fatal(err)
		}
		b := before[p.Name()]
		if info.Term != b.Term || fmt.Sprint(info.Servers) != fmt.Sprint(b.Servers) {
			t.Fatalf("%s: raft changed: term %d→%d, servers %v→%v", p.Name(), b.Term, info.Term, b.Servers, info.Servers)
		}
		_, err = p.Client().Endpoint(ctx, "injected")
		var e *api.Error
		if !errors.As(err, &e) || e.Code != api.CodeNotFound {
			t.Fatalf("%s: endpoint \"injected\": %v, want not found", p.Name(), err)
		}
	}
}

func raftInfos(t *testing.T, c *Cluster) map[string]api.RaftInfo {
	t.Helper()
	out := map[string]api.RaftInfo{}
	for _, p := range c.Procs {
		info, err := p.Client().Raft(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		out[p.Name()] = info
	}
	return out
}

// TestTLSRaftRefusesStrangers: raft's plain TCP transport, and TLS with a
// certificate from another CA or an expired one, get no answer from a
// node's Raft port and change nothing; the same certificates are refused
// by the HTTPS API, where a certificate of the cluster's CA is accepted.
func TestTLSRaftRefusesStrangers(t *testing.T) {
	c, pki := newTLSCluster(t)
	c.WaitForLeader(t, leaderTimeout)
	victim := c.Followers(t)[0]
	before := raftInfos(t, c)
	m0, err := scrapeMetrics(victim)
	if err != nil {
		t.Fatal(err)
	}

	other, err := tlsutil.CreateCA(tlsutil.CAOptions{CommonName: "another CA"})
	if err != nil {
		t.Fatal(err)
	}
	otherPair, err := tlsutil.CreateCert(other, tlsutil.CertOptions{CommonName: "n9", Node: true})
	if err != nil {
		t.Fatal(err)
	}
	otherCert, err := tls.X509KeyPair(otherPair.Cert, otherPair.Key)
	if err != nil {
		t.Fatal(err)
	}
	expiredPair := pki.issuePair(0, tlsutil.CertOptions{CommonName: "n9", Node: true, Days: 1, NotBefore: time.Now().Add(-72 * time.Hour)})
	expiredCert, err := tls.X509KeyPair(expiredPair.Cert, expiredPair.Key)
	if err != nil {
		t.Fatal(err)
	}

	strangers := []struct {
		name string
		cfg  *tls.Config
	}{
		{"plain TCP (raft.NewTCPTransport's protocol)", nil},
		{"TLS with a certificate from another CA", strangerConfig(otherCert)},
		{"TLS with an expired certificate of the cluster's CA", strangerConfig(expiredCert)},
	}
	for _, s := range strangers {
		resp, err := injectEntry(t, newDialStream(s.cfg), victim.Config().RaftAddr, before[victim.Name()])
		if err == nil {
			t.Fatalf("%s: AppendEntries was answered: %+v", s.name, resp)
		}
		t.Logf("%s: refused: %v", s.name, err)
	}
	// The plain-TCP stranger with raft's own constructor, too.
	plain, err := raft.NewTCPTransport("127.0.0.1:0", nil, 1, 3*time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var resp raft.AppendEntriesResponse
	info := before[victim.Name()]
	err = plain.AppendEntries("victim", raft.ServerAddress(victim.Config().RaftAddr), &raft.AppendEntriesRequest{
		RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("stranger"), Addr: []byte(plain.LocalAddr())},
		Term:      info.Term + 100, PrevLogEntry: info.LastIndex, PrevLogTerm: info.Term,
	}, &resp)
	plain.Close()
	if err == nil {
		t.Fatalf("raft.NewTCPTransport: AppendEntries was answered: %+v", resp)
	}

	testwait.ForErr(t, 10*time.Second, "the victim to count the refused handshakes", func() error {
		m, err := scrapeMetrics(victim)
		if err != nil {
			return err
		}
		d := metricSum(m, "fusebox_raft_tls_handshake_failures_total", `direction="inbound"`) - metricSum(m0, "fusebox_raft_tls_handshake_failures_total", `direction="inbound"`)
		if d < 4 {
			return fmt.Errorf("fusebox_raft_tls_handshake_failures_total{direction=inbound} rose by %v, want ≥ 4", d)
		}
		return nil
	})
	checkUntouched(t, c, before)
	// Nothing was appended on the victim beyond what the leader itself
	// replicated: its log ends where the leader's does, in the same term
	// (a rogue entry would sit at term+100 and out-rank the leader's).
	testwait.ForErr(t, 10*time.Second, "the victim's log to end where the leader's does", func() error {
		l, err := c.Leader()
		if err != nil {
			return err
		}
		li, err := l.Client().Raft(context.Background())
		if err != nil {
			return err
		}
		vi, err := victim.Client().Raft(context.Background())
		if err != nil {
			return err
		}
		if vi.LastIndex != li.LastIndex || vi.Term != li.Term {
			return fmt.Errorf("victim last index %d term %d, leader %d term %d", vi.LastIndex, vi.Term, li.LastIndex, li.Term)
		}
		return nil
	})

	// The HTTPS API: the same certificates are refused; the harness's
	// client certificate (the cluster's CA) is accepted.
	url := "https://" + victim.HTTPAddr() + "/v1/cluster/raft"
	for name, cert := range map[string]tls.Certificate{"another CA": otherCert, "expired": expiredCert} {
		cfg := pki.client.Clone()
		cfg.Certificates = nil
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil }
		hc := &http.Client{Timeout: apiTimeout, Transport: &http.Transport{TLSClientConfig: cfg}}
		resp, err := hc.Get(url)
		if err == nil {
			resp.Body.Close()
			t.Fatalf("HTTPS API with a client certificate from %s: HTTP %d, want a refused handshake", name, resp.StatusCode)
		}
		t.Logf("HTTPS API, client certificate from %s: refused: %v", name, err)
		hc.CloseIdleConnections()
	}
	// (GET /v1/cluster/raft needs the read role: the token, as always.)
	hc := &http.Client{Timeout: apiTimeout, Transport: localproc.Bearer{Token: victim.cfg.AdminToken, Next: &http.Transport{TLSClientConfig: pki.client}}}
	resp2, err := hc.Get(url)
	if err != nil {
		t.Fatalf("HTTPS API with the cluster CA's client certificate: %v", err)
	}
	resp2.Body.Close()
	hc.CloseIdleConnections()
	if resp2.StatusCode != http.StatusOK {
		t.Fatalf("HTTPS API with the cluster CA's client certificate: HTTP %d", resp2.StatusCode)
	}
	c.StopAll(t)
}
