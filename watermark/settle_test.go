package watermark

import (
	"math/rand/v2"
	"testing"
	"time"
)

// A partition's settled value is never one it showed less than settle
// ago: at most the highest watermark heard at or before now - settle
// (MinTime when none was), it never goes back as time passes, and once
// the latest value has stood for settle it is that value.
func TestSettledLagsBySettle(t *testing.T) {
	const settle = 250 * time.Millisecond
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 1))
		t0 := time.Unix(1000, 0)
		type obs struct {
			at time.Time
			wm int64
		}
		first := obs{t0, rng.Int64N(100)}
		c := NewSettled(first.wm, first.at)
		heard := []obs{first}
		now := t0
		prev := MinTime
		for range 40 {
			now = now.Add(time.Duration(rng.IntN(200)) * time.Millisecond)
			if rng.IntN(2) == 0 {
				wm := heard[len(heard)-1].wm + rng.Int64N(50) - 10
				c.Observe(wm, now, settle)
				heard = append(heard, obs{now, wm})
			}
			v := c.Value(now, settle)
			bound := MinTime
			for _, o := range heard {
				if !o.at.After(now.Add(-settle)) {
					bound = max(bound, o.wm)
				}
			}
			if v > bound {
				t.Fatalf("seed %d: settled %d at %v, above %d, the most heard %v before", seed, v, now.Sub(t0), bound, settle)
			}
			if v < prev {
				t.Fatalf("seed %d: settled went back from %d to %d", seed, prev, v)
			}
			prev = v
		}
		top := MinTime
		for _, o := range heard {
			top = max(top, o.wm)
		}
		if v := c.Value(now.Add(settle), settle); v != top {
			t.Fatalf("seed %d: settled %d once everything stood for %v, want %d", seed, v, settle, top)
		}
	}
}

// A partition is stale once not heard of for longer than stale, a report
// of any watermark (even a lower one) making it fresh again.
func TestSettledStale(t *testing.T) {
	t0 := time.Unix(1000, 0)
	c := NewSettled(10, t0)
	if c.Stale(t0.Add(500*time.Millisecond), 500*time.Millisecond) {
		t.Fatal("stale at the bound")
	}
	if !c.Stale(t0.Add(501*time.Millisecond), 500*time.Millisecond) {
		t.Fatal("not stale past the bound")
	}
	c.Observe(5, t0.Add(time.Second), 250*time.Millisecond)
	if c.Stale(t0.Add(time.Second), 500*time.Millisecond) {
		t.Fatal("stale right after a report")
	}
}

// CombineHeard is Combine when no partition is idle or stale; a stale
// partition counts as not idle; and the settle rule only ever holds the
// result back.
func TestCombineHeard(t *testing.T) {
	const settle, stale = 250 * time.Millisecond, 500 * time.Millisecond
	for seed := range uint64(500) {
		rng := rand.New(rand.NewPCG(seed, 2))
		t0 := time.Unix(1000, 0)
		now := t0.Add(time.Duration(rng.IntN(2000)) * time.Millisecond)
		var hs []Heard
		for i := range 1 + rng.IntN(5) {
			came := now.Add(-time.Duration(rng.IntN(1000)) * time.Millisecond)
			h := Heard{Part: Part{Watermark: rng.Int64N(1000), Idle: rng.IntN(3) == 0}, Own: i == 0}
			h.History = NewSettled(h.Part.Watermark-rng.Int64N(100), came.Add(-time.Second))
			h.History.Observe(h.Part.Watermark, came, settle)
			if h.Own {
				h.History.Observe(h.Part.Watermark, now, settle)
			}
			hs = append(hs, h)
		}
		adjusted := make([]Part, len(hs))
		anyIdle, anyActive := false, false
		for i, h := range hs {
			adjusted[i] = h.Part
			if !h.Own && h.History.Stale(now, stale) {
				adjusted[i].Idle = false
			}
			anyIdle, anyActive = anyIdle || adjusted[i].Idle, anyActive || !adjusted[i].Idle
		}
		got, ok := CombineHeard(hs, now, settle, stale)
		want, _ := Combine(adjusted)
		if !ok {
			t.Fatalf("seed %d: no result for %d partitions", seed, len(hs))
		}
		if !(anyIdle && anyActive) && got != want {
			t.Fatalf("seed %d: %d, want Combine's %d (no idle and busy mix)", seed, got, want)
		}
		if got > want {
			t.Fatalf("seed %d: %d past Combine's %d", seed, got, want)
		}
	}
}
