package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/cepcluster/cep/keygroup"
)

// Meta is the replicated metadata of the cluster: patterns, sources, the
// shard map and savepoints. It is the state machine of the metadata Raft
// group. Apply depends only on the command and the log index; Meta is not
// safe for concurrent use (the Raft FSM serialises it and hands out copies).
type Meta struct {
	ClusterID  string               `json:"clusterId"`
	KeyGroups  int                  `json:"keyGroups"`
	Shards     []ShardInfo          `json:"shards"`
	Patterns   map[string]*PatternM `json:"patterns"`
	Sources    map[string]*SourceM  `json:"sources"`
	Savepoints []SavepointM         `json:"savepoints"`
	// Restore, when set, is the savepoint every shard must restore (each
	// shard leader does it once, recording the restore id in its state).
	Restore *RestoreM `json:"restore,omitempty"`
	// Nodes are the cluster's members, sorted by id: those it was created
	// with and those that joined since, until they are removed.
	Nodes []NodeM `json:"nodes,omitempty"`
	// Replication is how many replicas each shard should have (fewer
	// while the cluster has fewer nodes); 0 in metadata written before
	// nodes could join: the replica count the shards were created with.
	Replication int `json:"replication,omitempty"`
	// Removed are the nodes removed from the cluster, sorted by id: a
	// process still running under one of their ids is not taken back; a
	// node started afresh (empty data directory) after the removal is.
	Removed []RemovedM `json:"removed,omitempty"`
	Index   uint64     `json:"index"` // last applied log index
}

// peer is the member's addresses.
func (nd *NodeM) peer() Peer {
	return Peer{ID: nd.ID, RaftAddr: nd.RaftAddr, APIAddr: nd.APIAddr, GossipAddr: nd.GossipAddr}
}

// RemovedM is a node removed from the cluster, at Time (Unix ms, as
// logged by the proposer).
type RemovedM struct {
	ID   string `json:"id"`
	Time int64  `json:"time"`
}

// NodeM is a member of the cluster.
type NodeM struct {
	ID         string `json:"id"`
	RaftAddr   string `json:"raftAddr"`
	APIAddr    string `json:"apiAddr"`
	GossipAddr string `json:"gossipAddr,omitempty"`
	// Removing: an operator asked to remove the node; its replicas move to
	// other nodes, and once it holds none it leaves the cluster.
	Removing   bool   `json:"removing,omitempty"`
	AddedIndex uint64 `json:"addedIndex"`
}

// RestoreM asks every shard to restore a savepoint.
type RestoreM struct {
	ID        string `json:"id"` // unique per restore request: savepoint id @ log index
	Savepoint string `json:"savepoint"`
	Location  string `json:"location"` // store location, without the id
}

// ShardInfo is one entry of the shard map.
type ShardInfo struct {
	ID       uint64   `json:"id"`
	First    int      `json:"first"`
	Last     int      `json:"last"`
	Replicas []string `json:"replicas"` // node ids; the first is the preferred leader
	// SplitAt and SplitInto, while the shard splits: its key groups from
	// SplitAt on go to shard SplitInto (they are still its own until the
	// split is done).
	SplitAt   int    `json:"splitAt,omitempty"`
	SplitInto uint64 `json:"splitInto,omitempty"`
	// Parent is the shard this one was split off; Splitting while the
	// split is not done (its replicas start from the parent's state).
	Parent    uint64 `json:"parent,omitempty"`
	Splitting bool   `json:"splitting,omitempty"`
	// LogRange is the key-group range the shard's log began with: a
	// replica that starts empty and replays the log from its start must
	// start from that range (a split shrinks it at a point of the log).
	// Nil in metadata written before shards split: First and Last.
	LogRange *[2]int `json:"logRange,omitempty"`
}

// StartRange is the key-group range the shard's log began with.
func (s *ShardInfo) StartRange() (first, last int) {
	if s.LogRange != nil {
		return s.LogRange[0], s.LogRange[1]
	}
	return s.First, s.Last
}

// Settled reports whether the shard is not splitting (as either part).
func (s *ShardInfo) Settled() bool { return s.SplitAt == 0 && !s.Splitting }

