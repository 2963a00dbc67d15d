package shard

import (
	"encoding/binary"
	"slices"

	"github.com/cepcluster/cep/nfa"
)

// UpdatePolicy says what happens to in-flight partial matches when a
// pattern is replaced by a new version.
type UpdatePolicy uint8

// Update policies.
const (
	PolicyReset   UpdatePolicy = 0 // drop them
	PolicyDrain   UpdatePolicy = 1 // the old version finishes them, the new one starts fresh
	PolicyMigrate UpdatePolicy = 2 // keep them where the automaton is unchanged, else reset
)

// Deploy (an op of kind OpDeploy) deploys a pattern version: a pattern
// not deployed starts; a deployed one is replaced by Policy (State.deploy).
type Deploy struct {
	Name string
	// Version is the pattern's version in the metadata: the records'
	// ids carry it (RecordID), and an older version draining keeps its
	// own.
	Version uint64
	// Spec is the pattern's document or MATCH_RECOGNIZE query
	// (nfa.CompileNamed). One that does not compile is counted as a
	// pattern failure and deploys nothing, on every replica alike.
	Spec []byte
	// Sources are the sources it reads, as the pattern names them; the
	// first names the dead-letter subject of its failures on entries that
	// carry none of its events (State.engineFailed).
	Sources []string
	Subject string // where its records are published
	// Policy says what becomes of the partial matches of the version it
	// replaces; unused for a pattern not deployed.
	Policy UpdatePolicy
	// Reads, when set, parallels Sources with the sources read instead
	// ("": the source itself): a source partitioned by another key than
	// the pattern's is read through its derived source (re-keyed by the
	// pattern's key), which Reads names.
	Reads []string
	// MaxPartialMatches is the matchers' bound on partial matches per key
	// (nfa.Matcher.MaxPartialMatches): 0 for nfa's default (as in
	// entries before batch version 4), negative for none.
	MaxPartialMatches int64
	// MaxKeys bounds the keys the pattern holds state for on this shard:
	// 0 for DefaultMaxKeys (as in entries before batch version 5),
	// negative for none. An event of a new key past
	// it is dead-lettered (State.applyEvents).
	MaxKeys int64
	// MaxStateBytes bounds the raw bytes of the events the pattern's
	// matchers hold on this shard (nfa.Matcher.StateBytes): 0 for
	// DefaultMaxStateBytes (as in entries before batch version 9),
	// negative for none. An event that would take
	// them past it is dead-lettered (State.applyEvents).
	MaxStateBytes int64
	// Records are the record types put in the outbox (RecordMatch, ...);
	// 0 for all of them (as in entries before batch version 4). The
	// others are counted and dropped.
	Records RecordTypes
	// Clock: the pattern's watermark is its sources' clocks across the
	// shards (OpClock), not this shard's events (nfa.Matcher.Clocked).
	// Deployments logged before batch version 6 have it false and keep
	// the watermark of the shard's own events. ClockModeOp switches it.
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

// DeleteOp deletes Pattern, its draining versions with it; a pattern not
// deployed changes nothing.
type DeleteOp struct {
	Pattern string
}

func (*Deploy) Kind() OpKind  { return OpDeploy }
func (DeleteOp) Kind() OpKind { return OpDelete }

func (d *Deploy) appendTo(b []byte) []byte {
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
	return b
}

// decodeDeploy reads a deployment as the entry's version wrote it: each
// version appended its fields after the older ones'.
func decodeDeploy(d *dec, version byte) *Deploy {
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
		dp.Clock = d.clockFlag()
	}
	if version >= 9 {
		dp.MaxStateBytes = d.varint()
	}
	return dp
}

func (op DeleteOp) appendTo(b []byte) []byte { return appendString(b, op.Pattern) }

func decodeDeleteOp(d *dec, _ byte) DeleteOp { return DeleteOp{Pattern: d.string()} }

func (s *State) applyDeploy(d *Deploy) error {
	s.deploy(d)
	return nil
}

func (s *State) applyDeleteOp(op DeleteOp) error {
	if i, p := s.find(op.Pattern); p != nil {
		s.patterns = append(s.patterns[:i], s.patterns[i+1:]...)
	}
	return nil
}
