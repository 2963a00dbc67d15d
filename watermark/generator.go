package watermark

import (
	"errors"
	"fmt"
	"math"
)

const (
	// MinTime is the watermark before anything has been observed.
	MinTime int64 = math.MinInt64
	// MaxTime is the final watermark: every timestamp is at or below it.
	MaxTime int64 = math.MaxInt64
)

// Generator produces Flink's bounded out-of-orderness watermark for one
// source: watermark = (largest timestamp seen) − outOfOrderness − 1,
// saturating at MinTime. Explicit watermarks may push it further. The
// watermark never decreases.
//
// Use NewGenerator; the zero value is not ready for use (except as the
// target of UnmarshalBinary). A Generator is not safe for concurrent use.
type Generator struct {
	ooo   int64 // out-of-orderness bound, >= 0
	maxTs int64 // largest timestamp observed, MinTime if none
	wm    int64 // current watermark
}

// NewGenerator returns a generator whose watermark trails the largest
// observed timestamp by outOfOrderness milliseconds (plus one, as in Flink,
// so that an event exactly outOfOrderness behind the maximum is still on
// time). It panics if outOfOrderness is negative.
func NewGenerator(outOfOrderness int64) *Generator {
	if outOfOrderness < 0 {
		panic(fmt.Sprintf("watermark: negative out-of-orderness %d", outOfOrderness))
	}
	return &Generator{ooo: outOfOrderness, maxTs: MinTime, wm: MinTime}
}

// boundedWatermark returns maxTs − ooo − 1, or MinTime if that would
// underflow. ooo must be >= 0.
func boundedWatermark(maxTs, ooo int64) int64 {
	// uint64(maxTs) - minTimeBits is maxTs − MinTime computed exactly (it
	// lies in [0, 2^64−1]).
	if uint64(maxTs)-minTimeBits <= uint64(ooo) {
		return MinTime
	}
	return maxTs - ooo - 1
}

// Observe records an event timestamp and returns the resulting watermark and
// whether it advanced. A late timestamp (see IsLate) is accepted and never
// moves the watermark backwards.
func (g *Generator) Observe(ts int64) (wm int64, advanced bool) {
	if ts <= g.maxTs {
		return g.wm, false
	}
	g.maxTs = ts
	if c := boundedWatermark(ts, g.ooo); c > g.wm {
		g.wm = c
		return c, true
	}
	return g.wm, false
}

// Advance applies an explicit watermark (a {"$watermark": T} input line). It
// is ignored unless it is greater than the current watermark, and reports
// whether the watermark advanced. Advance(MaxTime) is the final watermark.
func (g *Generator) Advance(wm int64) bool {
	if wm <= g.wm {
		return false
	}
	g.wm = wm
	return true
}

// Current returns the current watermark, MinTime before anything advanced it.
func (g *Generator) Current() int64 { return g.wm }

// IsLate reports whether an event with timestamp ts is late, that is
// ts <= Current(). As in Flink, an event at MinTime is always late.
func (g *Generator) IsLate(ts int64) bool { return ts <= g.wm }

// OutOfOrderness returns the configured out-of-orderness bound.
func (g *Generator) OutOfOrderness() int64 { return g.ooo }

// MaxTimestamp returns the largest timestamp observed, MinTime if none.
func (g *Generator) MaxTimestamp() int64 { return g.maxTs }

// minTimeBits is MinTime's two's-complement bit pattern as a uint64.
const minTimeBits = uint64(1) << 63

const generatorVersion = 1

// AppendBinary appends the generator's state to b.
//
// Format: version byte (1), then zig-zag varints of outOfOrderness, max
// timestamp and watermark.
func (g *Generator) AppendBinary(b []byte) ([]byte, error) {
	b = append(b, generatorVersion)
	b = appendVarint(b, g.ooo)
	b = appendVarint(b, g.maxTs)
	b = appendVarint(b, g.wm)
	return b, nil
}

// MarshalBinary encodes the generator's state deterministically.
func (g *Generator) MarshalBinary() ([]byte, error) {
	return g.AppendBinary(make([]byte, 0, 1+3*maxVarintLen))
}

// UnmarshalBinary replaces the generator's state with one produced by
// MarshalBinary. It rejects unknown versions, inconsistent state, trailing
// bytes and non-canonical encodings; on error g is left unchanged.
func (g *Generator) UnmarshalBinary(data []byte) error {
	if err := g.unmarshal(data); err != nil {
		return fmt.Errorf("watermark: decoding generator: %w", err)
	}
	return nil
}

func (g *Generator) unmarshal(data []byte) error {
	d := decoder{buf: data}
	if v := d.byte(); d.err == nil && v != generatorVersion {
		return fmt.Errorf("unsupported encoding version %d", v)
	}
	n := Generator{ooo: d.varint(), maxTs: d.varint(), wm: d.varint()}
	if err := d.finish(); err != nil {
		return err
	}
	if n.ooo < 0 {
		return fmt.Errorf("negative out-of-orderness %d", n.ooo)
	}
	if n.wm < boundedWatermark(n.maxTs, n.ooo) {
		return errors.New("watermark behind the max timestamp bound")
	}
	if err := checkCanonical(data, &n); err != nil {
		return err
	}
	*g = n
	return nil
}
