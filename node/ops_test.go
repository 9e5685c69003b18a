package node

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"fusebox/api"
	"fusebox/cluster"
	"fusebox/internal/testwait"
	"fusebox/raftstore"
)

const opsToken = "ops-test-admin-token-0123456789abcdef"

// Raft operations and snapshots through a follower's API: the follower
// relays them, with the caller's token, to the leader.
func TestOpsRaftAndSnapshotThroughFollower(t *testing.T) {
	c := newTestCluster(t, 3, func(cfg *Config) { cfg.AdminToken = opsToken })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	leader := c.leader(c.nodes)
	f := others(c.nodes, leader)[0]
	target := others(c.nodes, leader)[1]
	fc := f.client()

	// transfer-leader to a named voter, asked of another follower.
	// raft gives a transfer one election timeout (fast timing: a few
	// hundred ms) to catch the target up and hand over; on a loaded machine
	// that can time out, which the API answers as retryable unavailable:
	// retry as an operator would, until the transfer lands.
	var res raftstore.TransferResult
	testwait.For(t, 30*time.Second, "a leadership transfer to the named voter", func() bool {
		if res.From == "" && target.store.State().String() == "Leader" {
			// An attempt that timed out still landed: the first answer
			// was the retryable error, so there is no result to check.
			res.From = leader.cfg.NodeID
			return true
		}
		r, err := fc.TransferLeader(ctx, target.cfg.NodeID)
		var te *api.Error
		switch {
		case err == nil:
			res = r
			return true
		case errors.As(err, &te) && te.Code == api.CodeUnavailable:
			t.Logf("transfer not done yet (retrying): %v", err)
			return false
		default:
			t.Fatal(err)
			return false
		}
	})
	if res.From != leader.cfg.NodeID {
		t.Fatalf("transfer result %+v", res)
	}
	testwait.For(t, 10*time.Second, "the named node leading", func() bool { return target.store.State().String() == "Leader" })

	// remove-peer: the leader is refused, an unknown id is not found.
	var e *api.Error
	if _, err := fc.RemovePeer(ctx, target.cfg.NodeID, true); !errors.As(err, &e) || e.Code != api.CodeConflict {
		t.Fatalf("removing the leader: want conflict, got %v", err)
	}
	if _, err := fc.RemovePeer(ctx, "nobody", false); !errors.As(err, &e) || e.Code != api.CodeNotFound {
		t.Fatalf("removing an unknown server: want not_found, got %v", err)
	}
	// Without a token the relay never happens.
	if _, err := api.NewClient(f.HTTPAddr(), "", nil).TransferLeader(ctx, ""); !errors.As(err, &e) || e.Code != api.CodeUnauthenticated {
		t.Fatalf("no token: want unauthenticated, got %v", err)
	}

	// Snapshot: save through a follower, change, restore, state back everywhere.
	if _, err := fc.PutEndpoint(ctx, api.Endpoint{Name: "ep-before", URL: "http://127.0.0.1:1/before"}); err != nil {
		t.Fatal(err)
	}
	var file bytes.Buffer
	if _, err := fc.SaveSnapshot(ctx, &file); err != nil {
		t.Fatal(err)
	}
	sf, err := raftstore.ReadSnapshotFile(bytes.NewReader(file.Bytes()), api.MaxSnapshotBytes)
	if err != nil {
		t.Fatal(err)
	}
	if sf.Header.FuseboxVersion != "test" || sf.Header.Node != target.cfg.NodeID {
		t.Fatalf("header %+v", sf.Header)
	}
	if _, err := fc.DeleteEndpoint(ctx, "ep-before"); err != nil {
		t.Fatal(err)
	}
	if _, err := fc.PutEndpoint(ctx, api.Endpoint{Name: "ep-after", URL: "http://127.0.0.1:1/after"}); err != nil {
		t.Fatal(err)
	}
	bad := bytes.Clone(file.Bytes())
	bad[len(bad)-2] ^= 0x20
	if _, err := fc.RestoreSnapshot(ctx, bytes.NewReader(bad), false); !errors.As(err, &e) || e.Code != api.CodeInvalidArgument || !strings.Contains(e.Message, "checksum") {
		t.Fatalf("a flipped byte: want invalid_argument naming the checksum, got %v", err)
	}
	if _, err := fc.RestoreSnapshot(ctx, bytes.NewReader(file.Bytes()), false); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 15*time.Second, "the snapshot's endpoints on every node", func() bool {
		for _, n := range c.nodes {
			_, before := n.store.Reader().Endpoint("ep-before")
			_, after := n.store.Reader().Endpoint("ep-after")
			if !before || after {
				return false
			}
		}
		return true
	})
	// The cluster is ready and writable after the restore.
	c.waitReady(20 * time.Second)
	if _, err := fc.PutEndpoint(ctx, api.Endpoint{Name: "ep-later", URL: "http://127.0.0.1:1/later"}); err != nil {
		t.Fatal(err)
	}
}

