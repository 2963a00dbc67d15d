package shard

import "encoding/binary"

// Event is one message read from a source stream.
type Event struct {
	// Pos is the message's sequence in the stream it was read from.
	Pos uint64
	// Block is the block of key groups the stream stored it under
	// (keygroup.BlockOfSubject), -1 if none. An EventsOp applies the event
	// in the key groups of that block the shard owns (owning none, it is
	// counted as misrouted); a ForwardOp does not look at it.
	Block int
	// Data is the message's payload, a JSON event (one that does not
	// decode is dead-lettered).
	Data []byte
	// OriginPos, for an event of a derived (re-keyed) source, is its
	// position in the source it was forwarded from (ForwardedPos of its
	// id): a key group skips a copy at or below the origin position it
	// applied. 0 otherwise.
	OriginPos uint64
}

// EventsOp: events read from one source, in stream order. Each key group
// of the shard applies those of its blocks past its position in Source;
// then every key group's position in Source moves up to the last event of
// the shard's blocks (State.applyEvents).
type EventsOp struct {
	// Source is the stream's source by its name in the metadata (a
	// derived source's name for one): what positions are kept under, and
	// what the patterns read (Deploy.Sources, or Deploy.Reads).
	Source string
	Events []Event
	// After is the position the entry's reader read after: the last of
	// its entry before, or where it started. The entry is refused (a
	// GapError) when some key group of the shard has applied Source only
	// below it: an entry in between was not applied, and its events would
	// be skipped as read. 0 (entries before batch version 7): always
	// applied.
	After uint64
	// Ingest is the leader's wall clock when it built the entry (Unix
	// milliseconds): an event more than its pattern's maxFutureSkew ahead
	// of it is dead-lettered (nfa.Matcher.TimeAt), a bound no event can
	// move. 0: not logged (entries before batch version 8): only the
	// bound against the events' own times applies.
	Ingest int64
}

// ForwardOp: events of Source's stream to re-key into the derived source
// Target. The one shard that re-keys a source reads its whole stream in
// order; each event goes to the outbox under Target's subject for its key,
// with an id from its position (State.applyForward, ForwardID).
type ForwardOp struct {
	Source string // the source the events were read from
	Target string // the derived source they are re-keyed into
	Events []Event
	// After is the position of Source the entry's reader read after. The
	// entry is refused (a GapError on Target) when the shard has forwarded
	// Source into Target only up to below it (State.Forwarded). 0
	// (entries before batch version 7): always applied.
	After uint64
	// Ingest is the leader's wall clock when it built the entry (Unix
	// milliseconds), logged as an EventsOp's (batch version 8 on); a
	// forward does not use it: the derived source's readers log their own.
	Ingest int64
}

func (EventsOp) Kind() OpKind  { return OpEvents }
func (ForwardOp) Kind() OpKind { return OpForward }

func (op EventsOp) appendTo(b []byte) []byte {
	b = appendString(b, op.Source)
	return appendRead(b, op.After, op.Ingest, op.Events)
}

func (op ForwardOp) appendTo(b []byte) []byte {
	b = appendString(b, op.Source)
	b = appendString(b, op.Target)
	return appendRead(b, op.After, op.Ingest, op.Events)
}

// appendRead appends what both kinds of entries of events read carry
// after their sources.
func appendRead(b []byte, after uint64, ingest int64, events []Event) []byte {
	b = binary.AppendUvarint(b, after)
	b = binary.AppendVarint(b, ingest)
	b = binary.AppendUvarint(b, uint64(len(events)))
	for _, e := range events {
		b = binary.AppendUvarint(b, e.Pos)
		b = binary.AppendVarint(b, int64(e.Block))
		b = appendBytes(b, e.Data)
		b = binary.AppendUvarint(b, e.OriginPos)
	}
	return b
}

func decodeEventsOp(d *dec, version byte) EventsOp {
	op := EventsOp{Source: d.string()}
	op.After, op.Ingest, op.Events = decodeRead(d, version)
	return op
}

func decodeForwardOp(d *dec, version byte) ForwardOp {
	op := ForwardOp{Source: d.string(), Target: d.string()}
	op.After, op.Ingest, op.Events = decodeRead(d, version)
	return op
}

// decodeRead reads appendRead's fields as the entry's version wrote them:
// the position read after from version 7 on, the ingest time from 8 on.
func decodeRead(d *dec, version byte) (after uint64, ingest int64, events []Event) {
	if version >= 7 {
		after = d.uvarint()
	}
	if version >= 8 {
		ingest = d.varint()
	}
	n := d.count()
	events = make([]Event, 0, n)
	for j := 0; j < n && d.err == nil; j++ {
		events = append(events, Event{Pos: d.uvarint(), Block: int(d.varint()), Data: d.bytes(), OriginPos: d.uvarint()})
	}
	return after, ingest, events
}

func (s *State) applyEventsOp(op EventsOp) error {
	if applied := s.appliedAll(op.Source); op.After > applied {
		return &GapError{Source: op.Source, After: op.After, Applied: applied}
	}
	s.applyEvents(op.Source, op.Events, op.Ingest)
	return nil
}

func (s *State) applyForwardOp(op ForwardOp) error {
	if applied := s.forwarded[op.Target]; op.After > applied {
		return &GapError{Source: op.Target, After: op.After, Applied: applied}
	}
	s.applyForward(op.Source, op.Target, op.Events)
	return nil
}
