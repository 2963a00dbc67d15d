package meta

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/cepcluster/cep/internal/integrity"
)

// Command is one entry of the metadata log: one of the types below, each
// applied by its own method (see the table in apply.go).
//
// An entry is the JSON object of the command's fields with its kind
// under "kind", each field under the name and with the omitempty it had in
// the single command struct entries were written with before (see
// testdata): old entries decode into these types, and an older node decodes
// these entries into that struct.
type Command interface {
	// Kind is the command's name in the log.
	Kind() string
}

// Init creates the cluster: its key groups, shard map, first members and
// replication. A cluster already created ignores it (bootstrap is
// idempotent).
type Init struct {
	ClusterID   string      `json:"clusterId,omitempty"`
	KeyGroups   int         `json:"keyGroups,omitempty"`
	Shards      []ShardInfo `json:"shards,omitempty"`
	Nodes       []Node      `json:"nodes,omitempty"`
	Replication int         `json:"replication,omitempty"`
}

// PutPattern deploys (Create) or updates a pattern. Expect is the version
// the proposer saw (0: any), so concurrent deploys of one name cannot both
// win.
type PutPattern struct {
	Pattern *Pattern `json:"pattern,omitempty"`
	Expect  uint64   `json:"expect,omitempty"`
	Create  bool     `json:"create,omitempty"`
}

// DeletePattern deletes a pattern (its versions keep counting).
type DeletePattern struct {
	Name string `json:"name,omitempty"`
}

// ForgetPattern removes the tombstone a deletion left of pattern Name, at
// version Expect, once every shard has applied the deletion. (A node of a
// release before this command rejects it as unknown and keeps the
// tombstone: it is proposed only once every member runs this release, see
// cluster/DESIGN.md.) Its fields are those of the single command struct.
type ForgetPattern struct {
	Name   string `json:"name,omitempty"`
	Expect uint64 `json:"expect,omitempty"`
	// PerName: later versions of this name start above Expect, and other
	// names are not concerned (Meta.Forgotten). Without it, as releases
	// before it wrote the command, every name's versions go on above it
	// (Meta.ForgottenVersion). The proposer sets it once every member
	// applies it so.
	PerName bool `json:"perName,omitempty"`
}

// PutSource creates a source.
type PutSource struct {
	Source *Source `json:"source,omitempty"`
}

// DeleteSource deletes a source and the sources re-keying it.
type DeleteSource struct {
	Name string `json:"name,omitempty"`
}

// AddSavepoint records a completed savepoint.
type AddSavepoint struct {
	Savepoint *Savepoint `json:"savepoint,omitempty"`
}

// DeleteSavepoint forgets a savepoint.
type DeleteSavepoint struct {
	Name string `json:"name,omitempty"`
}

// RestoreSavepoint asks every shard to restore Savepoint; its Patterns
// replace the cluster's, its Sources are added where missing (with the
// identity of the stream as the proposer found it). Positions and
// Forwarded are the positions mapped onto streams other than the saved
// ones (Restore).
type RestoreSavepoint struct {
	Savepoint *Savepoint        `json:"savepoint,omitempty"`
	Patterns  []Pattern         `json:"patterns,omitempty"`
	Sources   []Source          `json:"sources,omitempty"`
	Positions map[string]uint64 `json:"positions,omitempty"`
	Forwarded map[string]uint64 `json:"forwarded,omitempty"`
	// Unsealed: the operator restores parts that carry no seal of this
	// cluster's secret (another cluster's, an older release's).
	Unsealed bool `json:"unsealed,omitempty"`
}

// PutNode: a node joins, or its addresses change. For an id removed
// before, Fresh and Started say that the process started with no state
// after the removal.
type PutNode struct {
	Node    *Node `json:"node,omitempty"`
	Fresh   bool  `json:"fresh,omitempty"`
	Started int64 `json:"started,omitempty"`
}

// RemoveNode: an operator asks to remove node Name. Force lets the shards
// keep fewer replicas than they have when the other members cannot hold as
// many.
type RemoveNode struct {
	Name  string `json:"name,omitempty"`
	Force bool   `json:"force,omitempty"`
}

// ForgetNode: node Name, holding no replica, leaves at Time (Unix ms).
type ForgetNode struct {
	Name string `json:"name,omitempty"`
	Time int64  `json:"time,omitempty"`
}

// SetReplicas: shard ShardID's replicas become Replicas if they are
// ExpectReplicas (what the proposer saw).
type SetReplicas struct {
	ShardID        uint64   `json:"shardId,omitempty"`
	Replicas       []string `json:"replicas,omitempty"`
	ExpectReplicas []string `json:"expectReplicas,omitempty"`
}

// SplitShard: shard ShardID starts splitting at key group At (0: at its
// middle block).
type SplitShard struct {
	ShardID uint64 `json:"shardId,omitempty"`
	At      int    `json:"at,omitempty"`
}

// SplitDone: shard ShardID has split.
type SplitDone struct {
	ShardID uint64 `json:"shardId,omitempty"`
}

