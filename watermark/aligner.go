package watermark

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

type alignedSource struct {
	name       string
	wm         int64 // the source's own watermark, MinTime if none yet
	lastActive int64 // processing time of the latest Observe (or the start)
}

// Aligner combines the watermarks of several sources that feed one pattern,
// with Flink's idleness and watermark-alignment rules:
//
//   - The combined watermark (Watermark) is the minimum of the sources'
//     watermarks, leaving out idle sources: those with no Observe for at
//     least idleTimeout (processing time) before now. If every source is
//     idle, it is the maximum of their watermarks. It never decreases.
//   - A source is paused (Paused) when its watermark is more than maxDrift
//     ahead of the combined watermark; the owner should stop reading it
//     until it is no longer paused.
//
// A zero idleTimeout or maxDrift disables idleness or alignment
// respectively. A source that has never been observed has watermark MinTime
// and counts as active since the first processing time the Aligner was
// given, so with idleness disabled it holds the combined watermark at
// MinTime until it reports.
//
// Processing time ("now") is a logged tick supplied by the caller and is
// expected to be non-decreasing. Watermark records the value it returns (the
// combined watermark never decreases afterwards), so the points at which it
// is called are part of the deterministic input; Peek and Paused do not
// change state.
//
// Use NewAligner or UnmarshalBinary. An Aligner is not safe for concurrent
// use.
type Aligner struct {
	idleTimeout int64
	maxDrift    int64
	srcs        []alignedSource // sorted by name, unique
	started     bool            // some processing time has been seen
	last        int64           // last combined watermark returned by Watermark
}

// NewAligner returns an aligner over the named sources (order does not
// matter). idleTimeout and maxDrift are in milliseconds; 0 disables the
// respective feature. It panics if sources is empty or has duplicates, or if
// idleTimeout or maxDrift is negative.
func NewAligner(sources []string, idleTimeout, maxDrift int64) *Aligner {
	if idleTimeout < 0 || maxDrift < 0 {
		panic(fmt.Sprintf("watermark: negative idle timeout %d or max drift %d", idleTimeout, maxDrift))
	}
	if len(sources) == 0 {
		panic("watermark: NewAligner without sources")
	}
	names := slices.Clone(sources)
	slices.Sort(names)
	a := &Aligner{idleTimeout: idleTimeout, maxDrift: maxDrift, last: MinTime}
	a.srcs = make([]alignedSource, len(names))
	for i, n := range names {
		if i > 0 && names[i-1] == n {
			panic(fmt.Sprintf("watermark: duplicate source %q", n))
		}
		a.srcs[i] = alignedSource{name: n, wm: MinTime}
	}
	return a
}

func (a *Aligner) lookup(source string) *alignedSource {
	i, ok := slices.BinarySearchFunc(a.srcs, source, func(s alignedSource, name string) int {
		return strings.Compare(s.name, name)
	})
	if !ok {
		panic(fmt.Sprintf("watermark: unknown source %q", source))
	}
	return &a.srcs[i]
}

// start records the first processing time seen: sources that have not been
// observed count as active from then on.
func (a *Aligner) start(now int64) {
	if a.started {
		return
	}
	a.started = true
	for i := range a.srcs {
		a.srcs[i].lastActive = now
	}
}

// Observe records source's own watermark (typically its Generator's Current)
// at processing time now, and marks the source active at now. A watermark
// lower than one already reported is ignored. It panics on an unknown
// source.
func (a *Aligner) Observe(source string, wm int64, now int64) {
	s := a.lookup(source)
	a.start(now)
	if wm > s.wm {
		s.wm = wm
	}
	if now > s.lastActive {
		s.lastActive = now
	}
}

// ObserveWatermark records source's own watermark as Observe does, but
// without a processing time: it neither starts the clock of idleness nor
// marks the source active. For a caller that has no processing time yet
// (a matcher before its first tick), whose first real time would else
// find every source silent since that made-up time, and idle.
func (a *Aligner) ObserveWatermark(source string, wm int64) {
	if s := a.lookup(source); wm > s.wm {
		s.wm = wm
	}
}

// idle reports whether s has had no Observe for >= idleTimeout before now.
func (a *Aligner) idle(s *alignedSource, now int64) bool {
	if a.idleTimeout == 0 || !a.started || now < s.lastActive {
		return false
	}
	// now >= lastActive, so the unsigned difference is exact.
	return uint64(now)-uint64(s.lastActive) >= uint64(a.idleTimeout)
}

// Peek returns what Watermark(now) would return, without recording it.
func (a *Aligner) Peek(now int64) int64 {
	lo, hi := MaxTime, MinTime
	anyActive := false
	for i := range a.srcs {
		s := &a.srcs[i]
		if a.idle(s, now) {
			hi = max(hi, s.wm)
		} else {
			anyActive = true
			lo = min(lo, s.wm)
		}
	}
	w := hi
	if anyActive {
		w = lo
	}
	return max(w, a.last)
}

