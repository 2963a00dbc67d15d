package watermark

import "time"

// Combining the partitions of a source across shards, each shard leader
// hears the others' parts over the network, late and now and then not at
// all. Two rules make Combine safe on what it heard (CombineHeard):
//
//   - stale: a partition not heard from for a while (its leader is gone)
//     may have events to read, so it holds the clock back, idle or not;
//   - settle: while some partitions are idle and others not, an idle one
//     is left out only against what the others have shown for a while: a
//     source that resumes with a burst reaches every shard within it, so a
//     partition still reported idle, whose part of the burst is on its
//     way, is not overtaken by the first shard to read it.

// Settled follows one partition's watermark with the time each value
// came, to tell what it was a while ago, and when it was last heard of.
type Settled struct {
	cur, old int64
	at       time.Time // when cur came
	heard    time.Time // the partition's latest report
}

// NewSettled starts following a partition first heard at now with wm.
func NewSettled(wm int64, now time.Time) *Settled {
	return &Settled{cur: wm, old: MinTime, at: now, heard: now}
}

// Observe records wm heard at now; a lower or equal one changes only when
// the partition was last heard of.
func (c *Settled) Observe(wm int64, now time.Time, settle time.Duration) {
	c.heard = now
	if wm <= c.cur {
		return
	}
	if now.Sub(c.at) >= settle {
		c.old = c.cur
	}
	c.cur, c.at = wm, now
}

// Value is the watermark as it was settle before now (or earlier).
func (c *Settled) Value(now time.Time, settle time.Duration) int64 {
	if now.Sub(c.at) >= settle {
		return c.cur
	}
	return c.old
}

// Stale: the partition has not been heard of for longer than stale.
func (c *Settled) Stale(now time.Time, stale time.Duration) bool {
	return now.Sub(c.heard) > stale
}

// Heard is a partition as the combining shard knows it: its part (its
// latest report, or the shard's own) and its history.
type Heard struct {
	Part    Part
	History *Settled
	// Own: the combining shard's own partition, never stale.
	Own bool
}

// CombineHeard is Combine over partitions heard from afar at now, with
// the stale and settle rules above.
func CombineHeard(hs []Heard, now time.Time, settle, stale time.Duration) (int64, bool) {
	parts := make([]Part, len(hs))
	idle, active := false, false
	for i, h := range hs {
		p := h.Part
		if !h.Own && h.History.Stale(now, stale) {
			p.Idle = false
		}
		idle, active = idle || p.Idle, active || !p.Idle
		parts[i] = p
	}
	if idle && active {
		for i, h := range hs {
			if !parts[i].Idle {
				parts[i].Watermark = min(parts[i].Watermark, h.History.Value(now, settle))
			}
		}
	}
	return Combine(parts)
}
