package authtoken

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"fusebox/internal/filewatch"
)

// DefaultPollInterval is how often Watch looks at the file.
const DefaultPollInterval = 5 * time.Second

// Store holds the token set in force behind an atomic pointer: requests
// read it without locks, Reload swaps it whole. A Store built by Static has
// no file; its Reload is a no-op.
type Store struct {
	path string
	log  *slog.Logger
	cur  atomic.Pointer[Set]

	mu     sync.Mutex        // serialises Reload
	digest [sha256.Size]byte // of the file in force
	bad    [sha256.Size]byte // of the last file that did not parse

	reloads *prometheus.CounterVec
	tokens  *prometheus.GaugeVec

	pollMu sync.Mutex
	poller *filewatch.Poller
	closed bool
}

// Static is a Store over a fixed set (nil: no tokens, authorisation off).
func Static(s *Set) *Store {
	st := &Store{log: slog.New(slog.DiscardHandler)}
	st.cur.Store(s)
	return st
}

// Load reads and parses path; the error names the file and the line. reg
// may be nil; logger may be nil.
func Load(path string, reg prometheus.Registerer, logger *slog.Logger) (*Store, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	st := &Store{path: path, log: logger}
	st.reloads = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fusebox_auth_token_reloads_total",
		Help: "Reloads of the --admin-token-file by result (ok, error: the previous tokens stay in force).",
	}, []string{"result"})
	st.tokens = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "fusebox_auth_tokens",
		Help: "API tokens in force by role.",
	}, []string{"role"})
	if reg != nil {
		if err := reg.Register(st.reloads); err != nil {
			return nil, fmt.Errorf("authtoken metrics: %w", err)
		}
		if err := reg.Register(st.tokens); err != nil {
			return nil, fmt.Errorf("authtoken metrics: %w", err)
		}
	}
	if err := st.Reload(); err != nil {
		return nil, err
	}
	return st, nil
}

// Set is the token set in force (nil: no tokens configured).
func (st *Store) Set() *Set {
	if st == nil {
		return nil
	}
	return st.cur.Load()
}

// Reload re-reads the file. A file that does not parse leaves the set in
// force untouched and returns the error; an unchanged file is a no-op.
// Safe to call concurrently (SIGHUP and the poller).
func (st *Store) Reload() error {
	if st == nil || st.path == "" {
		return nil
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	data, err := readFile(st.path)
	if err == nil {
		d := sha256.Sum256(data)
		if st.cur.Load() != nil && d == st.digest {
			return nil
		}
		var s *Set
		if s, err = Parse(data); err != nil {
			st.bad = d
		} else {
			st.digest = d
			st.cur.Store(s)
			st.count("ok")
			st.observe(s)
			for _, w := range s.Warnings() {
				st.log.Warn("token file: "+w, "file", st.path)
			}
			st.log.Info("API tokens loaded", "file", st.path, "tokens", s.Len())
			return nil
		}
	}
	st.count("error")
	err = fmt.Errorf("--admin-token-file %s: %w", st.path, err)
	if st.cur.Load() != nil {
		st.log.Error("token file not reloaded; the previous tokens stay in force", "err", err)
	}
	return err
}

func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
}

func (st *Store) count(result string) {
	if st.reloads != nil {
		st.reloads.WithLabelValues(result).Inc()
	}
}

func (st *Store) observe(s *Set) {
	if st.tokens == nil {
		return
	}
	for _, rn := range roleNames {
		n := 0
		for _, t := range s.tokens {
			if t.Role == rn.r {
				n++
			}
		}
		st.tokens.WithLabelValues(rn.name).Set(float64(n))
	}
}

// Watch starts one goroutine that reloads the file when its content
// changes, checked every interval (≤ 0: DefaultPollInterval). Close stops
// it. Calling Watch again, after Close, or on a Static store, does nothing.
func (st *Store) Watch(interval time.Duration) {
	if st.path == "" {
		return
	}
	if interval <= 0 {
		interval = DefaultPollInterval
	}
	st.pollMu.Lock()
	defer st.pollMu.Unlock()
	if st.closed || st.poller != nil {
		return
	}
	st.poller = filewatch.Start(interval, st.changed, func() {
		_ = st.Reload() // logs and counts; the old set stays on error
	})
}

// changed reports whether the file's content differs from what is in
// force (content, not mtime: editors and config managers differ on the
// latter). A file that cannot be read counts as changed so the error is
// reported by Reload; a bad file is reported once, not on every poll.
func (st *Store) changed() bool {
	data, err := readFile(st.path)
	if err != nil {
		return true
	}
	d := sha256.Sum256(data)
	st.mu.Lock()
	defer st.mu.Unlock()
	return !bytes.Equal(d[:], st.digest[:]) && !bytes.Equal(d[:], st.bad[:])
}

// Close stops the poller, if any, and waits for it. Idempotent.
func (st *Store) Close() {
	if st == nil {
		return
	}
	st.pollMu.Lock()
	st.closed = true
	p := st.poller
	st.pollMu.Unlock()
	p.Close()
}
