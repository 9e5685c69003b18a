package pgstore

import "testing"

// A node's pool is sized by Config.MaxConns, else the URL's
// pool_max_conns, else DefaultMaxConns — never pgxpool's own default,
// which grows with the node's CPUs.
func TestPoolSize(t *testing.T) {
	const base = "postgres://fusebox@127.0.0.1:5432/fusebox?sslmode=disable"
	cases := []struct {
		name     string
		url      string
		maxConns int32
		want     int32
	}{
		{"default", base, 0, DefaultMaxConns},
		{"URL parameter", base + "&pool_max_conns=7", 0, 7},
		{"URL parameter equal to pgxpool's default", base + "&pool_max_conns=4", 0, 4},
		{"Config over the URL", base + "&pool_max_conns=7", 5, 5},
		{"Config alone", base, 3, 3},
		{"keyword/value form", "host=127.0.0.1 dbname=fusebox sslmode=disable", 0, DefaultMaxConns},
		{"keyword/value form with the key", "host=127.0.0.1 dbname=fusebox pool_max_conns = 6", 0, 6},
		{"a password that spells the key", "postgres://u:pool_max_conns=9@127.0.0.1/fusebox", 0, DefaultMaxConns},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pc, err := poolConfig(Config{URL: c.url, MaxConns: c.maxConns})
			if err != nil {
				t.Fatal(err)
			}
			if pc.MaxConns != c.want {
				t.Errorf("MaxConns = %d, want %d", pc.MaxConns, c.want)
			}
		})
	}
	if _, err := poolConfig(Config{URL: base + "&pool_max_conns=x"}); err == nil {
		t.Error("pool_max_conns=x accepted")
	}
}

// FuzzPoolConfig: any connection string is parsed or refused, never a
// panic, and a parsed one's pool has at least one connection.
func FuzzPoolConfig(f *testing.F) {
	for _, s := range []string{
		"postgres://fusebox@127.0.0.1:5432/fusebox?sslmode=disable",
		"postgres://u:secret@h/db?pool_max_conns=3",
		"postgresql://h/db?pool_max_conns=",
		"host=h dbname=d pool_max_conns = 5",
		"pool_max_conns=0",
		"",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		pc, err := poolConfig(Config{URL: s})
		if err != nil {
			return
		}
		if pc.MaxConns < 1 {
			t.Fatalf("%q: MaxConns %d", s, pc.MaxConns)
		}
	})
}