// The kinds are the names entries have in the log: never change one.
func (Init) Kind() string             { return "init" }
func (PutPattern) Kind() string       { return "putPattern" }
func (DeletePattern) Kind() string    { return "deletePattern" }
func (ForgetPattern) Kind() string    { return "forgetPattern" }
func (PutSource) Kind() string        { return "putSource" }
func (AddSavepoint) Kind() string     { return "addSavepoint" }
func (RestoreSavepoint) Kind() string { return "restore" }
func (DeleteSource) Kind() string     { return "deleteSource" }
func (DeleteSavepoint) Kind() string  { return "deleteSavepoint" }
func (PutNode) Kind() string          { return "putNode" }
func (RemoveNode) Kind() string       { return "removeNode" }
func (ForgetNode) Kind() string       { return "forgetNode" }
func (SetReplicas) Kind() string      { return "setReplicas" }
func (SplitShard) Kind() string       { return "splitShard" }
func (SplitDone) Kind() string        { return "splitDone" }

// unknown is an entry of a kind this release does not know (written by a
// newer one): Apply rejects it, as it always has, instead of the FSM
// failing to decode it.
type unknown struct{ kind string }

func (u unknown) Kind() string { return u.kind }

// command is a kind's row of the table: how to decode its entries and how
// to apply them.
type command struct {
	decode func(b []byte) (Command, error)
	apply  func(m *Meta, idx uint64, c Command) (any, error)
}

var commands = map[string]command{}

// register adds the command type C, applied by apply, to the table under
// C's kind.
func register[C Command](apply func(m *Meta, idx uint64, c C) (any, error)) {
	var zero C
	kind := zero.Kind()
	if _, dup := commands[kind]; dup {
		panic("meta: command kind " + kind + " registered twice")
	}
	commands[kind] = command{
		decode: func(b []byte) (Command, error) {
			var c C
			err := json.Unmarshal(b, &c)
			return c, err
		},
		apply: func(m *Meta, idx uint64, c Command) (any, error) {
			switch x := any(c).(type) {
			case C:
				return apply(m, idx, x)
			case *C:
				return apply(m, idx, *x)
			}
			return nil, fmt.Errorf("cluster: metadata command %T is not a %q", c, kind)
		},
	}
}

// Encode returns the log entry of c: the JSON object of its fields, its
// kind first (where the single command struct had it).
func Encode(c Command) ([]byte, error) {
	kind, err := json.Marshal(c.Kind())
	if err != nil {
		return nil, err
	}
	body, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	if len(body) < 2 || body[0] != '{' {
		return nil, fmt.Errorf("cluster: metadata command %T does not encode as an object", c)
	}
	var b bytes.Buffer
	b.Grow(len(kind) + len(body) + 8)
	b.WriteString(`{"kind":`)
	b.Write(kind)
	if len(body) > 2 {
		b.WriteByte(',')
	}
	b.Write(body[1:])
	return b.Bytes(), nil
}

// entryEnvelope opens the metadata log's entries: sealed ones
// (integrity.Seal of Encode's), and JSON objects written before entries
// were sealed.
var entryEnvelope = integrity.Envelope{Legacy: func(b byte) bool { return b == '{' }}

// DecodeEntry decodes a log entry as the state machine does. corrupt
// reports damage: the checksum does not match, or an entry written
// before entries were sealed does not decode. A sealed entry that does
// not decode is as its proposer wrote it (rejected alike everywhere).
func DecodeEntry(data []byte) (c Command, corrupt bool, err error) {
	c, _, corrupt, err = decodeEntry(data)
	return c, corrupt, err
}

// decodeEntry is DecodeEntry that also tells whether the entry was sealed.
func decodeEntry(data []byte) (c Command, sealed, corrupt bool, err error) {
	b, sealed, err := entryEnvelope.Open(data)
	if err != nil {
		return nil, false, true, err
	}
	c, err = Decode(b)
	return c, sealed, err != nil && !sealed, err
}

// ErrLegacyEntry is why an unsealed entry after a sealed one is refused.
var ErrLegacyEntry = errors.New("an unchecksummed (legacy JSON) entry after checksummed ones")

// CheckEntry checks a log entry as a replica's start-up scan does: a
// sealed entry by its checksum, a legacy one by decoding it.
func CheckEntry(data []byte) error {
	b, sealed, err := entryEnvelope.Open(data)
	if err != nil || sealed {
		return err
	}
	_, err = Decode(b)
	return err
}

// envelope is what every entry has: its kind.
type envelope struct {
	Kind string `json:"kind"`
}

// Decode reads a log entry into the command type of its kind; an unknown
// kind decodes, for Apply to reject.
func Decode(b []byte) (Command, error) {
	var env envelope
	if err := json.Unmarshal(b, &env); err != nil {
		return nil, err
	}
	cmd, ok := commands[env.Kind]
	if !ok {
		return unknown{env.Kind}, nil
	}
	return cmd.decode(b)
}
