// Package gossip tells a node which nodes of the cluster exist, where
// their Raft and API listeners are, and whether they are alive, over
// memberlist's SWIM gossip.
package gossip

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// errClosed is returned by the methods of a closed Gossip that would need
// its network; it matches net.ErrClosed.
var errClosed = fmt.Errorf("gossip: closed: %w", net.ErrClosed)

// Config configures a node's membership gossip.
type Config struct {
	NodeID string
	// BindAddr is the host:port listened on, UDP and TCP both; port 0 takes
	// any free port and an empty host every interface.
	BindAddr string
	// Advertise is the host:port other nodes reach this one at; empty: the
	// bound address, port 0: the bound port. Memberlist gossips IPs, so a
	// host name here or in BindAddr is resolved once, at start.
	Advertise         string
	RaftAddr, APIAddr string       // carried in the node's metadata
	Logger            *slog.Logger // nil discards
	// Fast shortens probes, suspicion and gossip so that a crashed node is
	// declared dead about a second after it stops answering: for tests on
	// a loopback, too eager for a real network.
	Fast bool
	// SecretKey, when set (16, 24 or 32 bytes), encrypts and authenticates
	// the gossip (AES-GCM), incoming and outgoing: every node needs the
	// same key, and nothing from a node without it is taken.
	SecretKey []byte
	// Fresh: the node started without state (gossiped with its start time)
	Fresh bool
	// Proto is what the node's release can apply, carried in its metadata;
	// the node defines the numbers (the gossip only carries them).
	Proto int
	// Release names the node's build (cepnode --version), carried in its
	// metadata for people to see; nothing decides on it.
	Release string
	// Version is the highest cluster format version the node's release
	// writes (internal/clusterversion), carried in its metadata.
	Version int
	// Prove, when set, gives the proof of the node's Claim carried in its
	// metadata (Member.Proof): what lets the others check, with a key the
	// gossip does not hold, that the node may claim its id and addresses.
	Prove func(Claim) string
}

// Claim is what a member says of itself: its id, its addresses and when
// it started. Member.Proof is a proof of it.
type Claim struct {
	ID, GossipAddr, RaftAddr, APIAddr string
	Fresh                             bool
	Started                           int64
}

// Bytes encodes c for a MAC: one encoding per claim.
func (c Claim) Bytes() []byte {
	b, _ := json.Marshal(c) // fields in order; cannot fail
	return b
}

// State is a node's liveness as seen by this node.
type State int

// The States of a Member.
const (
	Alive State = iota
	// Suspect is never reported with memberlist v0.6.0, which neither
	// sends an event on suspicion nor fills Node.State (it stays alive,
	// hashicorp/memberlist#266): a suspected node reads alive until it is
	// declared dead.
	Suspect
	Dead // failed, or left gracefully
)

var stateNames = [...]string{"alive", "suspect", "dead"}

func (s State) String() string { return stateNames[s] }

// Member is a node as seen by this node's gossip.
type Member struct {
	ID, RaftAddr, APIAddr, GossipAddr string
	State                             State
	Since                             time.Time // when this node saw it enter State
	Fresh                             bool      // it started without state,
	Started                           int64     // at this time (Unix ms, its clock)
	Proto                             int       // what its release can apply (Config.Proto)
	Proof                             string    // its proof of Claim (Config.Prove), "" if none
	Release                           string    // its build (Config.Release), "" if not said
	Version                           int       // its highest cluster version (Config.Version), 0 if not said
}

// Claim is what m says of itself, as its proof covers it.
func (m Member) Claim() Claim {
	return Claim{ID: m.ID, GossipAddr: m.GossipAddr, RaftAddr: m.RaftAddr, APIAddr: m.APIAddr, Fresh: m.Fresh, Started: m.Started}
}

