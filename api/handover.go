package api

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"fusebox/raftstore/state"
)

// ShardHandover is this node's queue as the leader's hand-over call uses it
// (node adapts *queue.Queue): before moving shards away from a live owner,
// the leader asks it to stop starting calls on them, let the calls under
// way end and write their results (queue/handover.go).
type ShardHandover interface {
	HandOver(ctx context.Context, shards map[int]uint64, hold time.Duration) []HandedOverShard
}

// HandOverRequest is POST /internal/v1/shards/handover: the shards (at the
// epochs the leader expects this node to hold them), how long to wait for
// their calls, and how long they stay held if no move comes.
type HandOverRequest struct {
	Shards []ShardEpoch `json:"shards"`
	WaitMS int64        `json:"wait_ms"`
	HoldMS int64        `json:"hold_ms"`
}

// ShardEpoch names one shard at one epoch.
type ShardEpoch struct {
	Shard int    `json:"shard"`
	Epoch uint64 `json:"epoch"`
}

// HandedOverShard is what the node did for one shard it worked on at the
// requested epoch. Unfinished counts calls still under way (UnderWay) and
// results not yet written when the wait ended.
//
// Results are the shard's results this node had not written when the wait
// ended (it cannot reach its task store): the leader, which reaches the
// store, writes them at Epoch before the move, so the next owner does not
// make those calls again (node/handover.go). Omitted when there are none,
// and by older builds.
type HandedOverShard struct {
	Shard      int                `json:"shard"`
	Epoch      uint64             `json:"epoch"`
	WaitedMS   int64              `json:"waited_ms"`
	Unfinished int                `json:"unfinished"`
	UnderWay   int                `json:"under_way,omitempty"`
	Results    []state.TaskResult `json:"results,omitempty"`
}

// HandOverAnswer lists the shards handed over; a shard this node did not
// work on at that epoch is left out.
type HandOverAnswer struct {
	Shards []HandedOverShard `json:"shards"`
}

// Bounds of a hand-over request.
const (
	maxHandOverShards = 1 << 16
	maxHandOverWait   = time.Minute
	maxHandOverHold   = 2 * time.Minute
)

// Validate checks the request, naming the bad field.
func (r *HandOverRequest) Validate() error {
	if len(r.Shards) == 0 {
		return BadField("shards", "required: at least one shard")
	}
	if len(r.Shards) > maxHandOverShards {
		return BadField("shards", "at most %d shards, got %d", maxHandOverShards, len(r.Shards))
	}
	seen := make(map[int]bool, len(r.Shards))
	for i, s := range r.Shards {
		if s.Shard < 0 {
			return BadField(fmt.Sprintf("shards[%d].shard", i), "must not be negative, got %d", s.Shard)
		}
		if seen[s.Shard] {
			return BadField(fmt.Sprintf("shards[%d].shard", i), "shard %d is listed twice", s.Shard)
		}
		seen[s.Shard] = true
	}
	if r.WaitMS < 0 || r.WaitMS > maxHandOverWait.Milliseconds() {
		return BadField("wait_ms", "must be 0–%d, got %d", maxHandOverWait.Milliseconds(), r.WaitMS)
	}
	if r.HoldMS < r.WaitMS || r.HoldMS > maxHandOverHold.Milliseconds() {
		return BadField("hold_ms", "must be wait_ms (%d) to %d, got %d", r.WaitMS, maxHandOverHold.Milliseconds(), r.HoldMS)
	}
	return nil
}

func (s *Server) handOverRoutes() {
	s.handle("POST /internal/v1/shards/handover", needNode, s.handOver)
}

func (s *Server) handOver(w http.ResponseWriter, r *http.Request) error {
	var in HandOverRequest
	if err := s.readJSON(w, r, &in); err != nil {
		return err
	}
	if err := in.Validate(); err != nil {
		return err
	}
	shards := make(map[int]uint64, len(in.Shards))
	for _, se := range in.Shards {
		shards[se.Shard] = se.Epoch
	}
	ctx, cancel := context.WithTimeout(r.Context(), time.Duration(in.WaitMS)*time.Millisecond)
	defer cancel()
	out := HandOverAnswer{Shards: s.deps.Handover.HandOver(ctx, shards, time.Duration(in.HoldMS)*time.Millisecond)}
	if out.Shards == nil {
		out.Shards = []HandedOverShard{}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// HandOver asks this client's node to hand shards over before a move
// (what the leader calls on a shard's live owner).
func (c *Client) HandOver(ctx context.Context, in HandOverRequest) (HandOverAnswer, error) {
	var out HandOverAnswer
	return out, c.Do(ctx, http.MethodPost, "/internal/v1/shards/handover", nil, in, &out)
}
