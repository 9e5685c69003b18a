package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"fusebox/api"
)

// sameShardMap is the shard invariant: every live node holds the same
// committed shard map (version, owner and epoch of every shard); every
// shard has an owner and that owner is a live node; and each live node's
// queue works on exactly the shards the map gives it
// (fusebox_queue_owned_shards), so no shard has two owners at work.
func (c *Cluster) sameShardMap() error {
	live := c.Live()
	liveNames := map[string]bool{}
	for _, p := range live {
		liveNames[p.Name()] = true
	}
	var ref api.ShardList
	var refNode string
	for _, p := range live {
		sl, err := p.Client().Shards(context.Background())
		if err != nil {
			return fmt.Errorf("%s: GET /v1/shards: %w", p.Name(), err)
		}
		if len(sl.Shards) != sl.NumShards || sl.NumShards == 0 {
			return fmt.Errorf("%s: %d shards listed, num_shards %d", p.Name(), len(sl.Shards), sl.NumShards)
		}
		if refNode == "" {
			ref, refNode = sl, p.Name()
			for _, s := range sl.Shards {
				if !liveNames[s.Owner] {
					return fmt.Errorf("%s: shard %d owned by %q, not a live node (map %s)", p.Name(), s.Shard, s.Owner, shardSummary(p))
				}
			}
		} else if d := diffShardMaps(ref, sl); d != "" {
			return fmt.Errorf("%s and %s disagree on the shard map: %s", refNode, p.Name(), d)
		}
	}
	for _, p := range live {
		want := 0
		for _, s := range ref.Shards {
			if s.Owner == p.Name() {
				want++
			}
		}
		m, err := scrapeMetrics(p)
		if err != nil {
			return err
		}
		if got, ok := m["fusebox_queue_owned_shards"]; !ok || int(got) != want {
			return fmt.Errorf("%s works on %v shards (fusebox_queue_owned_shards), the map gives it %d", p.Name(), got, want)
		}
	}
	return nil
}

// diffShardMaps describes the first difference between two shard maps.
func diffShardMaps(a, b api.ShardList) string {
	if a.Version != b.Version {
		return fmt.Sprintf("version %d vs %d", a.Version, b.Version)
	}
	if len(a.Shards) != len(b.Shards) {
		return fmt.Sprintf("%d vs %d shards", len(a.Shards), len(b.Shards))
	}
	for i := range a.Shards {
		x, y := a.Shards[i], b.Shards[i]
		if x.Shard != y.Shard || x.Owner != y.Owner || x.Epoch != y.Epoch {
			return fmt.Sprintf("shard %d: %s@%d vs shard %d: %s@%d", x.Shard, x.Owner, x.Epoch, y.Shard, y.Owner, y.Epoch)
		}
	}
	return ""
}

// shardMap is GET /v1/shards on p as shard → assignment.
func shardMap(p *Process) (map[int]api.Shard, uint64, error) {
	sl, err := p.Client().Shards(context.Background())
	if err != nil {
		return nil, 0, fmt.Errorf("%s: GET /v1/shards: %w", p.Name(), err)
	}
	out := make(map[int]api.Shard, len(sl.Shards))
	for _, s := range sl.Shards {
		out[s.Shard] = s
	}
	return out, sl.Version, nil
}

// scrapeMetrics reads p's /metrics into series → value, the series keyed
// exactly as exposed (name{label="v",…}).
func scrapeMetrics(p *Process) (map[string]float64, error) {
	resp, err := p.hc.Get(p.baseURL() + "/metrics")
	if err != nil {
		return nil, fmt.Errorf("%s: GET /metrics: %w", p.Name(), err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: GET /metrics: HTTP %d", p.Name(), resp.StatusCode)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		out[line[:i]] = v
	}
	return out, sc.Err()
}

// metricSum adds the series of name whose labels contain every one of
// labels (each `k="v"`).
func metricSum(m map[string]float64, name string, labels ...string) float64 {
	sum := 0.0
	for k, v := range m {
		rest, ok := strings.CutPrefix(k, name)
		if !ok || (rest != "" && rest[0] != '{') {
			continue
		}
		match := true
		for _, l := range labels {
			if !strings.Contains(rest, l) {
				match = false
				break
			}
		}
		if match {
			sum += v
		}
	}
	return sum
}

// queueFigures renders a node's queue counters for a log line.
func queueFigures(p *Process) string {
	m, err := scrapeMetrics(p)
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("%s: completion writes ok %v refused %v error %v; duplicates in_flight %v unacked %v; results released %v; owned shards %v",
		p.Name(),
		metricSum(m, "fusebox_queue_completion_writes_total", `result="ok"`),
		metricSum(m, "fusebox_queue_completion_writes_total", `result="refused"`),
		metricSum(m, "fusebox_queue_completion_writes_total", `result="error"`),
		metricSum(m, "fusebox_queue_abandoned_calls_total", `reason="in_flight"`),
		metricSum(m, "fusebox_queue_abandoned_calls_total", `reason="unacked"`),
		metricSum(m, "fusebox_queue_task_results_total", `outcome="released"`),
		m["fusebox_queue_owned_shards"])
}