// PatternM is a deployed pattern version.
type PatternM struct {
	Name    string   `json:"name"`
	Version uint64   `json:"version"`
	Spec    string   `json:"spec"`
	Format  string   `json:"format"` // "spec" or "sql"
	Sources []string `json:"sources"`
	// Reads parallels Sources with the sources read instead: the derived
	// source re-keying a source partitioned by another key (empty: Sources)
	Reads         []string `json:"reads,omitempty"`
	OutputSubject string   `json:"outputSubject"`
	Policy        uint8    `json:"policy"` // shard.UpdatePolicy of the last update
	// MaxPartialMatches bounds the partial matches per key: 0 for the
	// engine's default, -1 for none (shard.Deploy.MaxPartialMatches)
	MaxPartialMatches int64 `json:"maxPartialMatches,omitempty"`
	// Records are the record types published ("match", "timeout",
	// "late"); empty: all of them
	Records []string `json:"records,omitempty"`
	// FromStart: deployed to read its sources from the start of their
	// streams, not from the deployment
	FromStart    bool   `json:"fromStart,omitempty"`
	CreatedIndex uint64 `json:"createdIndex"`
	UpdatedIndex uint64 `json:"updatedIndex"`
	Deleted      bool   `json:"deleted"`
}

// SourceM is an event source: a JetStream stream partitioned by key group.
type SourceM struct {
	Name     string   `json:"name"`
	Stream   string   `json:"stream"`
	Subjects []string `json:"subjects"`
	Key      string   `json:"key"`
	Managed  bool     `json:"managed"` // created by the cluster
	// Origin, for a derived source, is the source it re-keys by Key
	Origin string `json:"origin,omitempty"`
	// Unpartitioned: the stream is not stored by key-group block (an
	// existing stream, or custom subjects); every pattern reads it re-keyed,
	// its forwarder filtering by Filter when set.
	Unpartitioned bool     `json:"unpartitioned,omitempty"`
	Filter        []string `json:"filter,omitempty"`
	CreatedIndex  uint64   `json:"createdIndex"`
}

// SavepointM records a completed savepoint.
type SavepointM struct {
	ID           string `json:"id"`
	Location     string `json:"location"`
	CreatedIndex uint64 `json:"createdIndex"`
	CreatedTime  int64  `json:"createdTime"` // ms, as logged by the proposer
	Shards       int    `json:"shards"`
}

// Command kinds of the metadata log.
const (
	CmdInit          = "init"
	CmdPutPattern    = "putPattern"
	CmdDeletePattern = "deletePattern"
	CmdPutSource     = "putSource"
	CmdAddSavepoint  = "addSavepoint"
	CmdRestore       = "restore"
	CmdDeleteSource  = "deleteSource"
	CmdDelSavepoint  = "deleteSavepoint"
	CmdPutNode       = "putNode"     // a node joins, or its addresses change
	CmdRemoveNode    = "removeNode"  // an operator asks to remove a node
	CmdForgetNode    = "forgetNode"  // a node holding no replica leaves
	CmdSetReplicas   = "setReplicas" // a shard's replicas change
	CmdSplitShard    = "splitShard"  // a shard starts splitting
	CmdSplitDone     = "splitDone"   // the shard has split
)

// Command is one metadata log entry (JSON: metadata changes are rare and
// small, and JSON keeps the log readable).
type Command struct {
	Kind      string      `json:"kind"`
	ClusterID string      `json:"clusterId,omitempty"`
	KeyGroups int         `json:"keyGroups,omitempty"`
	Shards    []ShardInfo `json:"shards,omitempty"`
	Pattern   *PatternM   `json:"pattern,omitempty"`
	Name      string      `json:"name,omitempty"`
	Source    *SourceM    `json:"source,omitempty"`
	Savepoint *SavepointM `json:"savepoint,omitempty"`
	// CmdRestore: the savepoint's patterns and sources replace the
	// cluster's.
	Patterns []PatternM `json:"patterns,omitempty"`
	Sources  []SourceM  `json:"sources,omitempty"`
	// Expect guards put commands: the version the proposer saw (0 = must
	// not exist), so concurrent deploys of one name cannot both win.
	Expect uint64 `json:"expect,omitempty"`
	Create bool   `json:"create,omitempty"`
	// CmdInit: the nodes the cluster starts with and the replication
	Nodes       []NodeM `json:"nodes,omitempty"`
	Replication int     `json:"replication,omitempty"`
	// CmdPutNode: Node; for an id removed before, Fresh and Started say
	// that the process started with no state after the removal.
	// CmdForgetNode: Time, when (Unix ms).
	// CmdRemoveNode: Force lets the shards keep fewer replicas than they
	// have when the other members cannot hold as many.
	Node    *NodeM `json:"node,omitempty"`
	Fresh   bool   `json:"fresh,omitempty"`
	Started int64  `json:"started,omitempty"`
	Time    int64  `json:"time,omitempty"`
	Force   bool   `json:"force,omitempty"`
	// CmdSetReplicas: shard ShardID's replicas become Replicas if they are
	// ExpectReplicas (what the proposer saw). CmdSplitShard: shard ShardID
	// splits at key group At (0: at its middle block). CmdSplitDone: it
	// has.
	ShardID        uint64   `json:"shardId,omitempty"`
	Replicas       []string `json:"replicas,omitempty"`
	ExpectReplicas []string `json:"expectReplicas,omitempty"`
	At             int      `json:"at,omitempty"`
}

