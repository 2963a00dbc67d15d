package shard

import (
	"encoding/binary"
	"fmt"

	"github.com/cepcluster/cep/nfa"
)

// WatermarkOp moves the watermark of every version of Pattern (the
// draining ones too) to Time (nfa.Matcher.Watermark); a watermark that
// does not advance, or a pattern not deployed, changes nothing. The
// cluster proposes none: a pattern's watermark follows its events, or its
// sources' clocks (ClockOp).
type WatermarkOp struct {
	Pattern string
	// Time is in the pattern's time: event time, or processing time for
	// a pattern without a time expression.
	Time int64
}

// TickOp: processing time is Time (the leader's wall clock, Unix
// milliseconds), logged while some pattern needs it (State.NeedsTicks):
// the patterns without event time run on it, and those aligning several
// sources tell idle sources by it (nfa.Matcher.Tick).
type TickOp struct {
	Time int64
}

// ClockOp: the clock of Source across the shards reached Time for Pattern
// (State.clock), the combined watermark the leader logs so that every
// replica applies the same. It moves the watermark of a pattern running on
// the clock (Deploy.Clock) that reads Source; for another, it changes
// nothing. Batch version 6 on.
type ClockOp struct {
	Pattern string
	Source  string // the source by the pattern's name for it (Deploy.Sources)
	Time    int64  // the combined watermark, in the source's event time
}

// ClockModeOp: Pattern runs on its sources' clocks across the shards (On)
// or on this shard's own events, as `cepctl run` does (a shard alone):
// the leader logs it as the shard map changes. Switched off, the events
// already read may complete matches at once (nfa.Matcher.Unclock). Batch
// version 6 on.
type ClockModeOp struct {
	Pattern string
	On      bool
}

func (WatermarkOp) Kind() OpKind { return OpWatermark }
func (TickOp) Kind() OpKind      { return OpTick }
func (ClockOp) Kind() OpKind     { return OpClock }
func (ClockModeOp) Kind() OpKind { return OpClockMode }

func (op WatermarkOp) appendTo(b []byte) []byte {
	b = appendString(b, op.Pattern)
	return binary.AppendVarint(b, op.Time)
}

func decodeWatermarkOp(d *dec, _ byte) WatermarkOp {
	return WatermarkOp{Pattern: d.string(), Time: d.varint()}
}

func (op TickOp) appendTo(b []byte) []byte { return binary.AppendVarint(b, op.Time) }

func decodeTickOp(d *dec, _ byte) TickOp { return TickOp{Time: d.varint()} }

func (op ClockOp) appendTo(b []byte) []byte {
	b = appendString(b, op.Pattern)
	b = appendString(b, op.Source)
	return binary.AppendVarint(b, op.Time)
}

func decodeClockOp(d *dec, version byte) ClockOp {
	clockOpSince(d, version)
	return ClockOp{Pattern: d.string(), Source: d.string(), Time: d.varint()}
}

func (op ClockModeOp) appendTo(b []byte) []byte {
	b = appendString(b, op.Pattern)
	return append(b, boolByte(op.On))
}

func decodeClockModeOp(d *dec, version byte) ClockModeOp {
	clockOpSince(d, version)
	return ClockModeOp{Pattern: d.string(), On: d.clockFlag()}
}

// clockOpSince refuses a clock op in an entry of a version before 6,
// which had none.
func clockOpSince(d *dec, version byte) {
	if version < 6 && d.err == nil {
		d.err = fmt.Errorf("%w: clock op in version %d", ErrBadBatch, version)
	}
}

func (s *State) applyWatermarkOp(op WatermarkOp) error {
	if _, p := s.find(op.Pattern); p != nil {
		s.engineFailed(p, s.emitAll(p, func(m *nfa.Matcher) []nfa.Record { return m.Watermark(op.Time) }))
	}
	return nil
}

func (s *State) applyTickOp(op TickOp) error {
	for _, p := range s.patterns {
		if !p.pattern.EventTime() || p.m.MultiSource() {
			s.engineFailed(p, s.emitAll(p, func(m *nfa.Matcher) []nfa.Record { return m.Tick(op.Time) }))
		}
	}
	return nil
}

func (s *State) applyClockOp(op ClockOp) error {
	s.clock(op.Pattern, op.Source, op.Time)
	return nil
}

func (s *State) applyClockModeOp(op ClockModeOp) error {
	_, p := s.find(op.Pattern)
	if p == nil {
		return nil
	}
	p.deploy.Clock = op.On
	if op.On {
		p.m.SetClocked(true)
		for _, d := range p.draining {
			d.m.SetClocked(true)
		}
		return nil
	}
	// alone, the events already read may complete matches now
	s.engineFailed(p, s.emitAll(p, (*nfa.Matcher).Unclock))
	return nil
}
