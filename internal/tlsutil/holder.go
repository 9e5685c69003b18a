package tlsutil

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"fusebox/internal/filewatch"
)

// DefaultPollInterval is how often a Holder's poller looks at its files.
const DefaultPollInterval = 3 * time.Second

// Holder keeps the current Material behind an atomic pointer: handshakes
// read it without a lock, Reload swaps it. A reload that fails keeps the
// old material, so a half-written file never takes a node off the air.
type Holder struct {
	files Files
	log   *slog.Logger
	cur   atomic.Pointer[Material]

	reloadMu sync.Mutex // one Reload at a time; guards stamps
	stamps   [3]fileStamp

	reloads *prometheus.CounterVec

	pollMu sync.Mutex
	poller *filewatch.Poller
	closed bool
}

type fileStamp struct {
	mod  time.Time
	size int64
}

// New loads the files (an error names the bad one) and registers the
// reload metrics on reg (nil: not registered). Start the file poller with
// Watch; Close stops it.
func New(f Files, reg prometheus.Registerer, logger *slog.Logger) (*Holder, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	h := &Holder{files: f, log: logger}
	h.stamps = h.stat()
	m, err := Load(f)
	if err != nil {
		return nil, err
	}
	h.cur.Store(m)
	h.reloads = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fusebox_tls_reloads_total",
		Help: "Reloads of the TLS certificate, key and CA files (SIGHUP or a file change), by result (ok, error). On error the old material stays in use.",
	}, []string{"result"})
	if reg != nil {
		cs := []prometheus.Collector{h.reloads, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "fusebox_tls_cert_not_after_timestamp_seconds",
			Help: "Expiry (Unix time) of the certificate this node presents; alert well before it passes.",
		}, func() float64 { return float64(h.Current().NotAfter().Unix()) })}
		for _, c := range cs {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("tlsutil: register metrics: %w", err)
			}
		}
	}
	return h, nil
}

// Files are the files the holder reloads from.
func (h *Holder) Files() Files { return h.files }

// Current is the material in use now.
func (h *Holder) Current() *Material { return h.cur.Load() }

// Reload re-reads the files. On success new handshakes use the new
// material at once (connections already open keep theirs); on error the
// old material stays and the error names the bad file.
func (h *Holder) Reload() error {
	h.reloadMu.Lock()
	defer h.reloadMu.Unlock()
	h.stamps = h.stat()
	m, err := Load(h.files)
	if err != nil {
		h.reloads.WithLabelValues("error").Inc()
		h.log.Error("TLS reload failed; keeping the certificate in use", "err", err,
			"serial", h.Current().Cert.Leaf.SerialNumber.String())
		return fmt.Errorf("tls reload: %w", err)
	}
	old := h.cur.Swap(m)
	h.reloads.WithLabelValues("ok").Inc()
	h.log.Info("TLS material reloaded", "serial", m.Cert.Leaf.SerialNumber.String(),
		"previous_serial", old.Cert.Leaf.SerialNumber.String(), "not_after", m.NotAfter(), "cas", len(m.CACerts))
	return nil
}

func (h *Holder) stat() [3]fileStamp {
	var s [3]fileStamp
	for i, p := range []string{h.files.CertFile, h.files.KeyFile, h.files.CAFile} {
		if st, err := os.Stat(p); err == nil {
			s[i] = fileStamp{mod: st.ModTime(), size: st.Size()}
		}
	}
	return s
}

// Watch starts the file poller: every interval (DefaultPollInterval when
// ≤ 0) it compares the files' modification time and size with the last
// load and reloads when one changed. A failed reload is logged and not
// retried until a file changes again. It runs until Close; calling Watch
// twice, or after Close, is an error.
func (h *Holder) Watch(interval time.Duration) error {
	if interval <= 0 {
		interval = DefaultPollInterval
	}
	h.pollMu.Lock()
	defer h.pollMu.Unlock()
	switch {
	case h.closed:
		return errors.New("tlsutil: Watch after Close")
	case h.poller != nil:
		return errors.New("tlsutil: Watch called twice")
	}
	h.poller = filewatch.Start(interval, h.changed, func() {
		h.log.Info("TLS files changed on disk; reloading")
		_ = h.Reload() // logged; the old material stays on error
	})
	return nil
}

func (h *Holder) changed() bool {
	h.reloadMu.Lock()
	defer h.reloadMu.Unlock()
	return h.stat() != h.stamps
}

// Close stops the poller and waits for it. Idempotent; the material stays
// usable (connections in flight keep working).
func (h *Holder) Close() error {
	h.pollMu.Lock()
	h.closed = true
	p := h.poller
	h.pollMu.Unlock()
	p.Close()
	return nil
}
