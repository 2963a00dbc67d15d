package shard

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/cepcluster/cep/internal/varint"
	"github.com/cepcluster/cep/nfa"
)

// A Batch is the payload of one Raft log entry: everything the shard leader
// proposes (events read from the sources with their positions, watermark
// advances, processing-time ticks, pattern changes, outbox truncations) in the
// order the state machine must apply it. A batch carries many events, never
// just one: one entry per event would cap throughput at the Raft commit rate.
type Batch struct {
	Ops []Op
}

// OpKind tells what an Op does.
type OpKind uint8

// Op kinds. Values are part of the log format: never renumber.
const (
	OpEvents    OpKind = 1 // Events read from one source
	OpWatermark OpKind = 2 // explicit watermark for one pattern (idle sources, alignment)
	OpTick      OpKind = 3 // processing time advances to Time
	OpDeploy    OpKind = 4 // deploy or update a pattern
	OpDelete    OpKind = 5 // delete a pattern
	OpAck       OpKind = 6 // outbox records up to Seq are published
	OpForward   OpKind = 7 // Events of Source to re-key into the derived source Target
	// OpSkip: the events of Source up to stream position Seq are not read —
	// published before a pattern that starts reading the source was
	// deployed. Without Target, every key group's position of Source is
	// set to Seq; with Target, the position up to which Source has been
	// forwarded into the derived source Target (State.skip).
	OpSkip OpKind = 8
	// OpSplit: the shard hands key groups [Split.At, last] to a new shard
	// (State.split): every replica makes the new shard's first state from
	// its own at this point of the log.
	OpSplit OpKind = 9
	// OpClock: the clock of Source (the pattern's name for it) across the
	// shards reached Time for Pattern (State.clock): the combined
	// watermark its leader logs, so that every replica applies the same.
	OpClock OpKind = 10
	// OpClockMode: Pattern runs on its sources' clocks across the shards
	// (On) or on this shard's own events (a shard alone, exactly as
	// `cepctl run`): the leader logs it as the shard map changes.
	OpClockMode OpKind = 11
)

// Split is an OpSplit: the key group the new shard starts at, its id, and
// the members it starts with (this shard's voters, as "id=raftaddr").
type Split struct {
	At      int
	Shard   uint64
	Members []string
}

// Op is one operation of a batch. Which fields matter depends on Kind.
type Op struct {
	Kind    OpKind
	Source  string  // OpEvents, OpClock
	Events  []Event // OpEvents
	Pattern string  // OpWatermark, OpDeploy, OpDelete, OpClock
	Time    int64   // OpWatermark, OpTick, OpClock
	Deploy  *Deploy // OpDeploy
	Seq     uint64  // OpAck, OpSkip
	Target  string  // OpForward, OpSkip: the derived source
	Split   *Split  // OpSplit
	On      bool    // OpClockMode
	// After, for OpEvents and OpForward, is the position the entry's
	// reader read after: the last of its entry before, or where it
	// started. An entry is refused when the shard has not applied the
	// source up to there (an entry in between was not applied): its
	// events would be skipped as read. 0: not checked.
	After uint64
	// Ingest, for OpEvents and OpForward, is the leader's wall clock when
	// it built the entry (Unix milliseconds): an event more than its
	// pattern's maxFutureSkew ahead of it is dead-lettered
	// (nfa.Matcher.CheckTimeAt), a bound no event can move. 0: not
	// logged (entries before batch version 8).
	Ingest int64
}

// Event is one message read from a source stream.
type Event struct {
	Pos   uint64 // stream sequence
	Block int    // the block of key groups the stream stored it under (keygroup.BlockOfSubject), -1 if none
	Data  []byte // JSON payload
	// OriginPos, for an event of a derived (re-keyed) source, is its
	// position in the source it was forwarded from; 0 otherwise.
	OriginPos uint64
}

// UpdatePolicy says what happens to in-flight partial matches when a
// pattern is replaced by a new version.
type UpdatePolicy uint8

// Update policies.
const (
	PolicyReset   UpdatePolicy = 0 // drop them
	PolicyDrain   UpdatePolicy = 1 // the old version finishes them, the new one starts fresh
	PolicyMigrate UpdatePolicy = 2 // keep them where the automaton is unchanged, else reset
)

