package deploy_test

import (
	"context"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// dockerfile is the root Dockerfile as instructions (comments dropped,
// continuation lines joined).
func dockerfile(t *testing.T) []string {
	t.Helper()
	var out []string
	cur := ""
	for _, l := range strings.Split(readFile(t, "Dockerfile"), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		if s, ok := strings.CutSuffix(l, `\`); ok {
			cur += s + " "
			continue
		}
		out = append(out, cur+l)
		cur = ""
	}
	return out
}

// TestDockerfileStatic checks what the image promises without building it:
// a golang:1.26 build stage, a static binary of ./cmd/node, a pinned
// minimal base, a non-root user and `fusebox serve` as the entrypoint.
func TestDockerfileStatic(t *testing.T) {
	ins := dockerfile(t)
	var froms []string
	var user, entry string
	build := false
	for _, in := range ins {
		kw, rest, _ := strings.Cut(in, " ")
		switch strings.ToUpper(kw) {
		case "FROM":
			froms = append(froms, strings.Fields(rest)[0])
		case "USER":
			user = strings.TrimSpace(rest)
		case "ENTRYPOINT":
			entry = strings.TrimSpace(rest)
		case "RUN":
			if strings.Contains(rest, "go build") {
				build = strings.Contains(rest, "CGO_ENABLED=0") && strings.Contains(rest, "./cmd/node")
			}
		}
	}
	if len(froms) < 2 {
		t.Fatalf("FROM %v: want a multi-stage build (a Go build stage and a minimal final stage)", froms)
	}
	if !strings.HasPrefix(froms[0], "golang:1.26") {
		t.Errorf("build stage FROM %s, want golang:1.26", froms[0])
	}
	tagged := regexp.MustCompile(`^[^:@]+(:[A-Za-z0-9._-]+|@sha256:[0-9a-f]{64})$`)
	for _, f := range froms {
		if !tagged.MatchString(f) || strings.HasSuffix(f, ":latest") {
			t.Errorf("FROM %s: pin every base image by a tag other than latest (or a digest)", f)
		}
	}
	final := froms[len(froms)-1]
	if !strings.HasPrefix(final, "gcr.io/distroless/static") && !strings.HasPrefix(final, "scratch") {
		t.Errorf("final stage FROM %s, want distroless static or scratch", final)
	}
	if !build {
		t.Error("no `CGO_ENABLED=0 … go build … ./cmd/node` step: the binary must be static")
	}
	if user != "65532:65532" && user != "65532" {
		t.Errorf("USER %q, want 65532 (non-root; the Kubernetes manifest's runAsUser)", user)
	}
	if !regexp.MustCompile(`^\["[^"]*/fusebox",\s*"serve"\]$`).MatchString(entry) {
		t.Errorf("ENTRYPOINT %s, want [\".../fusebox\", \"serve\"]", entry)
	}
	if m := readFile(t, "deploy/kubernetes/fusebox.yaml"); !strings.Contains(m, "image: fusebox:latest") {
		t.Error("deploy/kubernetes/fusebox.yaml does not name the image built from the Dockerfile (fusebox:latest)")
	}
}

// TestDockerImageBuilds builds the image with docker or podman when one is
// installed and its daemon answers, then runs `--help` in it.
func TestDockerImageBuilds(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: not building the image")
	}
	var tool string
	for _, c := range []string{"docker", "podman"} {
		if p, err := exec.LookPath(c); err == nil && exec.Command(p, "info").Run() == nil {
			tool = p
			break
		}
	}
	if tool == "" {
		t.Skip("no container builder: neither docker nor podman is in PATH with a working daemon")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	tag := "fusebox-test:deploy"
	if out, err := exec.CommandContext(ctx, tool, "build", "-t", tag, root).CombinedOutput(); err != nil {
		t.Fatalf("%s build: %v\n%s", tool, err, out)
	}
	defer exec.Command(tool, "rmi", "-f", tag).Run()
	out, err := exec.CommandContext(ctx, tool, "run", "--rm", tag, "--help").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--advertise-http-addr") {
		t.Fatalf("%s run %s --help: %v\n%s", tool, tag, err, out)
	}
	uid, err := exec.CommandContext(ctx, tool, "image", "inspect", "-f", "{{.Config.User}}", tag).Output()
	if err != nil || !strings.HasPrefix(strings.TrimSpace(string(uid)), "65532") {
		t.Fatalf("image user %q, %v: want 65532", uid, err)
	}
}
