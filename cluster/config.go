package cluster

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/memberlist"
	"golang.org/x/time/rate"
)

// Preset selects memberlist timings.
type Preset string

const (
	// PresetLAN is memberlist.DefaultLANConfig: the production timings.
	PresetLAN Preset = "lan"
	// PresetFast is tight timings for tests on loopback: crash detection in
	// about a second.
	PresetFast Preset = "fast"
)

// Defaults for optional Config fields.
const (
	DefaultRetainDeparted = 24 * time.Hour
	DefaultLeaveTimeout   = 5 * time.Second
	DefaultInboundQueue   = 4096
	DefaultHintRate       = rate.Limit(1000)
	DefaultHintBurst      = 2000
	maxNodeIDLen          = 128
)

// Config configures one node's membership. The zero value of every optional
// field means its default.
type Config struct {
	// NodeID is the memberlist node name; unique in the cluster.
	NodeID string
	// BindAddr is the gossip listen address, host:port. Port 0 picks a free
	// port, readable from GossipAddr after Start.
	BindAddr string
	// AdvertiseAddr is the host:port peers reach this node on, when it
	// differs from BindAddr (NAT, 0.0.0.0 binds); port 0 means the bound
	// port. Optional.
	AdvertiseAddr string
	// Join lists seed gossip addresses (host:port); the caller splits a
	// comma-separated flag. Empty means this node starts a new cluster.
	Join []string
	// Meta is this node's metadata; Meta.ID defaults to NodeID and must equal
	// it.
	Meta Meta
	// Preset is "lan" (default) or "fast".
	Preset Preset
	// Keys turns on gossip encryption: Keys[0] is the primary (used to
	// encrypt), the others are accepted for decryption. Each is 16, 24 or 32
	// bytes. See LoadKeyFile.
	Keys [][]byte
	// Label, optional, keeps clusters that share addresses apart.
	Label string
	// RetainDeparted is how long dead and left members stay in Members().
	// Default 24h.
	RetainDeparted time.Duration
	// LeaveTimeout bounds the wait for the leave broadcast in Leave and
	// Close. Default 5s.
	LeaveTimeout time.Duration
	// InboundQueue is the capacity of the queue between memberlist's UDP
	// receive loop and the message worker. Default 4096.
	InboundQueue int
	// HintRate and HintBurst limit hints accepted per origin node.
	// Defaults 1000/s, burst 2000.
	HintRate  rate.Limit
	HintBurst int
	// HintObserver, optional, is called on the worker goroutine for every
	// decoded hint received from the network, with how it was classified.
	// Tests and benchmarks use it to measure propagation delay. It must not
	// block.
	HintObserver func(h Hint, result HintResult)
	// FleetInterval is how often this node sends its fleet budget backlog
	// report; a report stays fresh for three intervals. Default 250ms.
	FleetInterval time.Duration
	// FleetSilentForget is how long a node that had a backlog for a key
	// and fell silent keeps its slot of the key's budget (a node that hears
	// no live peer keeps it for ever). Default 30s.
	FleetSilentForget time.Duration

	// compress turns memberlist's LZW compression back on, as nodes built
	// before issue 17 §3 sent: tests of a mixed cluster set it.
	compress bool
}

// timings are the preset-dependent durations of membership and joining.
type timings struct {
	joinMin, joinMax  time.Duration // retry backoff until the first join succeeds
	reconnect         time.Duration // re-join failed members after that
	leaveIntentTTL    time.Duration // how long a leave intent marks a member as leaving
	deadReclaim       time.Duration // memberlist DeadNodeReclaimTime
	gossipToTheDead   time.Duration
	applyFastSettings bool
}

func (c Config) timings() timings {
	if c.Preset == PresetFast {
		return timings{
			joinMin: 50 * time.Millisecond, joinMax: time.Second,
			reconnect: time.Second, leaveIntentTTL: 10 * time.Second,
			deadReclaim: time.Second, gossipToTheDead: 2 * time.Second,
			applyFastSettings: true,
		}
	}
	return timings{
		joinMin: time.Second, joinMax: 30 * time.Second,
		reconnect: 30 * time.Second, leaveIntentTTL: 2 * time.Minute,
		deadReclaim: 30 * time.Second, gossipToTheDead: 30 * time.Second,
	}
}