// Errors returned by Apply, which the proposer reports to the caller.
var (
	ErrExists   = errors.New("cluster: already exists")
	ErrNotFound = errors.New("cluster: not found")
	ErrConflict = errors.New("cluster: changed concurrently; retry")
	ErrInvalid  = errors.New("cluster: invalid request")
)

// NewMeta returns empty metadata.
func NewMeta() *Meta {
	return &Meta{Patterns: map[string]*PatternM{}, Sources: map[string]*SourceM{}}
}

// Apply applies a command at log index idx and returns the resulting
// object or an error for the proposer. A rejected command changes nothing.
func (m *Meta) Apply(idx uint64, c *Command) (any, error) {
	m.Index = idx
	switch c.Kind {
	case CmdInit:
		if m.KeyGroups != 0 {
			return nil, nil // already initialised: bootstrap is idempotent
		}
		m.ClusterID, m.KeyGroups, m.Shards = c.ClusterID, c.KeyGroups, append([]ShardInfo(nil), c.Shards...)
		m.Replication = c.Replication
		for _, nd := range c.Nodes {
			nd.AddedIndex = idx
			m.putNode(nd)
		}
		return nil, nil
	case CmdPutNode:
		if c.Node == nil || c.Node.ID == "" {
			return nil, fmt.Errorf("cluster: putNode without a node")
		}
		nd := *c.Node
		if i, removed := m.removedAt(nd.ID); removed {
			if !m.mayRejoin(nd.ID, c.Fresh, c.Started) {
				return nil, fmt.Errorf("%w: node %q was removed from the cluster; it joins again only started with an empty data directory", ErrConflict, nd.ID)
			}
			m.Removed = slices.Delete(m.Removed, i, i+1)
		}
		if old := m.Node(nd.ID); old != nil {
			nd.Removing, nd.AddedIndex = old.Removing, old.AddedIndex
		} else {
			nd.Removing, nd.AddedIndex = false, idx
		}
		m.putNode(nd)
		return &nd, nil
	case CmdRemoveNode:
		nd := m.Node(c.Name)
		if nd == nil {
			return nil, fmt.Errorf("%w: node %q", ErrNotFound, c.Name)
		}
		active := len(m.ActiveNodes())
		switch {
		case nd.Removing:
		case active == 1:
			return nil, fmt.Errorf("%w: node %q is the cluster's last; its replicas have nowhere to go", ErrConflict, c.Name)
		case active-1 < min(m.replication(), active) && !c.Force:
			return nil, fmt.Errorf("%w: without node %q, %d nodes are left for %d replicas of each shard; add a node first, or allow the shards fewer replicas", ErrConflict, c.Name, active-1, min(m.replication(), active))
		}
		nd.Removing = true
		cp := *nd
		return &cp, nil
	case CmdForgetNode:
		i := slices.IndexFunc(m.Nodes, func(nd NodeM) bool { return nd.ID == c.Name })
		if i < 0 {
			return nil, fmt.Errorf("%w: node %q", ErrNotFound, c.Name)
		}
		for _, sh := range m.Shards {
			if slices.Contains(sh.Replicas, c.Name) {
				return nil, fmt.Errorf("%w: node %q holds a replica of shard %d", ErrConflict, c.Name, sh.ID)
			}
		}
		nd := m.Nodes[i]
		m.Nodes = slices.Delete(m.Nodes, i, i+1)
		if j, found := m.removedAt(nd.ID); found {
			m.Removed[j].Time = c.Time
		} else {
			m.Removed = slices.Insert(m.Removed, j, RemovedM{ID: nd.ID, Time: c.Time})
		}
		return &nd, nil
	case CmdSplitShard:
		return m.splitShard(c.ShardID, c.At)
	case CmdSplitDone:
		i := m.shardIndex(c.ShardID)
		if i < 0 || m.Shards[i].SplitAt == 0 {
			return nil, fmt.Errorf("%w: shard %d is not splitting", ErrConflict, c.ShardID)
		}
		s := &m.Shards[i]
		j := m.shardIndex(s.SplitInto)
		if j >= 0 {
			m.Shards[j].Splitting = false
		}
		s.Last, s.SplitAt, s.SplitInto = s.SplitAt-1, 0, 0
		cp := *s
		return &cp, nil
	case CmdSetReplicas:
		i := m.shardIndex(c.ShardID)
		if i < 0 {
			return nil, fmt.Errorf("%w: shard %d", ErrNotFound, c.ShardID)
		}
		if !m.Shards[i].Settled() {
			return nil, fmt.Errorf("%w: shard %d is splitting", ErrConflict, c.ShardID)
		}
		if !slices.Equal(m.Shards[i].Replicas, c.ExpectReplicas) {
			return nil, fmt.Errorf("%w: shard %d's replicas are %v", ErrConflict, c.ShardID, m.Shards[i].Replicas)
		}
		if len(c.Replicas) == 0 {
			return nil, fmt.Errorf("cluster: shard %d without replicas", c.ShardID)
		}
		for j, id := range c.Replicas {
			if m.Node(id) == nil || slices.Contains(c.Replicas[:j], id) {
				return nil, fmt.Errorf("%w: shard %d: node %q is not a member, or listed twice", ErrConflict, c.ShardID, id)
			}
		}
		m.Shards[i].Replicas = append([]string(nil), c.Replicas...)
		cp := m.Shards[i]
		return &cp, nil
	case CmdPutPattern:
		p := *c.Pattern
		old := m.Patterns[p.Name]
		if old != nil && old.Deleted {
			old = nil
		}
		switch {
		case c.Create && old != nil:
			return nil, fmt.Errorf("%w: pattern %q (version %d); use update to change it", ErrExists, p.Name, old.Version)
		case !c.Create && old == nil:
			return nil, fmt.Errorf("%w: pattern %q", ErrNotFound, p.Name)
		case old != nil && c.Expect != 0 && old.Version != c.Expect:
			return nil, fmt.Errorf("%w: pattern %q is at version %d", ErrConflict, p.Name, old.Version)
		}
		for _, s := range append(append([]string(nil), p.Sources...), p.Reads...) {
			if m.Sources[s] == nil {
				return nil, fmt.Errorf("%w: source %q (create it first)", ErrNotFound, s)
			}
		}
		if p.FromStart && old == nil {
			// a source is read once for every pattern: from its start only
			// while nothing reads it
			for _, name := range m.PatternNames() {
				for _, s := range p.ReadsOf() {
					if o := m.Patterns[name]; name != p.Name && slices.Contains(o.ReadsOf(), s) {
						return nil, fmt.Errorf("%w: pattern %q reads %q already, so a pattern can start on it only at its deployment, not from its start", ErrConflict, name, s)
					}
				}
			}
		}
		if old == nil {
			prev := m.Patterns[p.Name] // a deleted pattern's versions keep counting
			p.Version = 1
			if prev != nil {
				p.Version = prev.Version + 1
			}
			p.CreatedIndex = idx
		} else {
			p.Version = old.Version + 1
			p.CreatedIndex = old.CreatedIndex
		}
		p.UpdatedIndex = idx
		p.Deleted = false
		m.Patterns[p.Name] = &p
		cp := p
		return &cp, nil
	case CmdDeletePattern:
		p := m.Patterns[c.Name]
		if p == nil || p.Deleted {
			return nil, fmt.Errorf("%w: pattern %q", ErrNotFound, c.Name)
		}
		p.Deleted = true
		p.Version++
		p.UpdatedIndex = idx
		cp := *p
		return &cp, nil
	case CmdPutSource:
		s := *c.Source
		if m.Sources[s.Name] != nil {
			return nil, fmt.Errorf("%w: source %q", ErrExists, s.Name)
		}
		if s.Origin != "" && m.Sources[s.Origin] == nil {
			// the source it re-keys was deleted meanwhile
			return nil, fmt.Errorf("%w: source %q", ErrNotFound, s.Origin)
		}
		s.CreatedIndex = idx
		m.Sources[s.Name] = &s
		cp := s
		return &cp, nil
	case CmdDeleteSource:
		s := m.Sources[c.Name]
		if s == nil {
			return nil, fmt.Errorf("%w: source %q", ErrNotFound, c.Name)
		}
		gone := []*SourceM{s}
		for _, name := range m.SourceNames() {
			if d := m.Sources[name]; d.Origin == c.Name {
				gone = append(gone, d)
			}
		}
		var readers []string
		for _, name := range m.PatternNames() {
			p := m.Patterns[name]
			for _, g := range gone {
				if slices.Contains(p.Sources, g.Name) || slices.Contains(p.Reads, g.Name) {
					readers = append(readers, name)
					break
				}
			}
		}
		if len(readers) > 0 {
			return nil, fmt.Errorf("%w: source %q is read by pattern(s) %s; delete them first", ErrConflict, c.Name, strings.Join(readers, ", "))
		}
		out := make([]SourceM, len(gone))
		for i, g := range gone {
			out[i] = *g
			delete(m.Sources, g.Name)
		}
		return out, nil
	case CmdRestore:
		sp := c.Savepoint
		m.Patterns = map[string]*PatternM{}
		for i := range c.Patterns {
			p := c.Patterns[i]
			p.UpdatedIndex = idx
			m.Patterns[p.Name] = &p
		}
		for i := range c.Sources {
			s := c.Sources[i]
			if m.Sources[s.Name] == nil {
				s.CreatedIndex = idx
				m.Sources[s.Name] = &s
			}
		}
		m.Restore = &RestoreM{ID: fmt.Sprintf("%s@%d", sp.ID, idx), Savepoint: sp.ID, Location: sp.Location}
		return m.Restore, nil
	case CmdDelSavepoint:
		i := slices.IndexFunc(m.Savepoints, func(s SavepointM) bool { return s.ID == c.Name })
		if i < 0 {
			return nil, fmt.Errorf("%w: savepoint %q", ErrNotFound, c.Name)
		}
		sp := m.Savepoints[i]
		m.Savepoints = slices.Delete(m.Savepoints, i, i+1)
		return &sp, nil
	case CmdAddSavepoint:
		sp := *c.Savepoint
		sp.CreatedIndex = idx
		m.Savepoints = append(m.Savepoints, sp)
		return &sp, nil
	}
	return nil, fmt.Errorf("cluster: unknown metadata command %q", c.Kind)
}

