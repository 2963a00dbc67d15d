package shard

import (
	"encoding/binary"
	"fmt"
	"io"
	"sort"

	"github.com/cepcluster/cep/keygroup"
	"github.com/cepcluster/cep/nfa"
	"github.com/cepcluster/cep/snapshot"
)

// A shard's state is written in the snapshot package's format, so that a
// Raft snapshot of a shard is also a savepoint fragment, and any set of
// them restores into any shard layout:
//
//   - the named section "shard" holds what belongs to the shard as a whole:
//     the outbox, and per pattern its deployment and each matcher's
//     key-independent state (watermark, draining flag);
//   - one section per key group holds that group's applied source
//     positions and, per pattern and draining version, the state of the keys
//     that hash into it.

const shardSection = "shard"

// sectionVersion 4: the shard section holds the re-keyed (forwarded)
// positions. 5: a key group's section says which version of the engine's
// state encoding its keys are in (nfa.StateVersion; a version-4 section's
// keys are in version 2), since the key groups of a restore can come from
// files written by different releases while the matchers come from the
// first file's headers.
const sectionVersion = 5

// sectionVersionKeys2 is the last section version without the keys'
// encoding version, which was 2.
const sectionVersionKeys2 = 4

// WriteSnapshot writes the state in the snapshot format. h supplies the
// identity fields (id, kind, cluster, index, logged time); the key-group
// range is the state's own.
func (s *State) WriteSnapshot(w io.Writer, h snapshot.Header, opts ...snapshot.WriterOption) error {
	h.KeyGroups, h.FirstKeyGroup, h.LastKeyGroup = s.groups, s.first, s.last
	for _, p := range s.patterns {
		h.Patterns = append(h.Patterns, snapshot.Pattern{Name: p.deploy.Name, Version: int64(p.deploy.Version), Spec: string(p.deploy.Spec)})
	}
	sw, err := snapshot.NewWriter(w, h, opts...)
	if err != nil {
		return err
	}
	if err := sw.Named(shardSection, s.appendShardSection(nil)); err != nil {
		return err
	}
	if err := s.writePatternCounters(sw); err != nil {
		return err
	}
	if err := s.writeStrict(sw); err != nil {
		return err
	}
	// group every matcher's keys by key group once
	type km struct {
		name    string
		version uint64
		m       *nfa.Matcher
		keys    map[int][]string
	}
	var matchers []km
	for _, p := range s.patterns {
		for i, m := range p.all() {
			byKG := map[int][]string{}
			for _, k := range m.SortedKeys() {
				kg := keygroup.OfKey(k, s.groups)
				byKG[kg] = append(byKG[kg], k)
			}
			v := p.deploy.Version
			if i > 0 {
				v = p.draining[i-1].version
			}
			matchers = append(matchers, km{p.deploy.Name, v, m, byKG})
		}
	}
	for kg := s.first; kg <= s.last; kg++ {
		pos := s.positions[kg-s.first]
		empty := len(pos) == 0
		for _, x := range matchers {
			if len(x.keys[kg]) > 0 {
				empty = false
			}
		}
		if empty {
			continue
		}
		var b []byte
		b = append(b, sectionVersion, nfa.StateVersion)
		srcs := make([]string, 0, len(pos))
		for src := range pos {
			srcs = append(srcs, src)
		}
		sort.Strings(srcs)
		b = binary.AppendUvarint(b, uint64(len(srcs)))
		for _, src := range srcs {
			b = appendString(b, src)
			b = binary.AppendUvarint(b, pos[src])
		}
		var nonEmpty []km
		for _, x := range matchers {
			if len(x.keys[kg]) > 0 {
				nonEmpty = append(nonEmpty, x)
			}
		}
		b = binary.AppendUvarint(b, uint64(len(nonEmpty)))
		for _, x := range nonEmpty {
			b = appendString(b, x.name)
			b = binary.AppendUvarint(b, x.version)
			var blk []byte
			keys := x.keys[kg]
			blk = binary.AppendUvarint(blk, uint64(len(keys)))
			for _, k := range keys {
				blk = x.m.AppendKey(blk, k)
			}
			b = appendBytes(b, blk)
		}
		if err := sw.KeyGroup(kg, b); err != nil {
			return err
		}
	}
	return sw.Close()
}

// all returns the pattern's current matcher followed by its draining ones.
func (p *patternRT) all() []*nfa.Matcher {
	out := []*nfa.Matcher{p.m}
	for _, d := range p.draining {
		out = append(out, d.m)
	}
	return out
}

