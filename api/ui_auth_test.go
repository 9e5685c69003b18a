package api_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"fusebox/api"
	"fusebox/breakerpool"
	"fusebox/internal/authtoken"
	"fusebox/ui"
)

const (
	uiReadToken = "read-0123456789abcdef0123456789abcdef00"
	uiNodeToken = "node-0123456789abcdef0123456789abcdef00"
)

type uiMembers []api.Member

func (m uiMembers) Members() []api.Member { return m }

// The status page's data (/ui/api/transitions, /ui/api/history) is served
// only through the protected /ui/api/ route. A path whose %2F keeps it in
// one segment (/ui/api%2Ftransitions) is routed by the mux to the public
// /ui/ route, and decodes to a data path: it must get no data, and must
// not make the node ask its peers with its own token. With a read token the
// normal paths answer, the cluster scope reaches the peer with the node's
// token, and the page's files load without one.
func TestUIDataNeedsTokenWhateverTheEscaping(t *testing.T) {
	set, err := authtoken.Parse([]byte("r read " + uiReadToken + "\nn node " + uiNodeToken + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu       sync.Mutex
		peerAuth []string // the Authorization of each call the peer got
	)
	peer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		peerAuth = append(peerAuth, r.Header.Get("Authorization"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"scope":"local","transitions":[],"nodes":[]}`)
	}))
	defer peer.Close()
	peerCalls := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), peerAuth...)
	}

	rec, err := ui.NewRecorder(0)
	if err != nil {
		t.Fatal(err)
	}
	rec.Observe(breakerpool.Transition{
		Key:  breakerpool.Key{TaskGroup: breakerpool.TaskGroupCallback, NamespaceID: "ns", Destination: "https://secret-dest.example.com"},
		From: 0, To: 2, Source: breakerpool.SourceLocal, Generation: 1, OpenFor: time.Minute, At: time.Now(),
	})
	hc := &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second}
	defer hc.CloseIdleConnections()
	members := uiMembers{
		{ID: "n1", State: "alive"},
		{ID: "n2", HTTPAddr: peer.Listener.Addr().String(), State: "alive"},
	}
	page := ui.New(ui.Deps{NodeID: "n1", Recorder: rec, Members: members,
		Peers: func(addr string) *api.Client { return api.NewClient(addr, uiNodeToken, hc) }}, nil)
	hs := httptest.NewServer(api.New(api.Config{Tokens: authtoken.Static(set)}, api.Deps{UI: page}, nil).Handler())
	defer hs.Close()

	client := &http.Client{Timeout: 20 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	defer client.CloseIdleConnections()
	get := func(path, token string) (int, http.Header, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, hs.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, string(b)
	}

	for _, path := range []string{
		"/ui/api%2Ftransitions", "/ui/api%2ftransitions", "/ui/api%2Ftransitions?scope=cluster",
		"/ui/api%2ftransitions?scope=cluster", "/ui/api%2Fhistory", "/ui/api%2Fhistory?scope=cluster",
		"/ui/api/transitions", "/ui/api/transitions?scope=cluster", "/ui/api/history", "/ui/api/history?scope=cluster",
	} {
		code, hdr, body := get(path, "")
		if code != http.StatusUnauthorized && code != http.StatusNotFound {
			t.Errorf("GET %s without a token: %d %s; want 401 or 404", path, code, body)
		}
		if strings.Contains(body, "secret-dest") || strings.Contains(body, `"transitions"`) || strings.Contains(body, `"nodes"`) {
			t.Errorf("GET %s without a token answered data: %s", path, body)
		}
		if hdr.Get("Content-Security-Policy") == "" && code == http.StatusNotFound {
			t.Errorf("GET %s: 404 without the page's CSP", path)
		}
	}
	if calls := peerCalls(); len(calls) != 0 {
		t.Fatalf("anonymous requests made the node ask its peer %d times", len(calls))
	}

	// A read token: the normal paths answer, with the security headers.
	for _, path := range []string{"/ui/api/transitions", "/ui/api/history"} {
		code, hdr, body := get(path, uiReadToken)
		if code != http.StatusOK || !strings.HasPrefix(hdr.Get("Content-Type"), "application/json") {
			t.Errorf("GET %s with a read token: %d %s", path, code, body)
		}
		if hdr.Get("Content-Security-Policy") != ui.ContentSecurityPolicy || hdr.Get("X-Frame-Options") != "DENY" {
			t.Errorf("GET %s: security headers %v", path, hdr)
		}
	}
	if code, _, body := get("/ui/api/transitions", uiReadToken); code != http.StatusOK || !strings.Contains(body, "secret-dest.example.com") {
		t.Errorf("local transitions with a read token: %d %s", code, body)
	}
	if code, _, body := get("/ui/api/transitions?scope=cluster", uiReadToken); code != http.StatusOK || !strings.Contains(body, `"scope":"cluster"`) {
		t.Errorf("cluster transitions with a read token: %d %s", code, body)
	}
	if calls := peerCalls(); len(calls) != 1 || calls[0] != "Bearer "+uiNodeToken {
		t.Errorf("peer calls %q; want one with the node's token", calls)
	}
	// With the read token, the escaped path is still no data (the public
	// page handler answers it).
	if code, _, body := get("/ui/api%2Ftransitions", uiReadToken); code != http.StatusNotFound {
		t.Errorf("GET /ui/api%%2Ftransitions with a read token: %d %s; want 404", code, body)
	}

	// The page's files load without a token.
	for _, path := range []string{"/ui/", "/ui/app.js", "/ui/plots.js", "/ui/app.css"} {
		code, hdr, body := get(path, "")
		if code != http.StatusOK || hdr.Get("Content-Security-Policy") != ui.ContentSecurityPolicy || len(body) == 0 {
			t.Errorf("GET %s without a token: %d CSP %q", path, code, hdr.Get("Content-Security-Policy"))
		}
	}
	if code, hdr, _ := get("/ui", ""); code != http.StatusMovedPermanently || hdr.Get("Location") != "/ui/" {
		t.Errorf("GET /ui: %d Location %q; want 301 /ui/", code, hdr.Get("Location"))
	}
}