// splitShard starts splitting shard id at key group at (0: the block
// boundary nearest its middle): the key groups from at on go to a new
// shard with the next free id and the same replicas. The split point must
// be a block boundary (a shard reads whole blocks of a source) inside the
// shard; one split at a time.
func (m *Meta) splitShard(id uint64, at int) (any, error) {
	i := m.shardIndex(id)
	if i < 0 {
		return nil, fmt.Errorf("%w: shard %d", ErrNotFound, id)
	}
	for _, sh := range m.Shards {
		if !sh.Settled() {
			return nil, fmt.Errorf("%w: shard %d is splitting; one split at a time", ErrConflict, sh.ID)
		}
	}
	s := m.Shards[i]
	per := m.KeyGroups / keygroup.Blocks(m.KeyGroups)
	if at == 0 {
		at = (s.First + (s.Last-s.First+1)/2 + per/2) / per * per
	}
	switch {
	case s.Last-s.First+1 < 2*per:
		return nil, fmt.Errorf("%w: shard %d holds one block of key groups (%d-%d); it cannot split further", ErrConflict, id, s.First, s.Last)
	case at%per != 0 || at <= s.First || at > s.Last:
		return nil, fmt.Errorf("%w: shard %d (key groups %d-%d) splits at a multiple of %d after its first key group, not at %d", ErrInvalid, id, s.First, s.Last, per, at)
	}
	next := uint64(0)
	for _, sh := range m.Shards {
		next = max(next, sh.ID)
	}
	next++
	m.Shards[i].SplitAt, m.Shards[i].SplitInto = at, next
	if s.LogRange == nil {
		m.Shards[i].LogRange = &[2]int{s.First, s.Last}
	}
	m.Shards = append(m.Shards, ShardInfo{ID: next, First: at, Last: s.Last, Replicas: slices.Clone(s.Replicas), Parent: id, Splitting: true,
		LogRange: &[2]int{at, s.Last}})
	cp := m.Shards[i]
	return &cp, nil
}

