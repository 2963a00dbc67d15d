package nfa

import (
	"errors"
	"fmt"
	"time"

	"github.com/cepcluster/cep/watermark"
)

// DefaultMaxFutureSkew is a pattern's maxFutureSkew when its document
// sets none (milliseconds): one day. An event further ahead than this of
// the time it was read at, or of its source's event time, would otherwise
// move the watermark there and make every later event of every key late;
// a day is long enough that a source quiet for a night or a weekend's
// batch does not hit it by accident, and short enough that an event
// stamped in the wrong unit (seconds as milliseconds' thousand-fold,
// nanoseconds) or at the end of time is refused. See docs/time.md.
const DefaultMaxFutureSkew = int64(24 * time.Hour / time.Millisecond)

// TimeError is an event time the pattern refuses: too far ahead of the
// time it was read at or of its source's event time (maxFutureSkew), or
// so close to either end of int64 that adding a duration of the pattern
// to it would overflow. The event is dead-lettered with Error as its
// reason and changes nothing.
type TimeError struct {
	Pattern string
	Time    int64
	Reason  string
}

func (e *TimeError) Error() string {
	return fmt.Sprintf("pattern %s: time %d %s (see docs/time.md)", e.Pattern, e.Time, e.Reason)
}

// timeBounds are what a pattern allows of an event time: computed once
// per pattern (Pattern.timeBounds).
type timeBounds struct {
	skew int64 // maxFutureSkew
	// margin is the largest duration the engine adds to or subtracts from
	// an event time (field names it): a time within margin of either end
	// of int64 is refused
	margin int64
	field  string
}

func (p *Pattern) computeTimeBounds() timeBounds {
	tb := timeBounds{skew: DefaultMaxFutureSkew}
	if s := p.spec; s != nil && s.MaxFutureSkew != nil {
		tb.skew = s.MaxFutureSkew.Millis
	}
	consider := func(d int64, field string) {
		if d > tb.margin {
			tb.margin, tb.field = d, field
		}
	}
	consider(tb.skew, "maxFutureSkew")
	// the watermark is the max time − outOfOrderness − 1
	consider(watermark.AddSat(p.ooo, 1), "outOfOrderness")
	consider(p.windowTime, "within")
	for _, st := range p.states {
		if st.hasWindow {
			consider(st.window, "a stage's window or within")
		}
	}
	if s := p.spec; s != nil {
		if s.IdleTimeout != nil {
			consider(s.IdleTimeout.Millis, "idleTimeout")
		}
		if s.MaxDrift != nil {
			consider(s.MaxDrift.Millis, "maxDrift")
		}
	}
	return tb
}

// MaxFutureSkew returns the pattern's bound on how far ahead of its
// source's event time an event may be, in milliseconds.
func (p *Pattern) MaxFutureSkew() int64 { return p.bounds.skew }

// NoIngestTime is an ingest time that is not known (CheckTimeAt): only
// the bound against the source's event time applies.
const NoIngestTime = watermark.MinTime

// TimeFrom is TimeAt with no ingest time known.
func (m *Matcher) TimeFrom(source string, in Input) (int64, error) {
	return m.TimeAt(source, in, NoIngestTime)
}

// TimeAt evaluates the pattern's time expression for an event of source
// (the pattern's name for it; "" or an unknown name: the pattern's
// watermark) read at ingest (milliseconds, NoIngestTime if not known) and
// checks the time against the pattern's bounds (CheckTimeAt). An error is
// the event's fault: dead-letter it.
func (m *Matcher) TimeAt(source string, in Input, ingest int64) (int64, error) {
	ts, err := m.TimeOf(in)
	if err != nil {
		return 0, err
	}
	if err := m.CheckTimeAt(source, ts, ingest); err != nil {
		return 0, err
	}
	return ts, nil
}

// CheckTime is CheckTimeAt with no ingest time known.
func (m *Matcher) CheckTime(source string, ts int64) error {
	return m.CheckTimeAt(source, ts, NoIngestTime)
}

// CheckTimeAt reports, as a *TimeError, why an event of source at ts read
// at ingest must not reach the pattern, or nil. It depends only on its
// arguments and the events the matcher has taken (never a clock: a
// cluster logs ingest with the event), so a cluster's replicas and
// `cepctl run` decide alike:
//   - ts within the pattern's largest duration of either end of int64;
//   - ts more than maxFutureSkew ahead of ingest, the wall time the event
//     was read at (a shard leader's, logged in the entry; `cepctl run`'s
//     when it reads the line, or --now). No event can move this bound:
//     events each a little less than maxFutureSkew after the one before
//     would otherwise carry the source's event time (below) as far ahead
//     as they like, and make every later real event late;
//   - ts more than maxFutureSkew ahead of the source's event time: its
//     watermark + outOfOrderness + 1, which for a watermark that follows
//     the events is the latest event time taken. Before the source has a
//     watermark there is nothing to compare with: the first event sets
//     the clock.
//
// A processing-time pattern takes no event times and refuses none.
func (m *Matcher) CheckTimeAt(source string, ts, ingest int64) error {
	if m.p.timeFn == nil {
		return nil
	}
	tb := &m.p.bounds
	if _, ok := watermark.AddChecked(ts, tb.margin); !ok || ts <= watermark.MinTime+tb.margin {
		return &TimeError{Pattern: m.p.Name(), Time: ts, Reason: fmt.Sprintf(
			"is too close to the end of the time range: %s = %s from it would overflow", tb.field, fmtMillis(tb.margin))}
	}
	if ingest != NoIngestTime {
		if ahead := watermark.Since(ts, ingest); ahead > uint64(tb.skew) {
			return &TimeError{Pattern: m.p.Name(), Time: ts, Reason: fmt.Sprintf(
				"is %s ahead of the time it was read at (ingest time %d), more than maxFutureSkew = %s: refused so that it does not move the watermark",
				fmtAhead(ahead), ingest, fmtMillis(tb.skew))}
		}
	}
	wm := m.gen.Current()
	if g := m.srcGen[source]; g != nil {
		wm = g.Current()
	}
	if wm == watermark.MinTime {
		return nil
	}
	now := watermark.AddSat(watermark.AddSat(wm, m.p.ooo), 1)
	if ahead := watermark.Since(ts, now); ahead > uint64(tb.skew) {
		name := source
		if name == "" && len(m.p.spec.Source) > 0 {
			name = m.p.spec.Source[0] // offline, the only source
		}
		if name == "" {
			name = "the source"
		} else {
			name = "source " + name
		}
		return &TimeError{Pattern: m.p.Name(), Time: ts, Reason: fmt.Sprintf(
			"is %s ahead of %s's event time %d, more than maxFutureSkew = %s: refused so that it does not move the watermark",
			fmtAhead(ahead), name, now, fmtMillis(tb.skew))}
	}
	return nil
}

// IsTimeError reports whether err is a refused event time.
func IsTimeError(err error) bool {
	var te *TimeError
	return errors.As(err, &te)
}

func fmtMillis(ms int64) string {
	if ms > int64(time.Duration(1<<63-1)/time.Millisecond) {
		return fmt.Sprintf("%dms", ms)
	}
	return (time.Duration(ms) * time.Millisecond).String()
}

func fmtAhead(ms uint64) string {
	if ms > uint64(1<<63-1)/uint64(time.Millisecond) {
		return fmt.Sprintf("%dms", ms)
	}
	return (time.Duration(ms) * time.Millisecond).String()
}
