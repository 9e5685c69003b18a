package state

import (
	"os/exec"
	"strings"
	"testing"
)

// The replicated state is pure: it imports no Raft (its adapter is package
// raftstore) and no net/http (HTTP statuses are the API's), not even
// through another package. Of fusebox's own packages it takes only leaves:
// errcode, shardmap and internal/fastjson (a proposer's JSON checks).
func TestStateImportsNoRaftNorHTTP(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		if p == "net/http" || strings.HasPrefix(p, "github.com/hashicorp/raft") ||
			(strings.HasPrefix(p, "fusebox/") && p != "fusebox/raftstore/state" && p != "fusebox/errcode" && p != "fusebox/shardmap" && p != "fusebox/internal/fastjson") {
			t.Errorf("raftstore/state depends on %s", p)
		}
	}
}