// putNode adds nd or replaces the node of its id, keeping Nodes sorted.
func (m *Meta) putNode(nd NodeM) {
	i, found := slices.BinarySearchFunc(m.Nodes, nd.ID, func(x NodeM, id string) int { return strings.Compare(x.ID, id) })
	if found {
		m.Nodes[i] = nd
		return
	}
	m.Nodes = slices.Insert(m.Nodes, i, nd)
}

// replication is how many replicas each shard should have: Replication,
// or in metadata written before it was recorded the first shard's count.
func (m *Meta) replication() int {
	if m.Replication == 0 && len(m.Shards) > 0 {
		return len(m.Shards[0].Replicas)
	}
	return m.Replication
}

// shardIndex is the index of shard id in Shards, or -1.
func (m *Meta) shardIndex(id uint64) int {
	return slices.IndexFunc(m.Shards, func(s ShardInfo) bool { return s.ID == id })
}

// removedAt finds id in Removed (or where it would be inserted).
func (m *Meta) removedAt(id string) (int, bool) {
	return slices.BinarySearchFunc(m.Removed, id, func(r RemovedM, id string) int { return strings.Compare(r.ID, id) })
}

// IsRemoved reports whether node id was removed from the cluster.
func (m *Meta) IsRemoved(id string) bool {
	_, found := m.removedAt(id)
	return found
}

