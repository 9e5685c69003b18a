package authtoken

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"fusebox/internal/testwait"
)

func writeFile(t *testing.T, path, body string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func TestStoreReloadKeepsOldSetOnBadFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	writeFile(t, path, "a admin "+tokA+"\n")
	reg := prometheus.NewRegistry()
	st, err := Load(path, reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	writeFile(t, path, "a admin "+tokA+"\nb wizard "+tokB+"\n")
	err = st.Reload()
	if err == nil || !strings.Contains(err.Error(), "line 2: role") || !strings.Contains(err.Error(), path) {
		t.Fatalf("reload of a bad file: %v; want the file, line and field named", err)
	}
	if _, ok := st.Set().Lookup(tokA); !ok {
		t.Fatal("the previous set was dropped by a bad reload")
	}
	writeFile(t, path, "b read "+tokB+"\n")
	if err := st.Reload(); err != nil {
		t.Fatal(err)
	}
	if _, ok := st.Set().Lookup(tokA); ok {
		t.Fatal("a removed token still works")
	}
	if got := testutil.ToFloat64(st.reloads.WithLabelValues("error")); got != 1 {
		t.Fatalf("error reloads = %v", got)
	}
	if got := testutil.ToFloat64(st.tokens.WithLabelValues("read")); got != 1 {
		t.Fatalf("read tokens = %v", got)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing"), nil, nil); err == nil || !strings.Contains(err.Error(), "--admin-token-file") {
		t.Fatalf("missing file: %v", err)
	}
}

func TestStoreWatchPicksUpChanges(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	writeFile(t, path, "a admin "+tokA+"\n")
	st, err := Load(path, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	st.Watch(10 * time.Millisecond)
	st.Watch(10 * time.Millisecond) // a second Watch starts nothing
	writeFile(t, path, "a admin "+tokA+"\nb submit "+tokB+"\n")
	testwait.For(t, 5*time.Second, "the poller to add b", func() bool { _, ok := st.Set().Lookup(tokB); return ok })
	writeFile(t, path, "garbage here\n")
	writeFile(t, path, "b submit "+tokB+"\n")
	testwait.For(t, 5*time.Second, "the poller to remove a", func() bool { _, ok := st.Set().Lookup(tokA); return !ok })
	if _, ok := st.Set().Lookup(tokB); !ok {
		t.Fatal("b lost")
	}
	st.Close()
	st.Close()
	Static(nil).Close()
	var nilStore *Store
	if nilStore.Set() != nil || nilStore.Reload() != nil {
		t.Fatal("a nil store is an empty one")
	}
}
