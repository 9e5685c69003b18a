package node

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"fusebox/api"
	"fusebox/dynconfig"
	"fusebox/transport/transporttest"
)

// fusebox.tasks.maxOutputBytes bounds what a destination's synchronous
// answers may store, per namespace: a start whose output is over it fails
// as too large, naming the key, while another namespace's same answer is
// stored. Before, only the store's 1 MiB applied, and every replica kept
// up to 1 MiB per result for the retention whatever one tenant's
// destination answered (the isolation review: +742 MiB of heap for 300
// answers of 1 MB).
func TestMaxOutputBytesPerNamespace(t *testing.T) {
	dest := transporttest.NewDestination(t)
	c := newTestCluster(t, 1, nil)
	n := c.nodes[0]
	putEndpoint(t, c, "ep-out", dest.NexusURL())
	configSet(t, n, dynconfig.KeyTaskMaxOutputBytes, "ns-small", `64`)
	start := func(ns string) api.Task {
		t.Helper()
		ts := echoTask("ep-out", "wf-"+ns, "req-"+ns)
		ts.NamespaceID = ns
		ts.Request.Input = json.RawMessage(fmt.Sprintf(`{"pad":%q}`, strings.Repeat("p", 200)))
		acc, err := n.client().SubmitTask(ctxT(t), ts)
		if err != nil {
			t.Fatal(err)
		}
		return waitTask(t, n, acc.TaskID, "ended", func(x api.Task) bool { return x.Status != "pending" })
	}
	small := start("ns-small")
	if small.Status != "failed" || small.LastAnswer == nil || !strings.Contains(small.LastAnswer.Message, dynconfig.KeyTaskMaxOutputBytes) {
		t.Fatalf("a 200-byte output under a 64-byte bound: %s %+v; want failed naming %s", small.Status, small.LastAnswer, dynconfig.KeyTaskMaxOutputBytes)
	}
	if small.Output != nil {
		t.Fatalf("the refused output was stored: %s", small.Output)
	}
	other := start(deliveryNS)
	if other.Status != "succeeded" || len(other.Output) < 200 {
		t.Fatalf("another namespace's start: %s, output %d bytes; want succeeded with its output", other.Status, len(other.Output))
	}
}