// mayRejoin reports whether a process under id may be a member: id was
// not removed, or the process started afresh (an empty data directory)
// after it was.
func (m *Meta) mayRejoin(id string, fresh bool, started int64) bool {
	i, removed := m.removedAt(id)
	return !removed || fresh && started > m.Removed[i].Time
}

// Node returns the member of that id, or nil.
func (m *Meta) Node(id string) *NodeM {
	i, found := slices.BinarySearchFunc(m.Nodes, id, func(x NodeM, id string) int { return strings.Compare(x.ID, id) })
	if !found {
		return nil
	}
	return &m.Nodes[i]
}

// ActiveNodes lists the ids of the members not being removed, sorted.
func (m *Meta) ActiveNodes() []string {
	var out []string
	for _, nd := range m.Nodes {
		if !nd.Removing {
			out = append(out, nd.ID)
		}
	}
	return out
}

// Clone returns a deep copy, for readers outside the FSM goroutine.
func (m *Meta) Clone() *Meta {
	b, _ := json.Marshal(m)
	out := NewMeta()
	_ = json.Unmarshal(b, out)
	return out
}

// Marshal encodes the metadata deterministically (JSON object keys are
// sorted by encoding/json).
func (m *Meta) Marshal() ([]byte, error) { return json.Marshal(m) }

// UnmarshalMeta decodes Marshal's output.
func UnmarshalMeta(b []byte) (*Meta, error) {
	m := NewMeta()
	if err := json.Unmarshal(b, m); err != nil {
		return nil, fmt.Errorf("cluster: bad metadata snapshot: %w", err)
	}
	return m, nil
}

// PatternNames lists live patterns, sorted.
func (m *Meta) PatternNames() []string {
	var out []string
	for n, p := range m.Patterns {
		if !p.Deleted {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// SourceNames lists sources, sorted.
func (m *Meta) SourceNames() []string {
	out := make([]string, 0, len(m.Sources))
	for n := range m.Sources {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// ReadsOf returns the sources a pattern reads: its Reads, or its Sources.
func (p *PatternM) ReadsOf() []string {
	if len(p.Reads) == len(p.Sources) {
		return p.Reads
	}
	return p.Sources
}
