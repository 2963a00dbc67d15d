// Package meta is the replicated metadata of the cluster (patterns,
// sources, the shard map, members, savepoints) and the state machine of the
// metadata Raft group: each command of its log is a type applied by one
// method, looked up by the command's kind. Applying depends only on the
// log; opening the group and proposing to it is the cluster package's.
package meta

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/cepcluster/cep/internal/schema"
)

// Meta is the replicated metadata of the cluster: patterns, sources, the
// shard map and savepoints. It is the state machine of the metadata Raft
// group. Apply depends only on the command and the log index; Meta is not
// safe for concurrent use (the Raft FSM serialises it and hands out copies).
type Meta struct {
	ClusterID  string              `json:"clusterId"`
	KeyGroups  int                 `json:"keyGroups"`
	Shards     []ShardInfo         `json:"shards"`
	Patterns   map[string]*Pattern `json:"patterns"`
	Sources    map[string]*Source  `json:"sources"`
	Savepoints []Savepoint         `json:"savepoints"`
	// Restore, when set, is the savepoint every shard must restore (each
	// shard leader does it once, recording the restore id in its state).
	Restore *Restore `json:"restore,omitempty"`
	// Nodes are the cluster's members, sorted by id: those it was created
	// with and those that joined since, until they are removed.
	Nodes []Node `json:"nodes,omitempty"`
	// Replication is how many replicas each shard should have (fewer
	// while the cluster has fewer nodes); 0 in metadata written before
	// nodes could join: the replica count the shards were created with.
	Replication int `json:"replication,omitempty"`
	// ClusterVersion is the active cluster version (SetClusterVersion):
	// the formats every node writes; 0 (omitted) is clusterversion.Base.
	ClusterVersion uint32 `json:"clusterVersion,omitempty"`
	// Removed are the nodes removed from the cluster, sorted by id: a
	// process still running under one of their ids is not taken back; a
	// node started afresh (empty data directory) after the removal is.
	Removed []Removed `json:"removed,omitempty"`
	// Forgotten is, per name, the version of a deleted pattern whose
	// tombstone was removed (ForgetPattern): the name's versions go on
	// above it, so that record ids (a hash of name, version and record)
	// never repeat a deleted pattern's.
	Forgotten map[string]uint64 `json:"forgotten,omitempty"`
	// ForgottenVersion is what releases before Forgotten kept instead: the
	// highest forgotten version of any name, above which every name's
	// versions went on. A metadata that has it keeps it as a floor.
	ForgottenVersion uint64 `json:"forgottenVersion,omitempty"`
	Index            uint64 `json:"index"` // last applied log index
	// Sealed: a checksummed entry was applied; unchecksummed (legacy
	// JSON) entries are refused from then on (FSM.Apply).
	Sealed bool `json:"sealed,omitempty"`
	// Requests are the last MaxRequests request ids applied, oldest
	// first, with their results (Requested); omitted when none, so a
	// snapshot without them reads as older releases wrote it.
	Requests []Request `json:"requests,omitempty"`
}

// Removed is a node removed from the cluster, at Time (Unix ms, as
// logged by the proposer).
type Removed struct {
	ID   string `json:"id"`
	Time int64  `json:"time"`
}

// Node is a member of the cluster.
type Node struct {
	ID         string `json:"id"`
	RaftAddr   string `json:"raftAddr"`
	APIAddr    string `json:"apiAddr"`
	GossipAddr string `json:"gossipAddr,omitempty"`
	// Removing: an operator asked to remove the node; its replicas move to
	// other nodes, and once it holds none it leaves the cluster.
	Removing   bool   `json:"removing,omitempty"`
	AddedIndex uint64 `json:"addedIndex"`
}

