package node

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"fusebox/api"
	"fusebox/internal/testwait"
	"fusebox/raftstore/state"
	"fusebox/transport/transporttest"
)

// A batch the API accepts must survive the hop from a follower to the
// leader: the forwarded command travels base64-encoded in a JSON body, a
// third larger than the batch that carried it, so the forwarding route
// reads more than the API's 1 MiB (api.MaxForwardBodyBytes).
func TestLargeBatchSubmittedOnAFollower(t *testing.T) {
	dest := transporttest.NewDestination(t)
	c := newTestCluster(t, 3, nil)
	putEndpoint(t, c, "big-ep", dest.NexusURL())
	leader := c.leader(c.nodes)
	follower := others(c.nodes, leader)[0]

	// Four tasks of ~240 KiB of input each: the batch body stays under the
	// API's 1 MiB, the Raft command is about 0.95 MiB, and its forward
	// about 1.3 MiB.
	input := json.RawMessage(fmt.Sprintf(`{"req":%q}`, strings.Repeat("x", 240<<10)))
	batch := make([]api.TaskSubmit, 4)
	for i := range batch {
		batch[i] = echoTask("big-ep", fmt.Sprintf("wf-big-%d", i), fmt.Sprintf("big-%d", i))
		batch[i].Request.Input = input
	}
	acc, err := follower.client().SubmitTasks(ctxT(t), batch)
	if err != nil {
		t.Fatalf("a batch the API accepts, sent to a follower: %v", err)
	}
	if len(acc.Results) != len(batch) {
		t.Fatalf("%d results, want %d", len(acc.Results), len(batch))
	}
	testwait.For(t, 30*time.Second, "every large task delivered", func() bool {
		for _, r := range acc.Results {
			tk, err := follower.client().Task(ctxT(t), r.TaskID)
			if err != nil || tk.Status != state.TaskSucceeded {
				return false
			}
		}
		return true
	})
}
