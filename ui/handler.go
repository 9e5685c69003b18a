// Package ui is the node's status page at /ui/: members and Raft roles, the
// shard map, the cluster's breakers as a grid of keys × nodes, and a
// timeline of recent breaker transitions. The page is static (embedded
// HTML, one script, one stylesheet, no framework, no CDN) and is a client of
// the node's own JSON API; the endpoints it adds, the transitions timeline
// (GET /ui/api/transitions, from a Recorder) and the plots' history (GET
// /ui/api/history), are a separate handler (Handler.Data) that needs a token
// when the page's files (Handler.Page) do not.
package ui

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"fusebox/api"
)

// Prefix is where the page is mounted; Page and Data expect full request
// paths under it (and Page "/ui", which redirects to Prefix).
const Prefix = "/ui/"

// ContentSecurityPolicy is sent with every answer: everything from this
// origin only, no inline script or style, no framing, no forms.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

//go:embed assets/index.html assets/app.js assets/plots.js assets/app.css
var assetFS embed.FS

type asset struct {
	body  []byte
	ctype string
	etag  string
}

// assets are the embedded files by their name under Prefix, loaded once.
var assets = loadAssets()

func loadAssets() map[string]asset {
	types := map[string]string{
		"index.html": "text/html; charset=utf-8",
		"app.js":     "text/javascript; charset=utf-8",
		"plots.js":   "text/javascript; charset=utf-8",
		"app.css":    "text/css; charset=utf-8",
	}
	out := make(map[string]asset, len(types))
	for name, ctype := range types {
		b, err := assetFS.ReadFile("assets/" + name)
		if err != nil {
			panic("ui: embedded asset missing: " + err.Error()) // a build defect, not a runtime condition
		}
		sum := sha256.Sum256(b)
		out[name] = asset{body: b, ctype: ctype, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
	}
	return out
}

// Members is the gossip membership the cluster timeline is gathered from
// (api.Members satisfies it).
type Members interface {
	Members() []api.Member
}

// Deps are what the handler serves. Every field is optional: without a
// Recorder the timeline is empty; without Members and Peers the cluster
// timeline holds only this node's transitions.
type Deps struct {
	// NodeID is this node's id; its own timeline is read from Recorder
	// directly, never over HTTP.
	NodeID string
	// Recorder holds this node's recent breaker transitions.
	Recorder *Recorder
	// Members lists the nodes whose timelines are merged.
	Members Members
	// Peers reaches another node's API by its http_addr (the same function
	// the API uses for /v1/breakers?scope=cluster).
	Peers func(httpAddr string) *api.Client
	// History, optional, is this node's sampled calls and shard owners
	// (GET /ui/api/history); the node runs it.
	History *History
}

// Handler is the status page: its static files (Page) and its data
// endpoints (Data), two handlers so that each can be mounted with its own
// access. It starts no goroutines of its own: peer requests live only as
// long as the request that asked for them.
type Handler struct {
	deps Deps
	log  *slog.Logger
}

// New builds the handler; mount Page at "/ui/" and "/ui", and Data at
// "/ui/api/" behind the read role. A nil logger discards.
func New(deps Deps, logger *slog.Logger) *Handler {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Handler{deps: deps, log: logger}
}

// Page serves the page's embedded files under Prefix and redirects "/ui"
// to Prefix. It holds no data and is meant to be public: whatever the
// request's path, decoded or not ("/ui/api%2Ftransitions" decodes to a
// data path), it answers an embedded file by its name, the redirect, or
// 404 — never a data endpoint, and it never calls a peer.
func (h *Handler) Page() http.Handler { return http.HandlerFunc(h.servePage) }

// Data serves the page's data endpoints, GET /ui/api/transitions and GET
// /ui/api/history (full request paths). They show breaker keys and call
// counts, and ?scope=cluster asks every peer with this node's own token:
// mount Data only behind the read role, never on a public route.
func (h *Handler) Data() http.Handler { return http.HandlerFunc(h.serveData) }

// start sets the security headers every answer carries and refuses any
// method but GET and HEAD (the page is read-only); false means answered.
func start(w http.ResponseWriter, r *http.Request) bool {
	hdr := w.Header()
	hdr.Set("Content-Security-Policy", ContentSecurityPolicy)
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("X-Frame-Options", "DENY")
	hdr.Set("Referrer-Policy", "no-referrer")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		hdr.Set("Allow", "GET, HEAD")
		writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", "the status page is read-only: "+r.Method+" is not allowed")
		return false
	}
	return true
}

func (h *Handler) serveData(w http.ResponseWriter, r *http.Request) {
	if !start(w, r) {
		return
	}
	switch r.URL.Path {
	case Prefix + "api/transitions":
		h.serveTransitions(w, r)
	case Prefix + "api/history":
		h.serveHistory(w, r)
	default:
		writeError(w, http.StatusNotFound, "not_found", "no such endpoint: "+r.URL.Path)
	}
}

func (h *Handler) servePage(w http.ResponseWriter, r *http.Request) {
	if !start(w, r) {
		return
	}
	path := r.URL.Path
	if path == strings.TrimSuffix(Prefix, "/") {
		http.Redirect(w, r, Prefix, http.StatusMovedPermanently)
		return
	}
	name, ok := strings.CutPrefix(path, Prefix)
	if !ok {
		writeError(w, http.StatusNotFound, "not_found", "not under "+Prefix)
		return
	}
	if name == "" {
		name = "index.html"
	}
	a, ok := assets[name] // the embedded files only: no data lives here
	if !ok {
		writeError(w, http.StatusNotFound, "not_found", "no such file: "+Prefix+name)
		return
	}
	hdr := w.Header()
	hdr.Set("Content-Type", a.ctype)
	// Revalidate every time: names carry no content hash, and the ETag makes
	// a revalidation a 304 with no body.
	hdr.Set("Cache-Control", "no-cache")
	hdr.Set("ETag", a.etag)
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(a.body))
}