func (s *State) appendShardSection(b []byte) []byte {
	b = append(b, sectionVersion)
	b = appendString(b, s.restoreID)
	c := &s.counters
	for _, v := range []uint64{c.Events, c.Duplicates, c.DeadLetters, c.Misrouted, c.Matches, c.Timeouts, c.Late, c.PatternFails} {
		b = binary.AppendUvarint(b, v)
	}
	b = binary.AppendUvarint(b, s.nextSeq)
	b = binary.AppendUvarint(b, uint64(len(s.outbox)))
	for _, r := range s.outbox {
		b = binary.AppendUvarint(b, r.Seq)
		b = appendString(b, r.ID)
		b = appendString(b, r.Subject)
		b = appendBytes(b, r.Payload)
		b = binary.AppendUvarint(b, uint64(r.KeyGroup))
	}
	fw := make([]string, 0, len(s.forwarded))
	for k := range s.forwarded {
		fw = append(fw, k)
	}
	sort.Strings(fw)
	b = binary.AppendUvarint(b, uint64(len(fw)))
	for _, k := range fw {
		b = appendString(b, k)
		b = binary.AppendUvarint(b, s.forwarded[k])
	}
	b = binary.AppendUvarint(b, uint64(len(s.patterns)))
	for _, p := range s.patterns {
		bt := Batch{Ops: []Op{&p.deploy}}
		b = appendBytes(b, bt.Encode(nil))
		b = appendBytes(b, p.m.AppendHeader(nil))
		b = binary.AppendUvarint(b, uint64(len(p.draining)))
		for _, d := range p.draining {
			b = binary.AppendUvarint(b, d.version)
			b = appendBytes(b, d.m.AppendHeader(nil))
		}
	}
	return b
}

