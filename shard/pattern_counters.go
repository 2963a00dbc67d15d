package shard

import (
	"encoding/binary"
	"fmt"

	"github.com/cepcluster/cep/nfa"
	"github.com/cepcluster/cep/snapshot"
)

// PatternCounters counts what one deployed pattern produced on the shard.
// They are replicated state, like Counters: every replica counts them
// while applying the log, and snapshots carry them (the named section
// patternCountersSection), so a replica restored from a snapshot, and a
// new leader after a failover, report the numbers the old leader did.
// They span the pattern's versions (an update keeps them) and start again
// at zero when the pattern is deleted, on the shard split off another
// (like Counters), and after restoring a snapshot written before they
// were kept.
type PatternCounters struct {
	Matches, Timeouts, Late uint64 // records produced, published or not (Deploy.Records)
	DeadLetters             uint64 // events and failures dead-lettered naming the pattern
	// condition evaluations that failed and counted as false, emitted
	// fields that failed and are null (nfa.Stats)
	ConditionErrors, EmitErrors uint64
}

// NamedPatternCounters is a pattern's counters and its partial matches.
type NamedPatternCounters struct {
	Name string
	PatternCounters
	// PartialMatches is the partial matches its matchers hold, draining
	// versions included.
	PartialMatches int
}

// PatternCounters lists every deployed pattern's counters, sorted by name.
func (s *State) PatternCounters() []NamedPatternCounters {
	out := make([]NamedPatternCounters, 0, len(s.patterns))
	for _, p := range s.patterns {
		pm := 0
		for _, m := range p.all() {
			n, _ := m.Totals()
			pm += n
		}
		out = append(out, NamedPatternCounters{Name: p.deploy.Name, PatternCounters: p.counts, PartialMatches: pm})
	}
	return out
}

// run calls the engine on m and adds the condition and emit failures it
// counts on the matcher to the pattern's counters: a matcher's own
// statistics begin again when it is built or restored, and go with a
// draining version when it ends.
func (p *patternRT) run(m *nfa.Matcher, f func(*nfa.Matcher) []nfa.Record) []nfa.Record {
	before := m.Stats()
	recs := f(m)
	after := m.Stats()
	p.counts.ConditionErrors += after.ConditionErrors - before.ConditionErrors
	p.counts.EmitErrors += after.EmitErrors - before.EmitErrors
	return recs
}

// countRecord counts a record the pattern produced.
func (p *patternRT) countRecord(typ string) {
	switch typ {
	case "match":
		p.counts.Matches++
	case "timeout":
		p.counts.Timeouts++
	case "late":
		p.counts.Late++
	}
}

// countDeadLetter counts a dead letter naming pattern ("" names none).
func (s *State) countDeadLetter(pattern string) {
	if pattern == "" {
		return
	}
	if _, p := s.find(pattern); p != nil {
		p.counts.DeadLetters++
	}
}

// patternCountersSection is the named snapshot section of the patterns'
// counters: a section of its own, so that snapshots without it (written
// before) restore with zero counts and releases that do not know it
// skip it.
const patternCountersSection = "pattern-counters"

// patternCountersVersion 1: per pattern its name, the number of values
// and the values in PatternCounters' order; a reader takes the values it
// knows and skips the others, so later versions may append some.
const patternCountersVersion = 1

func (c *PatternCounters) values() []*uint64 {
	return []*uint64{&c.Matches, &c.Timeouts, &c.Late, &c.DeadLetters, &c.ConditionErrors, &c.EmitErrors}
}

func (s *State) appendPatternCounters(b []byte) []byte {
	b = append(b, patternCountersVersion)
	b = binary.AppendUvarint(b, uint64(len(s.patterns)))
	for _, p := range s.patterns {
		b = appendString(b, p.deploy.Name)
		vs := p.counts.values()
		b = binary.AppendUvarint(b, uint64(len(vs)))
		for _, v := range vs {
			b = binary.AppendUvarint(b, *v)
		}
	}
	return b
}

func (s *State) writePatternCounters(sw *snapshot.Writer) error {
	return sw.Named(patternCountersSection, s.appendPatternCounters(nil))
}

// restorePatternCounters sets the counters of the deployed patterns from
// the snapshot's section, if it has one.
func (s *State) restorePatternCounters(r *snapshot.Reader) error {
	sec, err := r.Named(patternCountersSection)
	if err != nil || sec == nil {
		return err
	}
	d := &dec{b: sec}
	if v := d.byte(); d.err == nil && v != patternCountersVersion {
		return fmt.Errorf("%w: %s section version %d", ErrBadBatch, patternCountersSection, v)
	}
	n := d.count()
	for i := 0; i < n && d.err == nil; i++ {
		name := d.string()
		var c PatternCounters
		vs := c.values()
		k := d.count()
		for j := 0; j < k && d.err == nil; j++ {
			v := d.uvarint()
			if j < len(vs) {
				*vs[j] = v
			}
		}
		if _, p := s.find(name); p != nil && d.err == nil {
			p.counts = c
		}
	}
	if d.err == nil && len(d.b) != 0 {
		return fmt.Errorf("%w: %s section has %d trailing bytes", ErrBadBatch, patternCountersSection, len(d.b))
	}
	if d.err != nil {
		return fmt.Errorf("%s section: %w", patternCountersSection, d.err)
	}
	return nil
}

// zeroPatternCounters starts every pattern's counters again (a shard split
// off another counts from zero).
func (s *State) zeroPatternCounters() {
	for _, p := range s.patterns {
		p.counts = PatternCounters{}
	}
}
