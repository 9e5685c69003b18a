package node

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"fusebox/api"
	"fusebox/dynconfig"
	"fusebox/internal/authtoken"
	"fusebox/internal/testwait"
)

// One token per role; the node token is what nodes present to each other.
var roleTokens = map[authtoken.Role]string{
	authtoken.RoleSubmit: "submit-0123456789abcdef0123456789abcdef",
	authtoken.RoleRead:   "read-0123456789abcdef0123456789abcdef00",
	authtoken.RoleNode:   "node-0123456789abcdef0123456789abcdef00",
	authtoken.RoleAdmin:  "admin-0123456789abcdef0123456789abcdef0",
}

// writeTokenFile writes a file with one token per role, named after it,
// and returns its path.
func writeTokenFile(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("# test tokens\n")
	for _, r := range []authtoken.Role{authtoken.RoleSubmit, authtoken.RoleRead, authtoken.RoleNode, authtoken.RoleAdmin} {
		b.WriteString(r.String() + "-caller " + r.String() + " " + roleTokens[r] + "\n")
	}
	path := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

var pathParam = regexp.MustCompile(`\{[^}]+\}`)

// requestFor turns a route pattern into a request line: the method (GET
// for a pattern without one) and a path with every wildcard filled in.
func requestFor(pattern string) (method, path string) {
	method, path, ok := strings.Cut(pattern, " ")
	if !ok {
		method, path = http.MethodGet, pattern
	}
	path = pathParam.ReplaceAllString(path, "x")
	if strings.HasSuffix(path, "/pprof/profile") || strings.HasSuffix(path, "/pprof/trace") {
		path += "?seconds=1"
	}
	return method, path
}

// TestRouteRoleMatrix calls every route of the node's route table — read
// from the table itself, so a new route is covered without editing this
// test — with no token, an unknown token and each role's token: 401 for
// the first two (unless the route is public), 403 for a role the route
// does not accept, and neither for a role it does.
func TestRouteRoleMatrix(t *testing.T) {
	file := writeTokenFile(t)
	c := newTestCluster(t, 1, func(cfg *Config) { cfg.AdminTokenFile = file; cfg.EnablePprof = true })
	n := c.nodes[0]
	routes := n.api.Routes()
	seen := map[string]bool{}
	for _, r := range routes {
		seen[r.Pattern] = true
	}
	for _, must := range []string{"POST /internal/v1/apply", "GET /metrics", "GET /healthz", "POST /v1/tasks", "GET /debug/pprof/", "/ui/", "/ui/api/", "POST /v1/nodes/{id}/drain"} {
		if !seen[must] {
			t.Fatalf("route table lacks %q: %v", must, routes)
		}
	}
	hc := &http.Client{Timeout: 20 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	call := func(method, path, token string) (int, http.Header, string) {
		req, err := http.NewRequest(method, "http://"+n.HTTPAddr()+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return resp.StatusCode, resp.Header, string(b)
	}
	type caller struct {
		name  string
		token string
		role  authtoken.Role // 0: no valid token
	}
	callers := []caller{{"no token", "", 0}, {"unknown token", "not-a-token-0123456789abcdef0123456789", 0}}
	for r, tok := range roleTokens {
		callers = append(callers, caller{r.String(), tok, r})
	}
	for _, rt := range routes {
		method, path := requestFor(rt.Pattern)
		for _, cl := range callers {
			t.Run(rt.Pattern+"/"+cl.name, func(t *testing.T) {
				code, hdr, body := call(method, path, cl.token)
				switch {
				case rt.Access.Public || cl.role != 0 && rt.Access.Allows(cl.role):
					if code == http.StatusUnauthorized || code == http.StatusForbidden {
						t.Fatalf("%s %s as %s: %d %s; want it allowed", method, path, cl.name, code, body)
					}
				case cl.role == 0:
					if code != http.StatusUnauthorized || !strings.HasPrefix(hdr.Get("WWW-Authenticate"), "Bearer") {
						t.Fatalf("%s %s as %s: %d (WWW-Authenticate %q) %s; want 401", method, path, cl.name, code, hdr.Get("WWW-Authenticate"), body)
					}
				default:
					if code != http.StatusForbidden || !strings.Contains(body, "needs a token with role "+rt.Access.Roles.String()) {
						t.Fatalf("%s %s as %s: %d %s; want 403 naming the roles", method, path, cl.name, code, body)
					}
				}
			})
		}
	}
}

// The config history records the token's name as the author, never the
// client's X-Fusebox-Author, including a write a follower forwards to the
// leader.
func TestAuthorIsTokenName(t *testing.T) {
	file := writeTokenFile(t)
	c := newTestCluster(t, 3, func(cfg *Config) { cfg.AdminTokenFile = file })
	leader := c.leader(c.nodes)
	follower := others(c.nodes, leader)[0]
	for i, nd := range []*testNode{follower, leader} {
		cl := api.NewClient(nd.HTTPAddr(), roleTokens[authtoken.RoleAdmin], nil)
		cl.Author = "mallory@forged"
		res, err := cl.ConfigSet(ctxT(t), dynconfig.KeyBreakerSettings, api.ConfigWrite{
			Destination: "ep-" + nd.cfg.NodeID, Value: json.RawMessage(`{"Timeout":"17s"}`),
		})
		if err != nil {
			t.Fatalf("write %d through %s: %v", i, nd.cfg.NodeID, err)
		}
		// Every node's history has the entry under the token's name.
		for _, reader := range c.nodes {
			rc := api.NewClient(reader.HTTPAddr(), roleTokens[authtoken.RoleRead], nil)
			testwait.For(t, 10*time.Second, reader.cfg.NodeID+" applying the write", func() bool {
				hist, err := rc.ConfigHistory(ctxT(t), 10)
				if err != nil {
					return false
				}
				for _, h := range hist {
					if h.Index == res.Index {
						if h.Author != "admin-caller" {
							t.Fatalf("author %q on %s for a write through %s; want the token's name", h.Author, reader.cfg.NodeID, nd.cfg.NodeID)
						}
						return true
					}
				}
				return false
			})
		}
	}
}

// Without tokens the author is "anonymous", whatever the client says.
func TestAuthorAnonymousWithoutTokens(t *testing.T) {
	c := newTestCluster(t, 1, nil)
	cl := c.nodes[0].client()
	cl.Author = "mallory@forged"
	res, err := cl.ConfigSet(ctxT(t), dynconfig.KeyBreakerSettings, api.ConfigWrite{Value: json.RawMessage(`{"Timeout":"17s"}`)})
	if err != nil {
		t.Fatal(err)
	}
	hist, err := cl.ConfigHistory(ctxT(t), 10)
	if err != nil || len(hist) == 0 || hist[0].Index != res.Index || hist[0].Author != api.AnonymousAuthor {
		t.Fatalf("history %+v, %v; want the write by %q", hist, err, api.AnonymousAuthor)
	}
}

// Tokens are reloaded while requests run: a token kept across the reload
// never fails, an added one starts working and a removed one stops.
func TestTokenReloadUnderLoad(t *testing.T) {
	file := writeTokenFile(t)
	c := newTestCluster(t, 1, func(cfg *Config) { cfg.AdminTokenFile = file })
	n := c.nodes[0]
	newTok := "late-0123456789abcdef0123456789abcdef00"
	keep := api.NewClient(n.HTTPAddr(), roleTokens[authtoken.RoleRead], nil)
	stop := make(chan struct{})
	errc := make(chan error, 1)
	var calls atomic.Int64
	go func() {
		defer close(errc)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := keep.Endpoints(ctxT(t)); err != nil {
				errc <- err
				return
			}
			calls.Add(1)
		}
	}()
	testwait.For(t, 10*time.Second, "calls running", func() bool { return calls.Load() > 10 })
	body, _ := os.ReadFile(file)
	rewritten := strings.Replace(string(body), "submit-caller submit "+roleTokens[authtoken.RoleSubmit]+"\n", "", 1) + "late read " + newTok + "\n"
	if err := os.WriteFile(file+".new", []byte(rewritten), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(file+".new", file); err != nil {
		t.Fatal(err)
	}
	if err := n.ReloadTokens(); err != nil {
		t.Fatal(err)
	}
	var apiErr *api.Error
	if _, err := api.NewClient(n.HTTPAddr(), newTok, nil).Endpoints(ctxT(t)); err != nil {
		t.Fatalf("added token: %v", err)
	}
	_, err := api.NewClient(n.HTTPAddr(), roleTokens[authtoken.RoleSubmit], nil).Task(ctxT(t), "x")
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusUnauthorized {
		t.Fatalf("removed token: %v; want 401", err)
	}
	// A bad file keeps what is in force.
	if err := os.WriteFile(file, []byte("broken line\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := n.ReloadTokens(); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Fatalf("bad file reload: %v", err)
	}
	if _, err := api.NewClient(n.HTTPAddr(), newTok, nil).Endpoints(ctxT(t)); err != nil {
		t.Fatalf("token lost to a bad file: %v", err)
	}
	close(stop)
	if err := <-errc; err != nil {
		t.Fatalf("a kept token failed during the reload: %v", err)
	}
	if calls.Load() <= 10 {
		t.Fatal("no calls ran during the reload")
	}
}