// Watermark returns the combined watermark at processing time now: the
// minimum of the active sources' watermarks, or the maximum if all are idle,
// never lower than a value previously returned.
func (a *Aligner) Watermark(now int64) int64 {
	a.start(now)
	a.last = a.Peek(now)
	return a.last
}

// WatermarkUntimed is Watermark for a caller without a processing time
// yet (ObserveWatermark): the clock of idleness does not start.
func (a *Aligner) WatermarkUntimed() int64 {
	a.last = a.Peek(0)
	return a.last
}

// Paused reports whether source's watermark is more than maxDrift ahead of
// the combined watermark at now (as Peek(now) computes it). Always false
// when alignment is disabled. It panics on an unknown source.
func (a *Aligner) Paused(source string, now int64) bool {
	s := a.lookup(source)
	if a.maxDrift == 0 {
		return false
	}
	w := a.Peek(now)
	return s.wm > w && uint64(s.wm)-uint64(w) > uint64(a.maxDrift)
}

// Idle reports whether source counts as idle at now. It panics on an
// unknown source.
func (a *Aligner) Idle(source string, now int64) bool {
	return a.idle(a.lookup(source), now)
}

// SourceWatermark returns the latest watermark observed for source, MinTime
// if none. It panics on an unknown source.
func (a *Aligner) SourceWatermark(source string) int64 { return a.lookup(source).wm }

// Sources returns the source names in sorted order.
func (a *Aligner) Sources() []string {
	out := make([]string, len(a.srcs))
	for i, s := range a.srcs {
		out[i] = s.name
	}
	return out
}

// IdleTimeout returns the configured idle timeout (0 = disabled).
func (a *Aligner) IdleTimeout() int64 { return a.idleTimeout }

// MaxDrift returns the configured maximum drift (0 = disabled).
func (a *Aligner) MaxDrift() int64 { return a.maxDrift }

const alignerVersion = 1

// AppendBinary appends the aligner's state to b.
//
// Format: version byte (1); zig-zag varints idleTimeout, maxDrift; a byte
// started (0/1); varint last combined watermark; uvarint source count; then
// per source in sorted name order: uvarint name length, name bytes, varint
// watermark, varint last-active time.
func (a *Aligner) AppendBinary(b []byte) ([]byte, error) {
	b = append(b, alignerVersion)
	b = appendVarint(b, a.idleTimeout)
	b = appendVarint(b, a.maxDrift)
	started := byte(0)
	if a.started {
		started = 1
	}
	b = append(b, started)
	b = appendVarint(b, a.last)
	b = appendUvarint(b, uint64(len(a.srcs)))
	for _, s := range a.srcs {
		b = appendString(b, s.name)
		b = appendVarint(b, s.wm)
		b = appendVarint(b, s.lastActive)
	}
	return b, nil
}

// MarshalBinary encodes the aligner's state deterministically.
func (a *Aligner) MarshalBinary() ([]byte, error) {
	return a.AppendBinary(nil)
}

// UnmarshalBinary replaces the aligner's state (configuration included) with
// one produced by MarshalBinary. It rejects unknown versions, invalid
// configuration, unsorted or duplicate sources, trailing bytes and
// non-canonical encodings; on error a is left unchanged.
func (a *Aligner) UnmarshalBinary(data []byte) error {
	if err := a.unmarshal(data); err != nil {
		return fmt.Errorf("watermark: decoding aligner: %w", err)
	}
	return nil
}

func (a *Aligner) unmarshal(data []byte) error {
	d := decoder{buf: data}
	if v := d.byte(); d.err == nil && v != alignerVersion {
		return fmt.Errorf("unsupported encoding version %d", v)
	}
	n := Aligner{idleTimeout: d.varint(), maxDrift: d.varint()}
	switch d.byte() {
	case 0:
	case 1:
		n.started = true
	default:
		d.fail(errors.New("invalid started flag"))
	}
	n.last = d.varint()
	count := d.uvarint()
	if d.err != nil {
		return d.err
	}
	// Each source takes at least three bytes; this bounds the allocation.
	if count == 0 || count > uint64(d.remaining()/3) {
		return fmt.Errorf("invalid source count %d", count)
	}
	n.srcs = make([]alignedSource, count)
	for i := range n.srcs {
		n.srcs[i] = alignedSource{name: d.string(), wm: d.varint(), lastActive: d.varint()}
		if d.err == nil && i > 0 && n.srcs[i-1].name >= n.srcs[i].name {
			return errors.New("sources not in strictly ascending order")
		}
	}
	if err := d.finish(); err != nil {
		return err
	}
	if n.idleTimeout < 0 || n.maxDrift < 0 {
		return errors.New("negative idle timeout or max drift")
	}
	if err := checkCanonical(data, &n); err != nil {
		return err
	}
	*a = n
	return nil
}