// Restore asks every shard to restore a savepoint.
type Restore struct {
	ID        string `json:"id"` // unique per restore request: savepoint id @ log index
	Savepoint string `json:"savepoint"`
	Location  string `json:"location"` // store location, without the id
	// Positions maps a source to the position its key groups resume after,
	// replacing the saved ones (its stream is not the one they count in);
	// Forwarded does the same for the origin position a derived source is
	// re-keyed from. A source in neither keeps its saved positions.
	Positions map[string]uint64 `json:"positions,omitempty"`
	Forwarded map[string]uint64 `json:"forwarded,omitempty"`
	// Unsealed: the parts' seals are not checked (RestoreSavepoint.Unsealed)
	Unsealed bool `json:"unsealed,omitempty"`
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

// Pattern is a deployed pattern version.
type Pattern struct {
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

// Source is an event source: a JetStream stream partitioned by key group.
type Source struct {
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
	// StreamCreated is when JetStream created Stream (Unix ns, as the
	// proposer read it from the stream's info): with Stream, the identity of
	// the stream the shards' positions of the source count in. A stream
	// deleted and created again has another; 0: not known (a source
	// recorded before identities were).
	StreamCreated int64  `json:"streamCreated,omitempty"`
	CreatedIndex  uint64 `json:"createdIndex"`
	// Limits are the retention limits of a stream the cluster created for
	// the source; omitted when there are none, so a source without them
	// encodes as the releases before wrote it.
	Limits SourceLimits `json:"limits,omitzero"`
	// Schema is the fields its events declare (nil: none declared);
	// omitted when unset, so a source without it encodes as older
	// releases wrote it.
	Schema schema.Schema `json:"schema,omitempty"`
	// Strict: the shards dead-letter the events that do not fit Schema
	// (with the reason) instead of passing them to patterns; omitted when
	// unset, as Schema.
	Strict bool `json:"strict,omitempty"`
}

// SourceLimits bound what a source's stream keeps; a zero field is no
// bound.
type SourceLimits struct {
	MaxAge   time.Duration `json:"maxAge,omitempty"` // nanoseconds
	MaxBytes int64         `json:"maxBytes,omitempty"`
	MaxMsgs  int64         `json:"maxMsgs,omitempty"`
}

// Valid reports what is wrong with the limits, if anything.
func (l SourceLimits) Valid() error {
	switch {
	case l.MaxAge < 0 || l.MaxAge > 0 && l.MaxAge < time.Second:
		return fmt.Errorf("max age %v: none (0) or at least 1s", l.MaxAge)
	case l.MaxBytes < 0:
		return fmt.Errorf("max bytes %d: none (0) or positive", l.MaxBytes)
	case l.MaxMsgs < 0:
		return fmt.Errorf("max messages %d: none (0) or positive", l.MaxMsgs)
	}
	return nil
}

// Savepoint records a completed savepoint.
type Savepoint struct {
	ID           string `json:"id"`
	Location     string `json:"location"`
	CreatedIndex uint64 `json:"createdIndex"`
	CreatedTime  int64  `json:"createdTime"` // ms, as logged by the proposer
	Shards       int    `json:"shards"`
}

// The kinds of error Apply returns for a command it refuses, which the
// proposer reports to the caller: each is an *Error of that Kind.
var (
	ErrExists   = errors.New("cluster: already exists")
	ErrNotFound = errors.New("cluster: not found")
	ErrConflict = errors.New("cluster: changed concurrently; retry")
	ErrInvalid  = errors.New("cluster: invalid request")
	// ErrPrecondition refuses a command the metadata's state forbids and
	// a retry cannot change (a source patterns read, the last node): Msg
	// says what is wrong and what to do. ErrConflict is kept for a
	// command that lost a race (an expected version that moved), which a
	// retry can win.
	ErrPrecondition = errors.New("cluster: failed precondition")
)

// Error is a refused command: Kind is one of ErrExists, ErrNotFound,
// ErrConflict, ErrPrecondition and ErrInvalid, Msg what was refused, in
// the caller's terms (pattern "p"). Callers pick their own code and
// wording by Kind and show Msg; the text of Error is the Kind's, then Msg.
type Error struct {
	Kind error
	Msg  string
}

func (e *Error) Error() string { return e.Kind.Error() + ": " + e.Msg }

// Unwrap makes errors.Is(err, ErrNotFound) and the like hold.
func (e *Error) Unwrap() error { return e.Kind }

// refused returns an *Error of kind.
func refused(kind error, format string, args ...any) error {
	return &Error{Kind: kind, Msg: fmt.Sprintf(format, args...)}
}

// New returns empty metadata.
func New() *Meta {
	return &Meta{Patterns: map[string]*Pattern{}, Sources: map[string]*Source{}}
}

// putNode adds nd or replaces the node of its id, keeping Nodes sorted.
func (m *Meta) putNode(nd Node) {
	i, found := slices.BinarySearchFunc(m.Nodes, nd.ID, func(x Node, id string) int { return strings.Compare(x.ID, id) })
	if found {
		m.Nodes[i] = nd
		return
	}
	m.Nodes = slices.Insert(m.Nodes, i, nd)
}

// EffectiveReplication is how many replicas each shard should have:
// Replication, or in metadata written before it was recorded the first
// shard's count.
func (m *Meta) EffectiveReplication() int {
	if m.Replication == 0 && len(m.Shards) > 0 {
		return len(m.Shards[0].Replicas)
	}
	return m.Replication
}

// ShardIndex is the index of shard id in Shards, or -1.
func (m *Meta) ShardIndex(id uint64) int {
	return slices.IndexFunc(m.Shards, func(s ShardInfo) bool { return s.ID == id })
}

// removedAt finds id in Removed (or where it would be inserted).
func (m *Meta) removedAt(id string) (int, bool) {
	return slices.BinarySearchFunc(m.Removed, id, func(r Removed, id string) int { return strings.Compare(r.ID, id) })
}

// IsRemoved reports whether node id was removed from the cluster.
func (m *Meta) IsRemoved(id string) bool {
	_, found := m.removedAt(id)
	return found
}

// MayRejoin reports whether a process under id may be a member: id was
// not removed, or the process started afresh (an empty data directory)
// after it was.
func (m *Meta) MayRejoin(id string, fresh bool, started int64) bool {
	i, removed := m.removedAt(id)
	return !removed || fresh && started > m.Removed[i].Time
}

// ForgottenOf is the version above which a pattern of that name starts
// when no tombstone of it is left (Forgotten, or the older floor).
func (m *Meta) ForgottenOf(name string) uint64 {
	return max(m.ForgottenVersion, m.Forgotten[name])
}

// Node returns the member of that id, or nil.
func (m *Meta) Node(id string) *Node {
	i, found := slices.BinarySearchFunc(m.Nodes, id, func(x Node, id string) int { return strings.Compare(x.ID, id) })
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
	out := New()
	_ = json.Unmarshal(b, out)
	return out
}

// Marshal encodes the metadata deterministically (JSON object keys are
// sorted by encoding/json).
func (m *Meta) Marshal() ([]byte, error) { return json.Marshal(m) }

// Unmarshal decodes Marshal's output.
func Unmarshal(b []byte) (*Meta, error) {
	m := New()
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
func (p *Pattern) ReadsOf() []string {
	if len(p.Reads) == len(p.Sources) {
		return p.Reads
	}
	return p.Sources
}
