package nfa

import (
	"errors"
	"fmt"

	"github.com/cepcluster/cep/nfa/expr"
)

// The one way an event reaches a pattern, for every caller — a shard
// applying its log, the offline Runner, Matcher.Event: DecodeInput, then
// per pattern Admit (every check, in one order, nothing changed) and Take
// (the event taken, or, refused at a bound on state, its time observed).
// Offer is the two at once. A refusal is typed (Refusal): a shard
// dead-letters it, the runner prints it or stops at it.

// RefusalKind is the check that refused an event.
type RefusalKind uint8

// The checks, in the order Admit makes them.
const (
	// RefusedDecode: the bytes are over the bound or not a JSON object
	// (DecodeInput); no pattern saw the event.
	RefusedDecode RefusalKind = iota + 1
	// RefusedProject: the pattern's input projection failed (Project).
	RefusedProject
	// RefusedKey: the key expression failed (KeyOf).
	RefusedKey
	// RefusedOwner: the caller's check of the key refused it
	// (Arrival.Owns): a shard's event published on another key's subject.
	RefusedOwner
	// RefusedTimeExpr: the time expression failed (TimeOf).
	RefusedTimeExpr
	// RefusedTime: the time is out of the pattern's bounds (a *TimeError:
	// CheckTimeAt).
	RefusedTime
	// RefusedKeys: a new key past Config.MaxKeys.
	RefusedKeys
	// RefusedStateBytes: the event would take the bytes held past
	// Config.MaxStateBytes.
	RefusedStateBytes
)

// Refusal is why an event was refused. Reason is the dead letter's; Err
// the error it came from (Reason is its text), which errors.As reaches
// through the Refusal.
type Refusal struct {
	Kind    RefusalKind
	Pattern string // "" for RefusedDecode
	Reason  string
	Err     error
}

func (r *Refusal) Error() string { return r.Reason }

// Malformed reports whether the event itself is bad (it does not decode,
// or the pattern's expressions fail on it) rather than refused by the
// pattern's bounds: the offline runner stops at such a line, where a
// shard, which must go on, dead-letters every refusal alike.
func (r *Refusal) Malformed() bool {
	switch r.Kind {
	case RefusedDecode, RefusedProject, RefusedKey, RefusedTimeExpr:
		return true
	}
	return false
}

// Unwrap returns the error the refusal came from.
func (r *Refusal) Unwrap() error { return r.Err }

func refused(kind RefusalKind, pattern string, err error) *Refusal {
	return &Refusal{Kind: kind, Pattern: pattern, Reason: err.Error(), Err: err}
}

// MaxEventBytes is the bound a shard gives DecodeInput: an event larger
// than 1 MiB is refused. The embedded NATS server takes messages of up to
// 8 MiB, which matches (carrying their events) need; an event that large
// would make a pattern's state grow by megabytes at a time.
const MaxEventBytes = 1 << 20

// DecodeInput decodes an event's bytes, refusing more than maxBytes of
// them (0: no bound) without reading them.
func DecodeInput(raw []byte, maxBytes int) (expr.Event, *Refusal) {
	if n := len(raw); maxBytes > 0 && n > maxBytes {
		return nil, refused(RefusedDecode, "", fmt.Errorf("event of %d bytes is over the limit MaxEventBytes = %d (see docs/limits.md)", n, maxBytes))
	}
	ev, err := expr.DecodeEvent(raw)
	if err != nil {
		return nil, refused(RefusedDecode, "", err)
	}
	return ev, nil
}

// Arrival is an event offered to a pattern.
type Arrival struct {
	// Source is the pattern's name for the event's source ("": its only
	// one).
	Source string
	In     Input
	// Ingest is the time the event was read at (NoIngestTime: not
	// known), against which maxFutureSkew bounds its time.
	Ingest int64
	// Owns, when set, is asked once the event's key is known whether the
	// matcher takes it: take false skips the event without a refusal
	// (another matcher owns the key, or it took the event before), a
	// reason refuses it (RefusedOwner). nil: every key is the matcher's.
	Owns func(key string) (take bool, reason string)
	// Held is the bytes of events held elsewhere that count against
	// Config.MaxStateBytes with the matcher's own (a pattern's draining
	// versions).
	Held int64
}