// Deploy deploys a pattern version.
type Deploy struct {
	Name    string
	Version uint64
	Spec    []byte   // pattern-v1 document
	Sources []string // sources it reads, as the pattern names them
	Subject string   // where its records are published
	Policy  UpdatePolicy
	// Reads, when set, parallels Sources with the streams read instead: a
	// source partitioned by another key than the pattern's is read through
	// its derived source (re-keyed by the pattern's key).
	Reads []string
	// MaxPartialMatches is the matchers' bound on partial matches per key
	// (nfa.Matcher.MaxPartialMatches): 0 for nfa's default, negative for
	// none.
	MaxPartialMatches int64
	// MaxKeys bounds the keys the pattern holds state for on this shard:
	// 0 for DefaultMaxKeys, negative for none. An event of a new key past
	// it is dead-lettered (State.applyEvents).
	MaxKeys int64
	// MaxStateBytes bounds the raw bytes of the events the pattern's
	// matchers hold on this shard (nfa.Matcher.StateBytes): 0 for
	// DefaultMaxStateBytes, negative for none. An event that would take
	// them past it is dead-lettered (State.applyEvents).
	MaxStateBytes int64
	// Records are the record types put in the outbox (RecordMatch, ...);
	// 0 for all of them. The others are counted and dropped.
	Records RecordTypes
	// Clock: the pattern's watermark is its sources' clocks across the
	// shards (OpClock), not this shard's events (nfa.Matcher.Clocked).
	// Deployments logged before batch version 6 have it false and keep
	// the watermark of the shard's own events.
	Clock bool
}

// RecordTypes is a set of output record types.
type RecordTypes uint8

// Record types.
const (
	RecordMatch   RecordTypes = 1 << iota // "match"
	RecordTimeout                         // "timeout"
	RecordLate                            // "late"
)

// recordTypeNames are the record types' names (nfa.Record.Type) by bit.
var recordTypeNames = [...]string{"match", "timeout", "late"}

// RecordTypesOf returns the set of the named record types; unknown names
// are left out.
func RecordTypesOf(names []string) RecordTypes {
	var out RecordTypes
	for i, n := range recordTypeNames {
		if slices.Contains(names, n) {
			out |= 1 << i
		}
	}
	return out
}

// has reports whether the set holds the record type typ (an empty set
// holds every type).
func (rt RecordTypes) has(typ string) bool {
	if rt == 0 {
		return true // the usual case, decided without looking up the name
	}
	i := slices.Index(recordTypeNames[:], typ)
	return i < 0 || rt&(1<<i) != 0
}

// DefaultMaxKeys is the bound on keys per pattern and shard of a
// deployment that sets none (Deploy.MaxKeys 0): at a few kilobytes of
// state per key, a few hundred megabytes.
const DefaultMaxKeys = 100_000

// DefaultMaxStateBytes is the bound on the bytes of events a pattern
// holds per shard of a deployment that sets none (Deploy.MaxStateBytes 0).
const DefaultMaxStateBytes = 256 << 20

// maxStateBytes is the deployment's bound on bytes held (0: none).
func (d *Deploy) maxStateBytes() int64 {
	switch {
	case d.MaxStateBytes > 0:
		return d.MaxStateBytes
	case d.MaxStateBytes < 0:
		return 0
	}
	return DefaultMaxStateBytes
}

// maxKeys is the deployment's bound on keys (0: none).
func (d *Deploy) maxKeys() int {
	switch {
	case d.MaxKeys > 0:
		return int(d.MaxKeys)
	case d.MaxKeys < 0:
		return 0
	}
	return DefaultMaxKeys
}

// configure gives a matcher of the deployment (or a previous version's
// still draining) the deployment's bound and whether it builds timeout
// records, whatever it had: a replica restored from a snapshot and one
// that applied the log must agree.
func (d *Deploy) configure(m *nfa.Matcher) *nfa.Matcher {
	cfg := nfa.DefaultConfig()
	cfg.AutoWatermark = m.Config().AutoWatermark
	switch {
	case d.MaxPartialMatches > 0:
		cfg.MaxPartialMatches = int(d.MaxPartialMatches)
	case d.MaxPartialMatches < 0:
		cfg.MaxPartialMatches = 0
	}
	// timeouts not published are not built (still counted)
	cfg.ReportTimeouts = d.Records.has("timeout")
	cfg.Clocked = d.Clock
	cfg.MaxKeys, cfg.MaxStateBytes = d.maxKeys(), d.maxStateBytes()
	m.Configure(cfg)
	return m
}

