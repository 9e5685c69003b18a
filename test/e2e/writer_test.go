package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"fusebox/api"
	"fusebox/internal/testwait"
)

// keyRPS is the config key the write load sets, one value per destination
// constraint ep-<i>, so every write leaves its own, checkable entry.
const keyRPS = "history.outboundQueue.hostScheduler.maxTaskRPS"

// keyBreaker is the breaker settings key (scenario 6).
const keyBreaker = "history.outboundQueue.circuitBreakerSettings"

// writeTimeout bounds one logical write across all its retries.
const writeTimeout = 20 * time.Second

// Writer sends a stream of replicated writes round-robin through the live
// nodes of a cluster, retrying on 503 and connection errors, and records
// which writes were acknowledged. Write i puts endpoint ep-<i> and sets
// keyRPS for destination ep-<i> to i+1; both are idempotent, so retrying an
// ambiguous attempt is safe.
type Writer struct {
	c      *Cluster
	prefix string
	url    string

	mu        sync.Mutex
	next      int
	rr        int
	acked     map[int]bool
	attempted map[int]bool
	failed    int
	retries   int
	lastErr   error

	stop chan struct{}
	done chan struct{}
}

// NewWriter prepares a writer whose endpoints point at url.
func NewWriter(c *Cluster, prefix, url string) *Writer {
	return &Writer{c: c, prefix: prefix, url: url, acked: map[int]bool{}, attempted: map[int]bool{}}
}

// Run writes in the background, pausing interval between writes, until
// Stop. One goroutine, owned by the Writer; Stop is its handshake.
func (w *Writer) Run(interval time.Duration) {
	w.stop, w.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(w.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-w.stop:
				return
			default:
			}
			w.WriteOne(w.stop)
			select {
			case <-w.stop:
				return
			case <-t.C:
			}
		}
	}()
}

// Stop ends Run and waits for the in-flight write to finish.
func (w *Writer) Stop() {
	if w.stop == nil {
		return
	}
	close(w.stop)
	<-w.done
	w.stop = nil
}

// WriteOne performs the next write, retrying through the live nodes until
// it is acknowledged, refused for good, writeTimeout passes or stop closes.
// It reports whether the write was acknowledged.
func (w *Writer) WriteOne(stop <-chan struct{}) bool {
	w.mu.Lock()
	i := w.next
	w.next++
	w.mu.Unlock()
	name := w.name(i)
	deadline := time.Now().Add(writeTimeout)
	backoff := 20 * time.Millisecond
	for {
		live := w.c.Live()
		var err error
		if len(live) == 0 {
			err = errors.New("no live node")
		} else {
			w.mu.Lock()
			p := live[w.rr%len(live)]
			w.rr++
			w.attempted[i] = true
			w.mu.Unlock()
			err = w.put(p.Client(), i, name)
		}
		if err == nil {
			w.mu.Lock()
			w.acked[i] = true
			w.mu.Unlock()
			return true
		}
		w.mu.Lock()
		w.lastErr = err
		w.mu.Unlock()
		if !retryable(err) || time.Now().After(deadline) {
			w.mu.Lock()
			w.failed++
			w.mu.Unlock()
			return false
		}
		w.mu.Lock()
		w.retries++
		w.mu.Unlock()
		select {
		case <-stop:
			w.mu.Lock()
			w.failed++
			w.mu.Unlock()
			return false
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 500*time.Millisecond)
	}
}

// put writes the endpoint, then the config value; both must succeed. A
// retry redoes both (idempotent).
func (w *Writer) put(cl *api.Client, i int, name string) error {
	ctx := context.Background()
	if _, err := cl.PutEndpoint(ctx, api.Endpoint{Name: name, URL: w.url, Description: "e2e write " + strconv.Itoa(i)}); err != nil {
		return fmt.Errorf("put endpoint %s: %w", name, err)
	}
	if _, err := cl.ConfigSet(ctx, keyRPS, api.ConfigWrite{Destination: name, Value: rpsValue(i)}); err != nil {
		return fmt.Errorf("set %s for %s: %w", keyRPS, name, err)
	}
	return nil
}