func newGossipKey(t *testing.T) string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.StdEncoding.EncodeToString(b)
}

// Rotating the gossip key live: install, use, remove on every member; the
// key files follow, and a node restarted afterwards joins with the new key.
func TestOpsKeyringRotationSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	oldKey, newKey := newGossipKey(t), newGossipKey(t)
	c := newTestCluster(t, 3, func(cfg *Config) {
		cfg.AdminToken = opsToken
		cfg.GossipKeyFile = filepath.Join(dir, cfg.NodeID+".keys")
		if err := os.WriteFile(cfg.GossipKeyFile, []byte(oldKey+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := c.nodes[0].client()
	oldK, _ := cluster.DecodeKey(oldKey)
	newK, _ := cluster.DecodeKey(newKey)
	oldFP, newFP := cluster.Fingerprint(oldK), cluster.Fingerprint(newK)

	var e *api.Error
	if _, err := cl.Keyring(ctx, "use", newKey); !errors.As(err, &e) || e.Code != api.CodeConflict || !strings.Contains(e.Message, "not installed") {
		t.Fatalf("use before install: want conflict, got %v", err)
	}
	if _, err := cl.Keyring(ctx, "install", "not base64!"); !errors.As(err, &e) || e.Field != "key" {
		t.Fatalf("bad key: want invalid_argument on key, got %v", err)
	}
	for _, step := range []string{"install", "use"} {
		ans, err := cl.Keyring(ctx, step, newKey)
		if err != nil || ans.Failed != 0 || ans.Members != 3 {
			t.Fatalf("%s: %+v %v", step, ans, err)
		}
	}
	if _, err := cl.Keyring(ctx, "remove", newKey); !errors.As(err, &e) || e.Code != api.CodeConflict || !strings.Contains(e.Message, "primary") {
		t.Fatalf("removing the key in use: want conflict, got %v", err)
	}
	ans, err := cl.Keyring(ctx, "remove", oldKey)
	if err != nil || ans.Failed != 0 {
		t.Fatalf("remove: %+v %v", ans, err)
	}
	if len(ans.Keys) != 1 || ans.Keys[0].Fingerprint != newFP || ans.Keys[0].Nodes != 3 || ans.Keys[0].PrimaryOn != 3 {
		t.Fatalf("keys after rotation: %+v", ans.Keys)
	}
	list, err := cl.Keyring(ctx, "list", "")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(list)
	if bytes.Contains(raw, []byte(newKey)) || bytes.Contains(raw, []byte(oldKey)) || !bytes.Contains(raw, []byte(newFP)) || bytes.Contains(raw, []byte(oldFP)) {
		t.Fatalf("list must show only the new key's fingerprint, never a key: %s", raw)
	}
	for _, n := range c.nodes {
		keys, err := cluster.LoadKeyFile(n.cfg.GossipKeyFile)
		if err != nil || len(keys) != 1 || !bytes.Equal(keys[0], newK) {
			t.Fatalf("%s key file: %v %v", n.cfg.NodeID, len(keys), err)
		}
	}

	// A node restarted now reads the new key from its file and rejoins.
	n3 := c.nodes[2]
	n3.stop()
	testwait.For(t, 15*time.Second, "n3 gone from the others' view", func() bool {
		for _, m := range c.nodes[0].members.Members() {
			if m.ID == "n3" && m.State == cluster.StateAlive {
				return false
			}
		}
		return true
	})
	c.nodes[2] = n3.restart()
	testwait.For(t, 20*time.Second, "n3 alive again in every node's view", func() bool {
		for _, n := range c.nodes[:2] {
			ok := false
			for _, m := range n.members.Members() {
				ok = ok || m.ID == "n3" && m.State == cluster.StateAlive
			}
			if !ok {
				return false
			}
		}
		return true
	})
	c.waitReady(20 * time.Second)
}