// RestoreState rebuilds the state of a shard owning [first, last] from one
// or more snapshot files covering that range (its own Raft snapshot, or the
// files of a savepoint taken under another shard layout). Shard-level state
// (deployments, watermarks, outbox) comes from every file: deployments and
// watermarks from the first, outboxes merged, so records not yet published
// before the savepoint are published after the restore.
func RestoreState(readers []*snapshot.Reader, first, last int) (*State, error) {
	if len(readers) == 0 {
		return nil, fmt.Errorf("shard: no snapshot to restore")
	}
	groups := readers[0].Header().KeyGroups
	s := NewState(first, last, groups)
	for i, r := range readers {
		sec, err := r.Named(shardSection)
		if err != nil {
			return nil, err
		}
		if sec == nil {
			return nil, fmt.Errorf("shard: snapshot %q has no shard section", r.Header().ID)
		}
		if err := s.readShardSection(sec, i == 0); err != nil {
			return nil, fmt.Errorf("shard: snapshot %q: %w", r.Header().ID, err)
		}
	}
	// like Counters, from the first file
	if err := s.restorePatternCounters(readers[0]); err != nil {
		return nil, fmt.Errorf("shard: snapshot %q: %w", readers[0].Header().ID, err)
	}
	if err := s.restoreStrict(readers[0]); err != nil {
		return nil, fmt.Errorf("shard: snapshot %q: %w", readers[0].Header().ID, err)
	}
	err := snapshot.ForEachKeyGroup(readers, first, last, func(kg int, payload []byte) error {
		return s.readKeyGroup(kg, payload)
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

func (s *State) readShardSection(b []byte, first bool) error {
	d := &dec{b: b}
	if v := d.byte(); v != sectionVersion && v != sectionVersionKeys2 {
		return fmt.Errorf("%w: shard section version %d", ErrBadBatch, v)
	}
	restoreID := d.string()
	var cnt [8]uint64
	for i := range cnt {
		cnt[i] = d.uvarint()
	}
	if first {
		s.restoreID = restoreID
		// counters are derived from the log, so they are replicated state
		// too: a replica restored from a snapshot reports the same numbers
		s.counters = Counters{Events: cnt[0], Duplicates: cnt[1], DeadLetters: cnt[2], Misrouted: cnt[3],
			Matches: cnt[4], Timeouts: cnt[5], Late: cnt[6], PatternFails: cnt[7]}
	}
	nextSeq := d.uvarint()
	n := d.count()
	for i := 0; i < n && d.err == nil; i++ {
		r := OutRecord{Seq: d.uvarint(), ID: d.string(), Subject: d.string(), Payload: d.bytes(), KeyGroup: int(d.uvarint())}
		if r.KeyGroup < s.first || r.KeyGroup > s.last {
			continue // another shard publishes it
		}
		if !first {
			r.Seq = 0 // re-sequenced below
		}
		s.outbox = append(s.outbox, r)
	}
	// the shard that re-keys a source may be another one after a restore
	// into another layout: every shard takes the furthest position
	nf := d.count()
	for i := 0; i < nf && d.err == nil; i++ {
		k, v := d.string(), d.uvarint()
		s.forwarded[k] = max(s.forwarded[k], v)
	}
	np := d.count()
	for i := 0; i < np && d.err == nil; i++ {
		bt, err := DecodeBatch(d.bytes())
		if d.err != nil {
			break
		}
		var dp *Deploy
		if err == nil && len(bt.Ops) == 1 {
			dp, _ = bt.Ops[0].(*Deploy)
		}
		if dp == nil {
			return fmt.Errorf("%w: bad deployment", ErrBadBatch)
		}
		hdr := d.bytes()
		nd := d.count()
		type dr struct {
			v   uint64
			hdr []byte
		}
		var drs []dr
		for j := 0; j < nd && d.err == nil; j++ {
			drs = append(drs, dr{d.uvarint(), d.bytes()})
		}
		if d.err != nil || !first {
			continue
		}
		p, err := nfa.CompileNamed(dp.Spec, dp.Name)
		if err != nil {
			return fmt.Errorf("pattern %s version %d no longer compiles: %w", dp.Name, dp.Version, err)
		}
		m, err := nfa.UnmarshalHeader(p, hdr)
		if err != nil {
			return err
		}
		rt := &patternRT{deploy: *dp, pattern: p, m: dp.configure(m)}
		for _, x := range drs {
			dm, err := nfa.UnmarshalHeader(p, x.hdr)
			if err != nil {
				return err
			}
			rt.draining = append(rt.draining, &drainingRT{version: x.v, m: dp.configure(dm)})
		}
		s.patterns = append(s.patterns, rt)
	}
	if d.err != nil {
		return d.err
	}
	if first {
		s.nextSeq = nextSeq
	} else {
		for i := range s.outbox {
			if s.outbox[i].Seq == 0 {
				s.outbox[i].Seq = s.nextSeq
				s.nextSeq++
			}
		}
	}
	return nil
}

func (s *State) readKeyGroup(kg int, b []byte) error {
	d := &dec{b: b}
	keys := byte(2) // the encoding version of the keys
	switch v := d.byte(); v {
	case sectionVersion:
		keys = d.byte()
	case sectionVersionKeys2:
	default:
		return fmt.Errorf("%w: key group %d version %d", ErrBadBatch, kg, v)
	}
	n := d.count()
	pos := s.positions[kg-s.first]
	for i := 0; i < n && d.err == nil; i++ {
		src := d.string()
		pos[src] = d.uvarint()
	}
	if d.err != nil {
		return d.err
	}
	nm := d.count()
	for i := 0; i < nm && d.err == nil; i++ {
		name, version, blk := d.string(), d.uvarint(), d.bytes()
		if d.err != nil {
			break
		}
		m := s.matcherOf(name, version)
		if m == nil {
			continue // a version this state does not run (deleted or superseded)
		}
		bd := &dec{b: blk}
		nk := bd.count()
		rest := bd.b
		if bd.err != nil {
			return fmt.Errorf("key group %d: %w", kg, bd.err)
		}
		for j := 0; j < nk; j++ {
			var err error
			if rest, err = m.RestoreKeyVersion(rest, keys); err != nil {
				return fmt.Errorf("key group %d: %w", kg, err)
			}
		}
		if len(rest) != 0 {
			return fmt.Errorf("%w: key group %d: %d trailing bytes", ErrBadBatch, kg, len(rest))
		}
	}
	if d.err == nil && len(d.b) != 0 {
		return fmt.Errorf("%w: key group %d has %d trailing bytes", ErrBadBatch, kg, len(d.b))
	}
	return d.err
}

func (s *State) matcherOf(name string, version uint64) *nfa.Matcher {
	_, p := s.find(name)
	if p == nil {
		return nil
	}
	if p.deploy.Version == version {
		return p.m
	}
	for _, d := range p.draining {
		if d.version == version {
			return d.m
		}
	}
	return nil
}