// withDefaults returns c with defaults filled in and validates it.
func (c Config) withDefaults() (Config, error) {
	if c.NodeID == "" {
		return c, errors.New("cluster: NodeID is required")
	}
	if len(c.NodeID) > maxNodeIDLen || !utf8.ValidString(c.NodeID) || strings.ContainsAny(c.NodeID, " \t\r\n") {
		return c, fmt.Errorf("cluster: NodeID %q must be at most %d bytes of UTF-8 without whitespace", c.NodeID, maxNodeIDLen)
	}
	if c.BindAddr == "" {
		return c, errors.New("cluster: BindAddr is required (host:port, port 0 picks one)")
	}
	if _, _, err := splitHostPort(c.BindAddr); err != nil {
		return c, fmt.Errorf("cluster: BindAddr: %w", err)
	}
	if c.AdvertiseAddr != "" {
		if _, _, err := splitHostPort(c.AdvertiseAddr); err != nil {
			return c, fmt.Errorf("cluster: AdvertiseAddr: %w", err)
		}
	}
	for i, j := range c.Join {
		if _, _, err := splitHostPort(j); err != nil {
			return c, fmt.Errorf("cluster: Join[%d]: %w", i, err)
		}
	}
	switch c.Preset {
	case "":
		c.Preset = PresetLAN
	case PresetLAN, PresetFast:
	default:
		return c, fmt.Errorf("cluster: Preset %q: want %q or %q", c.Preset, PresetLAN, PresetFast)
	}
	for i, k := range c.Keys {
		if err := validKeyLen(len(k)); err != nil {
			return c, fmt.Errorf("cluster: Keys[%d]: %w", i, err)
		}
	}
	if len(c.Label) > memberlist.LabelMaxSize {
		return c, fmt.Errorf("cluster: Label is %d bytes, max %d", len(c.Label), memberlist.LabelMaxSize)
	}
	if c.Meta.ID == "" {
		c.Meta.ID = c.NodeID
	}
	if c.Meta.ID != c.NodeID {
		return c, fmt.Errorf("cluster: Meta.ID %q must equal NodeID %q", c.Meta.ID, c.NodeID)
	}
	if _, err := c.Meta.encode(); err != nil {
		return c, fmt.Errorf("cluster: Meta: %w", err)
	}
	if c.RetainDeparted < 0 || c.LeaveTimeout < 0 || c.InboundQueue < 0 || c.HintRate < 0 || c.HintBurst < 0 {
		return c, errors.New("cluster: RetainDeparted, LeaveTimeout, InboundQueue, HintRate and HintBurst must not be negative")
	}
	if c.RetainDeparted == 0 {
		c.RetainDeparted = DefaultRetainDeparted
	}
	if c.LeaveTimeout == 0 {
		c.LeaveTimeout = DefaultLeaveTimeout
	}
	if c.InboundQueue == 0 {
		c.InboundQueue = DefaultInboundQueue
	}
	if c.HintRate == 0 {
		c.HintRate = DefaultHintRate
	}
	if c.HintBurst == 0 {
		c.HintBurst = DefaultHintBurst
	}
	if c.FleetInterval < 0 || c.FleetSilentForget < 0 {
		return c, errors.New("cluster: FleetInterval and FleetSilentForget must not be negative")
	}
	if c.FleetInterval == 0 {
		c.FleetInterval = DefaultFleetInterval
	}
	if c.FleetSilentForget == 0 {
		c.FleetSilentForget = DefaultFleetSilentForget
	}
	return c, nil
}

// memberlistConfig builds the memberlist configuration. The delegates are
// set by the caller.
func (c Config) memberlistConfig() (*memberlist.Config, error) {
	mc := memberlist.DefaultLANConfig()
	t := c.timings()
	if t.applyFastSettings {
		mc.ProbeInterval = 200 * time.Millisecond
		mc.ProbeTimeout = 50 * time.Millisecond
		mc.GossipInterval = 20 * time.Millisecond
		mc.SuspicionMult = 2
		mc.PushPullInterval = 2 * time.Second
		mc.TCPTimeout = 500 * time.Millisecond
	}
	// No LZW compression of what this node sends (issue 17 §3). memberlist
	// compresses every packet by default, and each compression allocates and
	// zeroes a 64 KiB LZW table (each decompression 20 KiB) for messages of
	// tens to hundreds of bytes: with 50 nodes in one process it was the
	// largest single cost of a hint and of the membership's own traffic
	// (cluster/DESIGN.md, "Where a hint's time goes"). Receivers decode
	// compressed and plain messages alike whatever their own setting, so
	// nodes with and without this interoperate; a push/pull's state goes
	// uncompressed over TCP (a few KiB at 50 members).
	mc.EnableCompression = c.compress
	mc.GossipToTheDeadTime = t.gossipToTheDead
	mc.DeadNodeReclaimTime = t.deadReclaim
	mc.Name = c.NodeID
	host, port, _ := splitHostPort(c.BindAddr)
	mc.BindAddr, mc.BindPort = host, port
	mc.AdvertiseAddr, mc.AdvertisePort = "", port
	if c.AdvertiseAddr != "" {
		mc.AdvertiseAddr, mc.AdvertisePort, _ = splitHostPort(c.AdvertiseAddr)
		if mc.AdvertisePort == 0 {
			mc.AdvertisePort = port // memberlist sets both to the bound port when port is 0
		}
	}
	mc.Label = c.Label
	if len(c.Keys) > 0 {
		kr, err := memberlist.NewKeyring(c.Keys, c.Keys[0])
		if err != nil {
			return nil, fmt.Errorf("cluster: Keys: %w", err)
		}
		mc.Keyring = kr
	}
	return mc, nil
}

func splitHostPort(s string) (string, int, error) {
	host, ps, err := net.SplitHostPort(s)
	if err != nil {
		return "", 0, fmt.Errorf("%q is not host:port: %w", s, err)
	}
	p, err := strconv.Atoi(ps)
	if err != nil || p < 0 || p > 65535 {
		return "", 0, fmt.Errorf("%q: port must be 0-65535", s)
	}
	return host, p, nil
}