// batchVersion 9: deployments carry the bound on bytes held (8, still
// read: entries of events carry their ingest time; 7, still
// read: entries of events carry the position their reader read after; 6,
// still read: OpClock and OpClockMode exist and deployments say whether
// they run on the clock; 5, still read: deployments carry the
// bound on keys; 4, still read: deployments carry the bound on partial
// matches and the record types published; 3, still read: deployments
// carry the sources read, events their origin position, OpForward and
// OpSkip exist; 2: events carry their block; 1 carried a key group).
const batchVersion = 9

// ErrBadBatch is returned for a log entry that cannot be decoded.
var ErrBadBatch = errors.New("shard: bad batch encoding")

// Encode appends the batch's binary form to b.
func (bt *Batch) Encode(b []byte) []byte {
	b = append(b, batchVersion)
	b = binary.AppendUvarint(b, uint64(len(bt.Ops)))
	for i := range bt.Ops {
		op := &bt.Ops[i]
		b = append(b, byte(op.Kind))
		switch op.Kind {
		case OpEvents, OpForward:
			b = appendString(b, op.Source)
			if op.Kind == OpForward {
				b = appendString(b, op.Target)
			}
			b = binary.AppendUvarint(b, op.After)
			b = binary.AppendVarint(b, op.Ingest)
			b = binary.AppendUvarint(b, uint64(len(op.Events)))
			for _, e := range op.Events {
				b = binary.AppendUvarint(b, e.Pos)
				b = binary.AppendVarint(b, int64(e.Block))
				b = appendBytes(b, e.Data)
				b = binary.AppendUvarint(b, e.OriginPos)
			}
		case OpWatermark:
			b = appendString(b, op.Pattern)
			b = binary.AppendVarint(b, op.Time)
		case OpTick:
			b = binary.AppendVarint(b, op.Time)
		case OpDeploy:
			d := op.Deploy
			b = appendString(b, d.Name)
			b = binary.AppendUvarint(b, d.Version)
			b = appendBytes(b, d.Spec)
			b = binary.AppendUvarint(b, uint64(len(d.Sources)))
			for _, s := range d.Sources {
				b = appendString(b, s)
			}
			b = appendString(b, d.Subject)
			b = append(b, byte(d.Policy))
			b = binary.AppendUvarint(b, uint64(len(d.Reads)))
			for _, r := range d.Reads {
				b = appendString(b, r)
			}
			b = binary.AppendVarint(b, d.MaxPartialMatches)
			b = append(b, byte(d.Records))
			b = binary.AppendVarint(b, d.MaxKeys)
			b = append(b, boolByte(d.Clock))
			b = binary.AppendVarint(b, d.MaxStateBytes)
		case OpClock:
			b = appendString(b, op.Pattern)
			b = appendString(b, op.Source)
			b = binary.AppendVarint(b, op.Time)
		case OpClockMode:
			b = appendString(b, op.Pattern)
			b = append(b, boolByte(op.On))
		case OpDelete:
			b = appendString(b, op.Pattern)
		case OpAck:
			b = binary.AppendUvarint(b, op.Seq)
		case OpSkip:
			b = appendString(b, op.Source)
			b = appendString(b, op.Target)
			b = binary.AppendUvarint(b, op.Seq)
		case OpSplit:
			sp := op.Split
			if sp == nil {
				sp = &Split{}
			}
			b = binary.AppendUvarint(b, uint64(sp.At))
			b = binary.AppendUvarint(b, sp.Shard)
			b = binary.AppendUvarint(b, uint64(len(sp.Members)))
			for _, m := range sp.Members {
				b = appendString(b, m)
			}
		}
	}
	return b
}