// Admitted is what Admit decided of an event: what Take does with it.
type Admitted struct {
	Source string
	Key    string
	Time   int64
	In     Input
	act    admitAct
}

type admitAct uint8

const (
	actNone    admitAct = iota // skipped, or refused before its time was known good
	actTake                    // the pattern takes it
	actObserve                 // refused at a bound on state: its time still moves the watermark
)

// Taken reports whether the pattern takes the event.
func (a *Admitted) Taken() bool { return a.act == actTake }

// Moves reports whether Take changes the matcher: the event is taken, or
// refused at a bound on state (RefusedKeys, RefusedStateBytes) and its
// time still moves the watermark, so that refusing events does not hold
// time back for the keys that have state. Neither: nothing is to be done.
func (a *Admitted) Moves() bool { return a.act != actNone }

// Admit makes every check of an arriving event, in order: the input
// projection (an event it filters out is skipped), the key, the caller's
// check of the key (Arrival.Owns), the time and its bounds (CheckTimeAt),
// then the bounds on state, which let a late event through to its late
// record. It changes nothing: Take applies what it decided, to this
// matcher or another version of its pattern.
func (m *Matcher) Admit(a *Arrival) (Admitted, *Refusal) {
	name := m.p.Name()
	in, keep, err := m.Project(a.In)
	if err != nil {
		return Admitted{}, refused(RefusedProject, name, err)
	}
	if !keep {
		return Admitted{}, nil
	}
	key, err := m.KeyOf(in)
	if err != nil {
		return Admitted{}, refused(RefusedKey, name, err)
	}
	if a.Owns != nil {
		take, reason := a.Owns(key)
		if reason != "" {
			return Admitted{}, refused(RefusedOwner, name, errors.New(reason))
		}
		if !take {
			return Admitted{}, nil
		}
	}
	ts, err := m.TimeOf(in)
	if err != nil {
		return Admitted{}, refused(RefusedTimeExpr, name, err)
	}
	if err := m.CheckTimeAt(a.Source, ts, a.Ingest); err != nil {
		return Admitted{}, refused(RefusedTime, name, err)
	}
	ad := Admitted{Source: a.Source, Key: key, Time: ts, In: in, act: actTake}
	late := m.p.timeFn != nil && ts <= m.wm // takes no state
	if limit := m.cfg.MaxKeys; limit > 0 && m.Keys() >= limit && !m.HasKey(key) && !late {
		ad.act = actObserve
		return ad, refused(RefusedKeys, name, fmt.Errorf(
			"pattern %s holds state for maxKeys = %d keys on this shard: an event of a new key is refused until some key's state ends (see docs/limits.md)", name, limit))
	}
	if limit, held := m.cfg.MaxStateBytes, m.stateBytes+a.Held; limit > 0 && held+int64(len(in.Raw)) > limit && !late {
		ad.act = actObserve
		return ad, refused(RefusedStateBytes, name, fmt.Errorf(
			"pattern %s holds %d bytes of events on this shard and this event of %d bytes would take it past maxStateBytes = %d: an event is refused until state is freed (see docs/limits.md)", name, held, len(in.Raw), limit))
	}
	return ad, nil
}

// Take applies what Admit decided: the event taken (EventFrom: it is
// late, or waits for the watermark) or its time observed (ObserveFrom).
// It returns the records produced, valid until the next call.
func (m *Matcher) Take(a *Admitted) []Record {
	switch a.act {
	case actTake:
		return m.EventFrom(a.Source, a.Key, a.Time, a.In)
	case actObserve:
		return m.ObserveFrom(a.Source, a.Time)
	}
	m.startCall()
	return m.sc.out
}

// Offer admits an event and takes it (Admit, Take): the records it
// produces, and why it was refused if it was.
func (m *Matcher) Offer(a *Arrival) ([]Record, *Refusal) {
	ad, ref := m.Admit(a)
	if !ad.Moves() {
		return nil, ref
	}
	return m.Take(&ad), ref
}
