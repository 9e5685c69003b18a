package api

import (
	"time"

	"fusebox/breakerpool"
)

// BreakerConfirm is the confirm hint policy's latest round for a breaker
// key on one node (hintpolicy/DESIGN.md, "Confirm"): whether its open state
// came from a confirmed hint, or a peer's failure report was refuted.
type BreakerConfirm struct {
	// Outcome is pending, confirmed, refuted or gave_up.
	Outcome string `json:"outcome"`
	// Accused is the node whose failure report started the round.
	Accused string `json:"accused"`
	// Designated is the peer asked last to probe independently.
	Designated string `json:"designated,omitempty"`
	// By is the node whose probe or report confirmed or refuted.
	By string    `json:"by,omitempty"`
	At time.Time `json:"at,omitzero"`
	// Distrusted lists the nodes whose reports on the key are ignored
	// (their verdict was refuted).
	Distrusted []string `json:"distrusted,omitempty"`
}

// Confirmations is the hint policy as the breaker list uses it (node
// adapts *hintpolicy.Policy); nil leaves the confirm field out.
type Confirmations interface {
	ConfirmOf(k breakerpool.Key) (BreakerConfirm, bool)
}

// withConfirm adds the confirm round of each breaker, if any.
func (s *Server) withConfirm(out []Breaker, statuses []breakerpool.Status) {
	if s.deps.Confirm == nil {
		return
	}
	for i, st := range statuses {
		if c, ok := s.deps.Confirm.ConfirmOf(st.Key); ok {
			out[i].Confirm = &c
		}
	}
}