// DecodeBatch decodes a log entry.
func DecodeBatch(data []byte) (*Batch, error) {
	d := &dec{b: data}
	version := d.byte()
	if version < 3 || version > batchVersion {
		return nil, fmt.Errorf("%w: version %d", ErrBadBatch, version)
	}
	n := d.count()
	bt := &Batch{Ops: make([]Op, 0, n)}
	for i := 0; i < n && d.err == nil; i++ {
		op := Op{Kind: OpKind(d.byte())}
		switch op.Kind {
		case OpEvents, OpForward:
			op.Source = d.string()
			if op.Kind == OpForward {
				op.Target = d.string()
			}
			if version >= 7 {
				op.After = d.uvarint()
			}
			if version >= 8 {
				op.Ingest = d.varint()
			}
			ne := d.count()
			op.Events = make([]Event, 0, ne)
			for j := 0; j < ne && d.err == nil; j++ {
				op.Events = append(op.Events, Event{Pos: d.uvarint(), Block: int(d.varint()), Data: d.bytes(), OriginPos: d.uvarint()})
			}
		case OpWatermark:
			op.Pattern = d.string()
			op.Time = d.varint()
		case OpTick:
			op.Time = d.varint()
		case OpDeploy:
			dp := &Deploy{Name: d.string(), Version: d.uvarint(), Spec: d.bytes()}
			ns := d.count()
			for j := 0; j < ns && d.err == nil; j++ {
				dp.Sources = append(dp.Sources, d.string())
			}
			dp.Subject = d.string()
			dp.Policy = UpdatePolicy(d.byte())
			nr := d.count()
			for j := 0; j < nr && d.err == nil; j++ {
				dp.Reads = append(dp.Reads, d.string())
			}
			if version >= 4 {
				dp.MaxPartialMatches, dp.Records = d.varint(), RecordTypes(d.byte())
			}
			if version >= 5 {
				dp.MaxKeys = d.varint()
			}
			if version >= 6 {
				switch d.byte() {
				case 0:
				case 1:
					dp.Clock = true
				default:
					if d.err == nil {
						d.err = fmt.Errorf("%w: bad clock flag", ErrBadBatch)
					}
				}
			}
			if version >= 9 {
				dp.MaxStateBytes = d.varint()
			}
			op.Deploy = dp
		case OpClock:
			if version < 6 && d.err == nil {
				d.err = fmt.Errorf("%w: clock op in version %d", ErrBadBatch, version)
			}
			op.Pattern, op.Source, op.Time = d.string(), d.string(), d.varint()
		case OpClockMode:
			if version < 6 && d.err == nil {
				d.err = fmt.Errorf("%w: clock op in version %d", ErrBadBatch, version)
			}
			op.Pattern = d.string()
			switch d.byte() {
			case 0:
			case 1:
				op.On = true
			default:
				if d.err == nil {
					d.err = fmt.Errorf("%w: bad clock flag", ErrBadBatch)
				}
			}
		case OpDelete:
			op.Pattern = d.string()
		case OpAck:
			op.Seq = d.uvarint()
		case OpSkip:
			op.Source, op.Target, op.Seq = d.string(), d.string(), d.uvarint()
		case OpSplit:
			sp := &Split{At: int(d.uvarint()), Shard: d.uvarint()}
			n := d.count()
			for j := 0; j < n && d.err == nil; j++ {
				sp.Members = append(sp.Members, d.string())
			}
			op.Split = sp
		default:
			if d.err == nil {
				d.err = fmt.Errorf("%w: unknown op %d", ErrBadBatch, op.Kind)
			}
		}
		bt.Ops = append(bt.Ops, op)
	}
	if d.err == nil && len(d.b) > 0 {
		d.err = fmt.Errorf("%w: %d trailing bytes", ErrBadBatch, len(d.b))
	}
	if d.err != nil {
		return nil, d.err
	}
	return bt, nil
}

func boolByte(v bool) byte {
	if v {
		return 1
	}
	return 0
}

func appendBytes(b, v []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

type dec struct {
	b   []byte
	err error
}

func (d *dec) fail() {
	if d.err == nil {
		d.err = fmt.Errorf("%w: truncated", ErrBadBatch)
	}
}

func (d *dec) byte() byte {
	if d.err != nil || len(d.b) == 0 {
		d.fail()
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *dec) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := varint.Uvarint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *dec) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := varint.Varint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *dec) count() int {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.fail()
		return 0
	}
	return int(n)
}

func (d *dec) bytes() []byte {
	n := d.count()
	if d.err != nil {
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *dec) string() string { return string(d.bytes()) }