// Meta is the node metadata gossiped with every alive message. Exported
// because its JSON is a contract between releases: nodes of different
// releases read each other's.
type Meta struct {
	// Fresh: the node started with no state (a new data directory), at
	// Started (Unix ms): what lets a node take back an id removed before.
	Fresh   bool   `json:"fresh,omitempty"`
	Started int64  `json:"started,omitempty"`
	Raft    string `json:"raft"`
	API     string `json:"api"`
	// Proto is what the node's release can apply (Config.Proto)
	Proto int `json:"proto,omitempty"`
	// Proof is the node's proof of its Claim (Config.Prove)
	Proof string `json:"proof,omitempty"`
	// Release is the node's build (Config.Release); older releases say none
	Release string `json:"release,omitempty"`
	// Version is the node's highest cluster version (Config.Version);
	// releases before cluster versions say none
	Version int `json:"version,omitempty"`
}

// Gossip is a node's view of the cluster's membership, kept by a memberlist
// (SWIM gossip): which nodes exist, where their Raft and API listeners are,
// and whether they are alive. A dead node stays listed until Forget, so that
// the cluster can tell a member it has to replace from one it never knew.
type Gossip struct {
	ml   *memberlist.Memberlist
	addr string
	meta []byte
	log  *slog.Logger

	mu      sync.Mutex
	members map[string]Member
	changed chan struct{} // closed and replaced on every change of members

	// life serialises Leave and Close: memberlist panics on a Leave after
	// Shutdown.
	life   sync.Mutex
	closed bool
}

