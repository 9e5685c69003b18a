package cluster

import (
	"encoding/json"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
)

// Peers put https:// in front of a member's HTTP address and send it the
// cluster's token: an address that is not plain host:port is refused, so a
// gossip-key holder cannot pick http:// (the token in clear) or a path.
func TestDecodeMetaAddresses(t *testing.T) {
	ok := []string{"127.0.0.1:8470", "[::1]:8470", "node-2.internal:1", "n:65535", "n:08470"}
	bad := []string{
		"http://attacker:80", "https://10.0.0.1:8470", "attacker:80/x", "user@attacker:80",
		"attacker", ":8470", "attacker:0", "attacker:65536", "attacker:+80", "attacker:http",
		"[fe80::1%eth0]:8470", "a b:80", "attacker:80?x", "a\\b:80", "1:2:3",
	}
	for _, addr := range ok {
		for _, field := range []string{"http", "raft"} {
			b, _ := json.Marshal(map[string]string{"id": "n", field: addr})
			if _, err := decodeMeta(b); err != nil {
				t.Errorf("%s %q refused: %v", field, addr, err)
			}
		}
	}
	for _, addr := range bad {
		for _, field := range []string{"http", "raft"} {
			b, _ := json.Marshal(map[string]string{"id": "n", field: addr})
			m, err := decodeMeta(b)
			if err == nil {
				t.Errorf("%s %q accepted: %+v", field, addr, m)
				continue
			}
			if !strings.Contains(err.Error(), field) {
				t.Errorf("%s %q: error %q does not name the field", field, addr, err)
			}
		}
	}
}

// A member whose metadata is refused is kept with no addresses (peers never
// call it) and the refusal is counted.
func TestMalformedMetaCounted(t *testing.T) {
	met, _ := newMetrics(nil)
	tab := newMemberTable("self", slog.New(slog.DiscardHandler), met, time.Minute, time.Hour)
	tab.NotifyJoin(&memberlist.Node{Name: "evil", Addr: net.ParseIP("127.0.0.1"), Port: 7946,
		Meta: []byte(`{"id":"evil","http":"http://127.0.0.1:9999","raft":"127.0.0.1:9998"}`)})
	s := tab.snap.Load()
	m := s.members[s.index["evil"]]
	if m.Meta.HTTPAddr != "" || m.Meta.RaftAddr != "" {
		t.Errorf("member kept addresses %q / %q from refused metadata", m.Meta.HTTPAddr, m.Meta.RaftAddr)
	}
	if got := counter(t, met.msgsDropped, "bad_metadata"); got != 1 {
		t.Errorf("messages_dropped{bad_metadata} = %v, want 1", got)
	}
}

// FuzzDecodeMeta: any bytes a peer gossips decode or are refused, never a
// panic; what is accepted has plain host:port addresses and fits the size.
func FuzzDecodeMeta(f *testing.F) {
	f.Add([]byte(`{"id":"n1","http":"127.0.0.1:8470","raft":"127.0.0.1:8471","ver":"1","logv":5}`))
	f.Add([]byte(`{"id":"n1","http":"http://x:1"}`))
	f.Add([]byte(`{"id":"n1","raft":"[::1]:8471","suspect":true}`))
	f.Add([]byte(`{"id":"n1","raft":"[::1]:8471","tsu":true}`))
	f.Add([]byte(`{"id":"n1","tsu":"yes"}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeMeta(b)
		if err != nil {
			if m != (Meta{}) {
				t.Fatalf("refused metadata kept fields: %+v", m)
			}
			return
		}
		if len(b) > memberlist.MetaMaxSize {
			t.Fatalf("accepted %d bytes", len(b))
		}
		for _, a := range []string{m.HTTPAddr, m.RaftAddr} {
			if a == "" {
				continue
			}
			if strings.Contains(a, "/") || strings.Contains(a, "@") || CheckHostPort(a) != nil {
				t.Fatalf("accepted address %q", a)
			}
		}
	})
}

// The task store flag survives the wire; an older peer's metadata (no
// field) reads as reachable, and a flag of the wrong type is refused whole.
func TestMetaTaskStoreUnreachable(t *testing.T) {
	b, err := Meta{ID: "n1", TaskStoreUnreachable: true}.encode()
	if err != nil {
		t.Fatal(err)
	}
	if m, err := decodeMeta(b); err != nil || !m.TaskStoreUnreachable {
		t.Fatalf("round trip: %+v, %v", m, err)
	}
	if m, err := decodeMeta([]byte(`{"id":"n1","logv":5}`)); err != nil || m.TaskStoreUnreachable {
		t.Fatalf("older metadata: %+v, %v", m, err)
	}
	if m, err := decodeMeta([]byte(`{"id":"n1","tsu":"yes"}`)); err == nil || m != (Meta{}) {
		t.Fatalf("a string flag: %+v, %v", m, err)
	}
}
