package cluster

import (
	"context"
	"encoding/base64"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"fusebox/internal/testwait"
)

func TestParseKeys(t *testing.T) {
	k16 := base64.StdEncoding.EncodeToString(make([]byte, 16))
	k32 := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("k", 32)))
	k24 := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("y", 24)))
	cases := []struct {
		name    string
		in      string
		want    int
		wantErr string
	}{
		{"one", k32 + "\n", 1, ""},
		{"comments and blanks", "# primary\n\n  " + k32 + "  \n# old\n" + k16 + "\n" + k24, 3, ""},
		{"empty", "\n# nothing\n", 0, "no keys"},
		{"not base64", k32 + "\nnot-base64!!\n", 0, "line 2"},
		{"bad length", "# c\n" + base64.StdEncoding.EncodeToString(make([]byte, 20)), 0, "line 2: key is 20 bytes"},
		{"duplicate", k32 + "\n" + k32, 0, "line 2: duplicate of the key on line 1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			keys, err := ParseKeys([]byte(c.in))
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err = %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil || len(keys) != c.want {
				t.Fatalf("got %d keys, err %v; want %d", len(keys), err, c.want)
			}
		})
	}
	keys, _ := ParseKeys([]byte("#x\n" + k32 + "\n" + k16))
	if string(keys[0]) != strings.Repeat("k", 32) {
		t.Error("first key in the file is not first (primary)")
	}
}

func TestLoadKeyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gossip.key")
	if err := os.WriteFile(path, []byte(base64.StdEncoding.EncodeToString(make([]byte, 32))+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	keys, err := LoadKeyFile(path)
	if err != nil || len(keys) != 1 || len(keys[0]) != 32 {
		t.Fatalf("LoadKeyFile = %v, %v", keys, err)
	}
	if _, err := LoadKeyFile(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("missing file accepted")
	}
}

func TestParseLogLine(t *testing.T) {
	cases := []struct {
		in    string
		level slog.Level
		msg   string
	}{
		{"[DEBUG] memberlist: Stream connection from=127.0.0.1:1", slog.LevelDebug, "Stream connection from=127.0.0.1:1"},
		{"[INFO] memberlist: Marking n2 as failed", slog.LevelInfo, "Marking n2 as failed"},
		{"[WARN] memberlist: Refuting a suspect message", slog.LevelWarn, "Refuting a suspect message"},
		{"[ERR] memberlist: Failed to send", slog.LevelError, "Failed to send"},
		{"[ERR] Failed to shutdown transport: x", slog.LevelError, "Failed to shutdown transport: x"},
		{"no level here", slog.LevelInfo, "no level here"},
	}
	for _, c := range cases {
		level, msg := parseLogLine(c.in)
		if level != c.level || msg != c.msg {
			t.Errorf("parseLogLine(%q) = %v %q, want %v %q", c.in, level, msg, c.level, c.msg)
		}
	}
}

func TestConfigValidation(t *testing.T) {
	ok := Config{NodeID: "a", BindAddr: "127.0.0.1:0"}
	cases := []struct {
		mod   func(*Config)
		field string
	}{
		{func(c *Config) { c.NodeID = "" }, "NodeID"},
		{func(c *Config) { c.NodeID = "a b" }, "NodeID"},
		{func(c *Config) { c.BindAddr = "" }, "BindAddr"},
		{func(c *Config) { c.BindAddr = "127.0.0.1" }, "BindAddr"},
		{func(c *Config) { c.BindAddr = "127.0.0.1:99999" }, "BindAddr"},
		{func(c *Config) { c.AdvertiseAddr = "x" }, "AdvertiseAddr"},
		{func(c *Config) { c.Join = []string{"127.0.0.1:1", "nope"} }, "Join[1]"},
		{func(c *Config) { c.Preset = "wan" }, "Preset"},
		{func(c *Config) { c.Keys = [][]byte{make([]byte, 7)} }, "Keys[0]"},
		{func(c *Config) { c.Label = strings.Repeat("l", 300) }, "Label"},
		{func(c *Config) { c.Meta.ID = "b" }, "Meta.ID"},
		{func(c *Config) { c.Meta.Version = strings.Repeat("v", 600) }, "Meta"},
		{func(c *Config) { c.LeaveTimeout = -1 }, "LeaveTimeout"},
	}
	for _, c := range cases {
		cfg := ok
		c.mod(&cfg)
		_, err := New(cfg, nil, nil)
		if err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("New error = %v, want one naming %s", err, c.field)
		}
	}
	if _, err := New(ok, nil, nil); err != nil {
		t.Errorf("valid config rejected: %v", err)
	}
}

// recordHandler keeps slog records.
type recordHandler struct {
	mu   *sync.Mutex
	recs *[]slog.Record
}

func (h recordHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h recordHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	*h.recs = append(*h.recs, r.Clone())
	return nil
}
func (h recordHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h recordHandler) WithGroup(string) slog.Handler      { return h }

func TestMemberlistLogsGoThroughSlog(t *testing.T) {
	var mu sync.Mutex
	var recs []slog.Record
	// A seed that accepts and drops every connection: memberlist logs
	// "[DEBUG] memberlist: failed to join 127.0.0.1:N: ..." for each try.
	port, release := reservePort(t)
	defer release()
	seed := fmt.Sprintf("127.0.0.1:%d", port)
	m, err := New(Config{NodeID: "logger", BindAddr: "127.0.0.1:0", Join: []string{seed}, Preset: PresetFast}, slog.New(recordHandler{&mu, &recs}), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	testwait.For(t, 10*time.Second, "memberlist's debug line through slog", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, r := range recs {
			if r.Level == slog.LevelDebug && strings.HasPrefix(r.Message, "failed to join "+seed) {
				return true
			}
		}
		return false
	})
}