// Start binds the gossip listeners and announces the node; it meets
// other nodes once Join reaches one of them, or one of them joins it.
func Start(cfg Config) (*Gossip, error) {
	if cfg.NodeID == "" {
		return nil, errors.New("gossip: needs a node id")
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	conf := memberlist.DefaultLANConfig()
	if cfg.Fast {
		conf = memberlist.DefaultLocalConfig()
		conf.ProbeInterval = 200 * time.Millisecond
		conf.ProbeTimeout = 100 * time.Millisecond
		conf.SuspicionMult = 2
		conf.GossipInterval = 50 * time.Millisecond
		conf.PushPullInterval = time.Second
	}
	conf.Name = cfg.NodeID
	var err error
	if conf.BindAddr, conf.BindPort, err = splitAddr(cfg.BindAddr); err != nil {
		return nil, err
	}
	if conf.BindAddr == "" {
		conf.BindAddr = "0.0.0.0" // memberlist then advertises a private IP
	}
	conf.AdvertisePort = 0
	if cfg.Advertise != "" {
		if conf.AdvertiseAddr, conf.AdvertisePort, err = splitAddr(cfg.Advertise); err != nil {
			return nil, err
		}
	}
	// A node id is one node's for good, so a node restarted at another
	// address is the same member: let it take over its dead predecessor's
	// entry at once (0 would refuse the new address for ever).
	conf.DeadNodeReclaimTime = time.Nanosecond
	// With a key, nothing unencrypted is sent or taken: a node without
	// the key is never learnt, nor learns anything.
	conf.SecretKey = cfg.SecretKey
	conf.GossipVerifyIncoming = len(cfg.SecretKey) > 0
	conf.GossipVerifyOutgoing = len(cfg.SecretKey) > 0
	conf.Logger = log.New(memberlistLog{logger}, "", 0)

	// The transport is made here rather than by memberlist.Create, which
	// leaves its listeners open when it fails after binding them (no
	// usable advertise address, say).
	nc := &memberlist.NetTransportConfig{BindAddrs: []string{conf.BindAddr}, BindPort: conf.BindPort, Logger: conf.Logger}
	var nt *memberlist.NetTransport
	for range 10 { // port 0: UDP may be taken on the free TCP port found
		if nt, err = memberlist.NewNetTransport(nc); err == nil || conf.BindPort != 0 {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("gossip: start on %s: %w", cfg.BindAddr, err)
	}
	if conf.BindPort == 0 {
		conf.BindPort = nt.GetAutoBindPort()
	}
	if conf.AdvertisePort == 0 {
		conf.AdvertisePort = conf.BindPort
	}
	conf.Transport = nt

	// The address the others will see, as memberlist.Create settles it,
	// so that the proof can cover it.
	ip, port, err := nt.FinalAdvertiseAddr(conf.AdvertiseAddr, conf.AdvertisePort)
	if err != nil {
		nt.Shutdown()
		return nil, fmt.Errorf("gossip: start on %s: %w", cfg.BindAddr, err)
	}
	md := Meta{Raft: cfg.RaftAddr, API: cfg.APIAddr, Fresh: cfg.Fresh, Started: time.Now().UnixMilli(), Proto: cfg.Proto, Release: cfg.Release, Version: cfg.Version}
	if cfg.Prove != nil {
		md.Proof = cfg.Prove(Claim{ID: cfg.NodeID, GossipAddr: net.JoinHostPort(ip.String(), strconv.Itoa(port)),
			RaftAddr: md.Raft, APIAddr: md.API, Fresh: md.Fresh, Started: md.Started})
	}
	meta, _ := json.Marshal(md) // cannot fail
	if len(meta) > memberlist.MetaMaxSize {
		nt.Shutdown()
		return nil, fmt.Errorf("gossip: node metadata of %d bytes, over memberlist's %d", len(meta), memberlist.MetaMaxSize)
	}

	g := &Gossip{meta: meta, log: logger, members: make(map[string]Member), changed: make(chan struct{})}
	conf.Delegate = (*hooks)(g)
	conf.Events = (*hooks)(g)
	ml, err := memberlist.Create(conf)
	if err != nil {
		nt.Shutdown()
		return nil, fmt.Errorf("gossip: start on %s: %w", cfg.BindAddr, err)
	}
	g.ml = ml
	g.addr = ml.LocalNode().Address()
	return g, nil
}

// Static returns a Gossip that lists members and nothing else: no network,
// no changes. It lets tests of code that reads a membership (package
// cluster's) set one, as they cannot reach a Gossip's table. Join and Leave
// fail as on a closed Gossip; Close does nothing.
func Static(members ...Member) *Gossip {
	g := &Gossip{log: slog.New(slog.DiscardHandler), members: make(map[string]Member), changed: make(chan struct{}), closed: true}
	for _, m := range members {
		g.members[m.ID] = m
	}
	return g
}

// splitAddr splits host:port for memberlist, resolving a host name to
// one of its IPs (an IPv4 one if any).
func splitAddr(hostport string) (string, int, error) {
	host, p, err := net.SplitHostPort(hostport)
	if err != nil {
		return "", 0, fmt.Errorf("gossip: address: %w", err)
	}
	port, err := strconv.ParseUint(p, 10, 16)
	if err != nil {
		return "", 0, fmt.Errorf("gossip: address %q: bad port", hostport)
	}
	if host != "" && net.ParseIP(host) == nil {
		ips, err := net.LookupIP(host)
		if err != nil {
			return "", 0, fmt.Errorf("gossip: address %q: %w", hostport, err)
		}
		host = ips[0].String()
		if i := slices.IndexFunc(ips, func(ip net.IP) bool { return ip.To4() != nil }); i >= 0 {
			host = ips[i].String()
		}
	}
	return host, int(port), nil
}

// Addr returns the advertised host:port, with the port actually bound.
func (g *Gossip) Addr() string { return g.addr }

// Join contacts seeds (gossip addresses; this node's own is harmless) and
// exchanges full state with each reached. It returns the number reached and
// an error only when none was.
func (g *Gossip) Join(seeds []string) (int, error) {
	g.life.Lock()
	closed := g.closed
	g.life.Unlock()
	if closed {
		return 0, errClosed
	}
	return g.ml.Join(seeds)
}

// Members returns every node seen, this one included, sorted by ID. A dead
// node stays, with the time it died, until Forget.
func (g *Gossip) Members() []Member {
	g.mu.Lock()
	ms := slices.Collect(maps.Values(g.members))
	g.mu.Unlock()
	slices.SortFunc(ms, func(a, b Member) int { return strings.Compare(a.ID, b.ID) })
	return ms
}

// Member returns the node id as Members lists it.
func (g *Gossip) Member(id string) (Member, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	m, ok := g.members[id]
	return m, ok
}

// Changed returns a channel closed at the next change of Members.
func (g *Gossip) Changed() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.changed
}

// Forget drops id from Members if it is dead, once the cluster has removed
// it; an alive member stays, as memberlist would not report it again. A
// forgotten node that comes back is listed again.
func (g *Gossip) Forget(id string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if m, ok := g.members[id]; ok && m.State == Dead {
		delete(g.members, id)
		g.notifyLocked()
	}
}

// Leave broadcasts that this node leaves, so that the others mark it dead
// at once instead of after failure detection, and waits up to timeout (0:
// without bound) for the broadcast to go out. The node keeps gossiping
// until Close.
func (g *Gossip) Leave(timeout time.Duration) error {
	g.life.Lock()
	defer g.life.Unlock()
	if g.closed {
		return errClosed
	}
	return g.ml.Leave(timeout)
}

// Close stops the gossip without a leave broadcast, as a crash would; it is
// idempotent. Memberlist's goroutines end shortly after it returns.
func (g *Gossip) Close() error {
	g.life.Lock()
	defer g.life.Unlock()
	if g.closed {
		return nil
	}
	g.closed = true
	return g.ml.Shutdown()
}

func (g *Gossip) notifyLocked() {
	close(g.changed)
	g.changed = make(chan struct{})
}

// observe records what an event says of n. Memberlist calls the events with
// its node table locked, so it only updates the map.
func (g *Gossip) observe(n *memberlist.Node, state State) {
	var md Meta
	if err := json.Unmarshal(n.Meta, &md); err != nil && state == Alive {
		g.log.Warn("gossip: bad node metadata", "node", n.Name, "err", err)
	}
	g.mu.Lock()
	old, known := g.members[n.Name]
	m := old
	m.ID = n.Name
	if state == Alive || !known { // a death repeats the last addresses
		m.GossipAddr, m.RaftAddr, m.APIAddr = n.Address(), md.Raft, md.API
		m.Fresh, m.Started, m.Proto, m.Proof, m.Release, m.Version = md.Fresh, md.Started, md.Proto, md.Proof, md.Release, md.Version
	}
	transition := !known || old.State != state
	if transition {
		m.State, m.Since = state, time.Now()
	}
	if known && m == old {
		g.mu.Unlock()
		return
	}
	g.members[n.Name] = m
	g.notifyLocked()
	g.mu.Unlock()
	if transition {
		g.log.Info("gossip: member "+state.String(), "node", m.ID, "gossip", m.GossipAddr, "raft", m.RaftAddr, "api", m.APIAddr)
	}
}

// hooks is the memberlist.Delegate and EventDelegate of a Gossip, kept off
// Gossip's own method set.
type hooks Gossip

func (h *hooks) NodeMeta(int) []byte             { return h.meta } // size checked by Start
func (h *hooks) NotifyMsg([]byte)                {}
func (h *hooks) GetBroadcasts(int, int) [][]byte { return nil }
func (h *hooks) LocalState(bool) []byte          { return nil }
func (h *hooks) MergeRemoteState([]byte, bool)   {}
func (h *hooks) NotifyJoin(n *memberlist.Node)   { (*Gossip)(h).observe(n, Alive) }
func (h *hooks) NotifyUpdate(n *memberlist.Node) { (*Gossip)(h).observe(n, Alive) }
func (h *hooks) NotifyLeave(n *memberlist.Node)  { (*Gossip)(h).observe(n, Dead) }

// memberlistLog turns memberlist's log lines, "[LEVEL] memberlist: text",
// into slog records. INFO goes to debug, as the gossip logs the membership
// changes it reports itself.
type memberlistLog struct{ l *slog.Logger }

func (w memberlistLog) Write(p []byte) (int, error) {
	msg, level := strings.TrimRight(string(p), "\r\n"), slog.LevelDebug
	if tag, rest, ok := strings.Cut(msg, " "); ok {
		switch tag {
		case "[DEBUG]", "[INFO]":
			msg = rest
		case "[WARN]":
			msg, level = rest, slog.LevelWarn
		case "[ERR]", "[ERROR]":
			msg, level = rest, slog.LevelError
		}
	}
	w.l.Log(context.Background(), level, msg)
	return len(p), nil
}
