package main

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"fusebox/api"
	"fusebox/breakerpool"
	"fusebox/node"
)

// TestAdminDebugBundle collects a bundle from a real node that holds a
// task with an Authorization header and a callback URL with ?sig=, untars
// it, checks its parts and that neither secret is anywhere in it.
func TestAdminDebugBundle(t *testing.T) {
	h := newAdminNode(t, 4)
	const hdrSecret, sigSecret = "hdr-secret-77aa01", "sig-secret-c0ffee"
	dest := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(503) }))
	t.Cleanup(dest.Close)
	apic := api.NewClient(h.n.HTTPAddr(), "", nil)
	if _, err := apic.SubmitTask(h.ctx, api.TaskSubmit{NamespaceID: "ns", WorkflowID: "wf", TaskGroup: breakerpool.TaskGroupCallback,
		Destination: dest.URL + "/cb?sig=" + sigSecret,
		Request: api.TaskRequest{Body: []byte("x"), ContentType: "text/plain",
			Header: map[string]string{"Authorization": "Bearer " + hdrSecret}}}); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "bundle.tar.gz")
	// A file already there with a loose mode is replaced by one of mode
	// 0600, not rewritten in place keeping its mode.
	if err := os.WriteFile(out, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(out, 0o644); err != nil {
		t.Fatal(err)
	}
	h.mustRun("wrote "+out, "debug", "--duration", "1s", "--output", out)

	files := untar(t, out)
	for _, want := range []string{"manifest.json", "n1/members.json", "n1/raft.json", "n1/breakers.json", "n1/config.json",
		"n1/shards.json", "n1/metrics-1.prom", "n1/metrics-3.prom", "n1/logs.jsonl", "n1/profiles-skipped.txt"} {
		if _, ok := files["fusebox-debug/"+want]; !ok {
			t.Errorf("bundle lacks %s; has %v", want, keys(files))
		}
	}
	if !strings.Contains(files["fusebox-debug/n1/metrics-1.prom"], "fusebox_") {
		t.Error("metrics sample has no fusebox_ series")
	}
	for name, body := range files {
		for _, s := range []string{hdrSecret, sigSecret} {
			if strings.Contains(body, s) {
				t.Errorf("%s contains the secret %q", name, s)
			}
		}
	}
	if st, err := os.Stat(out); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("bundle mode %v, %v; want 0600", st.Mode(), err)
	}

	// Bad usage exits 2 and names the flag.
	_, err := h.run("debug", "--duration", "1s")
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != 2 || !strings.Contains(ee.msg, "--output") {
		t.Fatalf("without --output: %v; want exit 2 naming --output", err)
	}
	if _, err := h.run("debug", "--output", out, "--node", "nope"); !errors.As(err, &ee) || ee.code != 3 {
		t.Fatalf("--node nope: %v; want exit 3", err)
	}
}

func untar(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	out := map[string]string{}
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		out[hdr.Name] = string(b)
	}
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestAdminDebugBundleProfiles: a node with --enable-pprof gives a CPU
// profile over the duration, a heap profile and the goroutine stacks.
func TestAdminDebugBundleProfiles(t *testing.T) {
	dir := t.TempDir()
	h := newAdminNodeWith(t, func(c *node.Config) { c.NodeID, c.EnablePprof = "p1", true })
	out := filepath.Join(dir, "b.tar.gz")
	h.mustRun("wrote", "debug", "--duration", "1s", "--output", out)
	files := untar(t, out)
	for _, want := range []string{"profile.pprof", "heap.pprof", "goroutine.txt"} {
		if len(files["fusebox-debug/p1/"+want]) == 0 {
			t.Errorf("bundle lacks a non-empty %s; has %v", want, keys(files))
		}
	}
	if _, ok := files["fusebox-debug/p1/profiles-skipped.txt"]; ok {
		t.Error("profiles-skipped.txt with pprof on")
	}
	if !strings.Contains(files["fusebox-debug/p1/goroutine.txt"], "goroutine ") {
		t.Error("goroutine.txt holds no stacks")
	}
}

// TestAdminDebugEveryMemberItsOwnDeadline: on three nodes every member's
// parts are collected, each member within its own --timeout + --duration
// (one deadline shared by all, members collected one after another, ran
// out during the third and still reported success). A member that does
// not answer: each failed part says so on stderr, the bundle is written
// with <part>.error files, and the command exits 7 naming them.
func TestAdminDebugEveryMemberItsOwnDeadline(t *testing.T) {
	c := newAdminCluster(t, 3, nil)
	h := c[0]
	out := filepath.Join(t.TempDir(), "all.tar.gz")
	// Each member takes --duration (2 s); one after another, the three took
	// 6 s, past a shared deadline of 2 s + 2 s.
	text := h.mustRun("wrote "+out+" (3 nodes)", "debug", "--duration", "2s", "--timeout", "2s", "--output", out)
	files := untar(t, out)
	for _, id := range []string{"n1", "n2", "n3"} {
		for _, part := range []string{"members.json", "raft.json", "metrics-1.prom", "metrics-3.prom", "logs.jsonl"} {
			if _, ok := files["fusebox-debug/"+id+"/"+part]; !ok {
				t.Errorf("bundle lacks %s/%s", id, part)
			}
		}
	}
	for name, body := range files {
		if strings.HasSuffix(name, ".error") {
			t.Errorf("%s: %s", name, body)
		}
	}
	if strings.Contains(text, "failed") {
		t.Errorf("progress reports a failure:\n%s", text)
	}

	// n3 stops; it stays listed (left, or alive until gossip notices), and
	// --node asks for it whatever its state.
	cctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c[2].n.Close(cctx); err != nil {
		t.Fatal(err)
	}
	gone := filepath.Join(t.TempDir(), "n3.tar.gz")
	text, err := h.run("debug", "--node", "n3", "--duration", "1s", "--timeout", "2s", "--output", gone)
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != 7 || !strings.Contains(ee.msg, "n3/members") || !strings.Contains(ee.msg, "n3/metrics-3.prom") {
		t.Fatalf("debug of a stopped member: %v\n%s\nwant exit 7 naming the failed parts", err, text)
	}
	for _, want := range []string{"debug: n3: members failed:", "debug: n3: metrics sample 3/3 failed:", "wrote " + gone} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	if _, ok := untar(t, gone)["fusebox-debug/n3/members.error"]; !ok {
		t.Error("the bundle of a stopped member lacks n3/members.error")
	}
}
