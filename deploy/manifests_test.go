package deploy_test

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// unit is a parsed systemd unit: section → key → values in order.
type unit map[string]map[string][]string

func parseUnit(t *testing.T, text string) unit {
	t.Helper()
	u := unit{}
	section := ""
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		line := strings.TrimSpace(lines[i])
		for strings.HasSuffix(line, `\`) && i+1 < len(lines) {
			i++
			line = strings.TrimSuffix(line, `\`) + " " + strings.TrimSpace(lines[i])
		}
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = strings.Trim(line, "[]")
			u[section] = map[string][]string{}
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || section == "" {
				t.Fatalf("unit line %d: %q is not key=value inside a section", i+1, line)
			}
			u[section][k] = append(u[section][k], strings.Join(strings.Fields(v), " "))
		}
	}
	return u
}

func (u unit) get(section, key string) string {
	v := u[section][key]
	if len(v) == 0 {
		return ""
	}
	return v[len(v)-1]
}

// cliFlags returns --flag values from an argument list, accepting both
// "--flag value" and "--flag=value".
func cliFlags(t *testing.T, where string, args []string, valid map[string]bool) map[string]string {
	t.Helper()
	out := map[string]string{}
	for i := 0; i < len(args); i++ {
		a, ok := strings.CutPrefix(args[i], "--")
		if !ok {
			continue
		}
		name, val, hasVal := strings.Cut(a, "=")
		if !hasVal && i+1 < len(args) && !strings.HasPrefix(args[i+1], "--") {
			i++
			val = args[i]
		}
		if !valid[name] {
			t.Errorf("%s: --%s is not a flag of `fusebox serve`", where, name)
		}
		if _, dup := out[name]; dup {
			t.Errorf("%s: --%s given twice", where, name)
		}
		out[name] = val
	}
	return out
}

func TestSystemdUnit(t *testing.T) {
	flags := serveFlags(t)
	u := parseUnit(t, readFile(t, "deploy/systemd/fusebox.service"))
	for _, s := range []string{"Unit", "Service", "Install"} {
		if u[s] == nil {
			t.Fatalf("fusebox.service: no [%s] section", s)
		}
	}
	want := map[string]string{
		"Type": "simple", "User": "fusebox", "Group": "fusebox",
		"EnvironmentFile": "/etc/fusebox/fusebox.env",
		"Restart":         "on-failure", "KillSignal": "SIGTERM",
		"NoNewPrivileges": "yes", "ProtectSystem": "strict", "ProtectHome": "yes", "PrivateTmp": "yes",
		"CapabilityBoundingSet": "",
	}
	for k, v := range want {
		if _, ok := u["Service"][k]; !ok {
			t.Errorf("[Service] %s is not set (want %q)", k, v)
		} else if got := u.get("Service", k); got != v {
			t.Errorf("[Service] %s=%q, want %q", k, got, v)
		}
	}
	if n, err := strconv.Atoi(u.get("Service", "LimitNOFILE")); err != nil || n < 4096 {
		t.Errorf("[Service] LimitNOFILE=%q, want a number >= 4096", u.get("Service", "LimitNOFILE"))
	}
	if !strings.Contains(u.get("Unit", "After"), "network-online.target") {
		t.Errorf("[Unit] After must include network-online.target")
	}
	if u.get("Install", "WantedBy") != "multi-user.target" {
		t.Errorf("[Install] WantedBy=%q, want multi-user.target", u.get("Install", "WantedBy"))
	}

	exec := strings.Fields(u.get("Service", "ExecStart"))
	if len(exec) < 2 || !strings.HasPrefix(exec[0], "/") || exec[1] != "serve" {
		t.Fatalf("ExecStart=%q, want an absolute path to fusebox, then serve", u.get("Service", "ExecStart"))
	}
	cli := cliFlags(t, "ExecStart", exec[2:], flags)
	if dir := "/var/lib/" + u.get("Service", "StateDirectory"); cli["data-dir"] != dir {
		t.Errorf("ExecStart --data-dir %q, want the StateDirectory %s", cli["data-dir"], dir)
	}
	for _, f := range []string{"gossip-key-file", "admin-token-file"} {
		if !strings.HasPrefix(cli[f], "/etc/fusebox/") {
			t.Errorf("ExecStart --%s %q, want a file under /etc/fusebox", f, cli[f])
		}
	}
	requireSecure(t, "ExecStart", cli)
	shutdown, err := time.ParseDuration(cli["shutdown-timeout"])
	if err != nil {
		t.Fatalf("ExecStart --shutdown-timeout %q: %v (set it explicitly so TimeoutStopSec can be checked)", cli["shutdown-timeout"], err)
	}
	stop, err := time.ParseDuration(u.get("Service", "TimeoutStopSec"))
	if err != nil {
		t.Fatalf("TimeoutStopSec=%q: %v", u.get("Service", "TimeoutStopSec"), err)
	}
	if stop <= shutdown {
		t.Errorf("TimeoutStopSec %v must exceed --shutdown-timeout %v, or systemd kills the node mid-shutdown", stop, shutdown)
	}

	// The example environment file: FUSEBOX_<flag> variables only, none
	// shadowed by a flag on the command line (which would win).
	env := readFile(t, "deploy/systemd/fusebox.env")
	seen := 0
	for i, line := range strings.Split(env, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, _, ok := strings.Cut(line, "=")
		flag, isFusebox := envFlag(k)
		switch {
		case !ok:
			t.Errorf("fusebox.env line %d: %q is not NAME=value", i+1, line)
		case !isFusebox || !flags[flag]:
			t.Errorf("fusebox.env line %d: %s sets no `fusebox serve` flag", i+1, k)
		case cli[flag] != "":
			t.Errorf("fusebox.env line %d: %s is ignored, ExecStart passes --%s", i+1, k, flag)
		}
		seen++
	}
	if seen == 0 {
		t.Error("fusebox.env sets nothing")
	}
	if !strings.Contains(env, "FUSEBOX_NODE_ID=") {
		t.Error("fusebox.env must set FUSEBOX_NODE_ID")
	}
}

// k8sDoc is one document of the manifest, read textually.
type k8sDoc struct{ kind, name, text string }

var (
	kindRe = regexp.MustCompile(`(?m)^kind:\s*(\S+)`)
	nameRe = regexp.MustCompile(`(?m)^metadata:\n(?:\s+.*\n)*?\s{2}name:\s*(\S+)`)
)

func k8sDocs(t *testing.T) []k8sDoc {
	t.Helper()
	text := readFile(t, "deploy/kubernetes/fusebox.yaml")
	if strings.Contains(text, "\t") {
		t.Error("fusebox.yaml contains a tab; YAML indentation must be spaces")
	}
	var out []k8sDoc
	for _, d := range regexp.MustCompile(`(?m)^---\s*$`).Split(text, -1) {
		k := kindRe.FindStringSubmatch(d)
		if k == nil {
			continue
		}
		n := nameRe.FindStringSubmatch(d)
		if n == nil {
			t.Errorf("%s document has no metadata.name", k[1])
			continue
		}
		if !strings.Contains(d, "\napiVersion:") && !strings.HasPrefix(strings.TrimLeft(d, "\n"), "apiVersion:") {
			t.Errorf("%s/%s has no apiVersion", k[1], n[1])
		}
		out = append(out, k8sDoc{kind: k[1], name: n[1], text: d})
	}
	return out
}

// field returns the value of the first "key: value" line after the first
// line containing after ("" = from the start).
func field(text, after, key string) string {
	if after != "" {
		i := strings.Index(text, after)
		if i < 0 {
			return ""
		}
		text = text[i+len(after):]
	}
	m := regexp.MustCompile(`(?m)^\s*-?\s*` + regexp.QuoteMeta(key) + `:\s*(.*?)\s*$`).FindStringSubmatch(text)
	if m == nil {
		return ""
	}
	return strings.Trim(m[1], `"'`)
}

func TestKubernetesManifest(t *testing.T) {
	flags := serveFlags(t)
	docs := k8sDocs(t)
	byKind := map[string][]k8sDoc{}
	for _, d := range docs {
		byKind[d.kind] = append(byKind[d.kind], d)
	}
	for _, k := range []string{"StatefulSet", "Service", "PodDisruptionBudget", "Secret"} {
		if len(byKind[k]) == 0 {
			t.Fatalf("fusebox.yaml has no %s", k)
		}
	}
	sts := byKind["StatefulSet"][0].text

	replicas, err := strconv.Atoi(field(sts, "", "replicas"))
	if err != nil || replicas != 3 {
		t.Errorf("StatefulSet replicas %q, want 3", field(sts, "", "replicas"))
	}
	if got := field(sts, "", "podManagementPolicy"); got != "Parallel" {
		t.Errorf("podManagementPolicy %q, want Parallel (bootstrap-expect needs every pod started)", got)
	}

	// The headless Service that gives the pods their DNS names.
	svcName := field(sts, "", "serviceName")
	var headless string
	for _, s := range byKind["Service"] {
		if s.name == svcName {
			headless = s.text
		}
	}
	if headless == "" {
		t.Fatalf("no Service named %q (the StatefulSet's serviceName)", svcName)
	}
	if field(headless, "", "clusterIP") != "None" || field(headless, "", "publishNotReadyAddresses") != "true" {
		t.Errorf("Service %s must be headless (clusterIP: None) and publishNotReadyAddresses: true, or pods cannot join before they are ready", svcName)
	}

	// Container arguments: valid flags, seeds, bootstrap, paths.
	argsBlock := sts[strings.Index(sts, "args:"):]
	argsBlock = argsBlock[:strings.Index(argsBlock, "ports:")]
	var args []string
	for _, l := range strings.Split(argsBlock, "\n") {
		if a, ok := strings.CutPrefix(strings.TrimSpace(l), "- "); ok {
			args = append(args, a)
		}
	}
	if len(args) == 0 || !strings.HasPrefix(args[0], "--") {
		t.Fatalf("container args %q, want flags only (the image's entrypoint is `fusebox serve`)", args)
	}
	cli := cliFlags(t, "StatefulSet args", args, flags)
	if got := cli["bootstrap-expect"]; got != strconv.Itoa(replicas) {
		t.Errorf("--bootstrap-expect=%s, want the replica count %d", got, replicas)
	}
	_, gossipPort, _ := strings.Cut(cli["gossip-addr"], ":")
	join := strings.Split(cli["join"], ",")
	for i := range replicas {
		seed := fmt.Sprintf("%s-%d.%s:%s", byKind["StatefulSet"][0].name, i, svcName, gossipPort)
		found := false
		for _, j := range join {
			found = found || j == seed
		}
		if !found {
			t.Errorf("--join=%s does not list %s", cli["join"], seed)
		}
	}
	if field(sts, "name: data\n", "mountPath") != cli["data-dir"] {
		t.Errorf("--data-dir=%s is not where the data volume is mounted (%s)", cli["data-dir"], field(sts, "name: data\n", "mountPath"))
	}
	secretsDir := field(sts, "name: secrets\n", "mountPath")
	secret := byKind["Secret"][0]
	if field(sts, "secret:", "secretName") != secret.name {
		t.Errorf("secrets volume does not mount Secret %s", secret.name)
	}
	for _, f := range []string{"gossip-key-file", "admin-token-file"} {
		dir, file, _ := strings.Cut(strings.TrimPrefix(cli[f], secretsDir), "/")
		if !strings.HasPrefix(cli[f], secretsDir+"/") || dir != "" || !strings.Contains(secret.text, "\n  "+file+":") {
			t.Errorf("--%s=%s is not a key of Secret %s mounted at %s", f, cli[f], secret.name, secretsDir)
		}
	}

	// Node identity from the pod name, through the environment.
	if !regexp.MustCompile(`name: FUSEBOX_NODE_ID\n\s+valueFrom:\n\s+fieldRef:\n\s+fieldPath: metadata.name`).MatchString(sts) {
		t.Error("FUSEBOX_NODE_ID must come from metadata.name through the downward API")
	}
	for _, m := range regexp.MustCompile(`name: (FUSEBOX_[A-Z_]+)`).FindAllStringSubmatch(sts, -1) {
		if cliEnv[m[1]] {
			continue // read by `fusebox admin` (kubectl exec), not by serve
		}
		if f, _ := envFlag(m[1]); !flags[f] {
			t.Errorf("env %s sets no `fusebox serve` flag", m[1])
		} else if _, shadowed := cli[f]; shadowed {
			t.Errorf("env %s is ignored: args pass --%s", m[1], f)
		}
	}

	requireSecure(t, "StatefulSet args", cli)
	for _, probe := range []string{"readinessProbe:", "livenessProbe:"} {
		if got := field(sts, probe, "scheme"); got != "HTTPS" {
			t.Errorf("%s scheme %q, want HTTPS (the API serves HTTPS only with TLS)", probe, got)
		}
	}
	if got := field(sts, "readinessProbe:", "path"); got != "/readyz" {
		t.Errorf("readinessProbe path %q, want /readyz", got)
	}
	if got := field(sts, "livenessProbe:", "path"); got != "/healthz" {
		t.Errorf("livenessProbe path %q, want /healthz", got)
	}
	grace, err := strconv.Atoi(field(sts, "", "terminationGracePeriodSeconds"))
	shutdown, err2 := time.ParseDuration(cli["shutdown-timeout"])
	if err != nil || err2 != nil || time.Duration(grace)*time.Second <= shutdown {
		t.Errorf("terminationGracePeriodSeconds %q must exceed --shutdown-timeout %q", field(sts, "", "terminationGracePeriodSeconds"), cli["shutdown-timeout"])
	}
	if !strings.Contains(sts, "volumeClaimTemplates:") {
		t.Error("StatefulSet has no volumeClaimTemplates for --data-dir")
	}
	if got := field(byKind["PodDisruptionBudget"][0].text, "", "maxUnavailable"); got != "1" {
		t.Errorf("PodDisruptionBudget maxUnavailable %q, want 1", got)
	}
}

// cliEnv are the environment variables `fusebox admin` reads (the manifest
// sets them so that `kubectl exec … fusebox admin` reaches the pod's API).
var cliEnv = map[string]bool{
	"FUSEBOX_ADDR": true, "FUSEBOX_CACERT": true, "FUSEBOX_TOKEN": true, "FUSEBOX_TOKEN_FILE": true,
	"FUSEBOX_CLIENT_CERT": true, "FUSEBOX_CLIENT_KEY": true,
}

// requireSecure checks what `serve` itself enforces beyond loopback: a
// deployment template binds real addresses, so it must run with TLS, a
// gossip key and a token file, never --insecure.
func requireSecure(t *testing.T, where string, cli map[string]string) {
	t.Helper()
	for _, f := range []string{"tls-cert-file", "tls-key-file", "tls-ca-file", "gossip-key-file", "admin-token-file"} {
		if cli[f] == "" {
			t.Errorf("%s: --%s is not set; a node beyond loopback needs TLS, a gossip key and tokens (docs/security.md)", where, f)
		}
	}
	if _, ok := cli["insecure"]; ok {
		t.Errorf("%s: --insecure in a deployment template", where)
	}
}