func rpsValue(i int) json.RawMessage { return json.RawMessage(strconv.Itoa(i + 1)) }

func (w *Writer) name(i int) string { return fmt.Sprintf("%s%d", w.prefix, i) }

// retryable: no leader, not leader, unavailable, overloaded, or a transport
// error (refused, reset, timeout — the node may be dead or paused).
func retryable(err error) bool {
	var e *api.Error
	if errors.As(err, &e) {
		return e.Status == http.StatusServiceUnavailable || e.Status == http.StatusTooManyRequests ||
			e.Status == http.StatusGatewayTimeout || e.Status == http.StatusBadGateway
	}
	return true
}

// WriterStats are a writer's figures.
type WriterStats struct {
	Attempted, Acked, Failed, Retries int
	LastErr                           error
}

func (s WriterStats) String() string {
	return fmt.Sprintf("attempted %d, acknowledged %d, not acknowledged %d, retries %d", s.Attempted, s.Acked, s.Failed, s.Retries)
}

// Stats returns the figures so far.
func (w *Writer) Stats() WriterStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	return WriterStats{Attempted: len(w.attempted), Acked: len(w.acked), Failed: w.failed, Retries: w.retries, LastErr: w.lastErr}
}

// Acked returns how many writes were acknowledged.
func (w *Writer) Acked() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.acked)
}

// Verify checks one node: every acknowledged write is present with its
// value, and nothing of this writer's is present that was never attempted.
// It returns how many acknowledged writes are missing, and an error
// describing the first problems.
func (w *Writer) Verify(p *Process) (missing int, err error) {
	ctx := context.Background()
	cl := p.Client()
	eps, err := cl.Endpoints(ctx)
	if err != nil {
		return -1, fmt.Errorf("%s: endpoints: %w", p.Name(), err)
	}
	cfg, err := cl.ConfigGet(ctx, keyRPS)
	if err != nil {
		return -1, fmt.Errorf("%s: config %s: %w", p.Name(), keyRPS, err)
	}
	haveEP := map[string]bool{}
	for _, e := range eps {
		if strings.HasPrefix(e.Name, w.prefix) {
			if e.URL != w.url {
				return -1, fmt.Errorf("%s: endpoint %s has url %q, want %q", p.Name(), e.Name, e.URL, w.url)
			}
			haveEP[e.Name] = true
		}
	}
	haveCfg := map[string]string{}
	for _, e := range cfg {
		if strings.HasPrefix(e.Destination, w.prefix) {
			haveCfg[e.Destination] = compactValue(e.Value)
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	var problems []string
	for i := range w.acked {
		n := w.name(i)
		if !haveEP[n] {
			missing++
			problems = append(problems, "endpoint "+n+" missing")
		}
		if v, ok := haveCfg[n]; !ok {
			missing++
			problems = append(problems, "config for "+n+" missing")
		} else if v != string(rpsValue(i)) {
			problems = append(problems, fmt.Sprintf("config for %s = %s, want %s", n, v, rpsValue(i)))
		}
	}
	for n := range haveEP {
		if !w.attemptedName(n) {
			problems = append(problems, "endpoint "+n+" present but never written")
		}
	}
	for n := range haveCfg {
		if !w.attemptedName(n) {
			problems = append(problems, "config for "+n+" present but never written")
		}
	}
	if len(problems) > 0 {
		if len(problems) > 8 {
			problems = append(problems[:8], fmt.Sprintf("… %d more", len(problems)-8))
		}
		return missing, fmt.Errorf("%s: %s", p.Name(), strings.Join(problems, "; "))
	}
	return 0, nil
}

func (w *Writer) attemptedName(n string) bool {
	i, err := strconv.Atoi(strings.TrimPrefix(n, w.prefix))
	return err == nil && w.attempted[i]
}

// WaitVerified waits until every node in nodes holds every acknowledged
// write (and nothing never written).
func (w *Writer) WaitVerified(t testing.TB, timeout time.Duration, nodes []*Process) {
	t.Helper()
	err := testwait.Poll(timeout, func() error {
		for _, p := range nodes {
			if _, err := w.Verify(p); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("acknowledged writes not on every node after %v: %v", timeout, err)
	}
}
