package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// The node metrics the demo reads (docs/metrics.md).
const (
	metricQueueDepth         = "fusebox_queue_depth"
	metricBreakerRequests    = "fusebox_breaker_requests_total"
	metricBreakerTransitions = "fusebox_breaker_transitions_total"
	metricHealthChecks       = "fusebox_health_checks_total"
)

// maxMetricsBytes bounds what is read of one /metrics answer.
const maxMetricsBytes = 8 << 20

// sample is one series of a scrape: its labels and value.
type sample struct {
	Labels map[string]string
	Value  float64
}

// scrape maps a metric name to its series, for the names wanted only.
type scrape map[string][]sample

// sum adds the values of name's series whose labels include every pair of
// match.
func (s scrape) sum(name string, match map[string]string) float64 {
	var total float64
	for _, sm := range s[name] {
		ok := true
		for k, v := range match {
			if sm.Labels[k] != v {
				ok = false
				break
			}
		}
		if ok {
			total += sm.Value
		}
	}
	return total
}

// fetchMetrics GETs addr's /metrics and parses the wanted series.
func fetchMetrics(ctx context.Context, hc *http.Client, base string, want ...string) (scrape, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s/metrics: HTTP %d", base, resp.StatusCode)
	}
	return parseMetrics(io.LimitReader(resp.Body, maxMetricsBytes), want...)
}

// parseMetrics reads the Prometheus text format, keeping the series of the
// wanted metric names. Comments, other names and unparsable lines are
// skipped; a read error is returned.
func parseMetrics(r io.Reader, want ...string) (scrape, error) {
	wanted := make(map[string]bool, len(want))
	for _, w := range want {
		wanted[w] = true
	}
	out := scrape{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		name, rest := line, ""
		if i := strings.IndexAny(line, "{ \t"); i >= 0 {
			name, rest = line[:i], line[i:]
		}
		if !wanted[name] {
			continue
		}
		labels := map[string]string{}
		if strings.HasPrefix(rest, "{") {
			var ok bool
			if labels, rest, ok = parseLabels(rest[1:]); !ok {
				continue
			}
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			continue
		}
		out[name] = append(out[name], sample{Labels: labels, Value: v})
	}
	return out, sc.Err()
}

// parseLabels reads `k="v",k2="v2"}` (after the opening brace), unescaping
// \\, \" and \n in values; it returns what follows the closing brace.
func parseLabels(s string) (map[string]string, string, bool) {
	labels := map[string]string{}
	for {
		s = strings.TrimLeft(s, " ,")
		if strings.HasPrefix(s, "}") {
			return labels, s[1:], true
		}
		eq := strings.IndexByte(s, '=')
		if eq <= 0 || eq+1 >= len(s) || s[eq+1] != '"' {
			return nil, "", false
		}
		key := strings.TrimSpace(s[:eq])
		s = s[eq+2:]
		var b strings.Builder
		closed := false
		for i := 0; i < len(s); i++ {
			c := s[i]
			if c == '\\' && i+1 < len(s) {
				i++
				switch s[i] {
				case 'n':
					b.WriteByte('\n')
				default:
					b.WriteByte(s[i])
				}
				continue
			}
			if c == '"' {
				s, closed = s[i+1:], true
				break
			}
			b.WriteByte(c)
		}
		if !closed {
			return nil, "", false
		}
		labels[key] = b.String()
	}
}
