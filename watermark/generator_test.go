package watermark

import (
	"encoding/hex"
	"math/big"
	"testing"

	"pgregory.net/rapid"
)

func TestGeneratorTable(t *testing.T) {
	type op struct {
		observe bool // Observe(v) if true, else Advance(v)
		v       int64
		wantWM  int64
		wantAdv bool
	}
	obs := func(ts, wm int64, adv bool) op { return op{true, ts, wm, adv} }
	adv := func(w, wm int64, a bool) op { return op{false, w, wm, a} }
	tests := []struct {
		name string
		ooo  int64
		ops  []op
	}{
		{"in order ooo=0", 0, []op{obs(1, 0, true), obs(2, 1, true), obs(2, 1, false), obs(5, 4, true)}},
		{"disorder ooo=5", 5, []op{obs(10, 4, true), obs(7, 4, false), obs(3, 4, false), obs(11, 5, true)}},
		{"first event at zero", 0, []op{obs(0, -1, true)}},
		{"negative times", 2, []op{obs(-10, -13, true), obs(-20, -13, false), obs(-9, -12, true)}},
		{"explicit then bounded", 3, []op{adv(100, 100, true), obs(50, 100, false), obs(104, 100, false), obs(105, 101, true)}},
		{"explicit not greater", 0, []op{obs(10, 9, true), adv(9, 9, false), adv(8, 9, false), adv(10, 10, true)}},
		{"explicit min is a no-op", 0, []op{adv(MinTime, MinTime, false)}},
		{"final watermark", 0, []op{adv(MaxTime, MaxTime, true), obs(MaxTime, MaxTime, false), adv(MaxTime, MaxTime, false)}},
		{"min timestamp", 0, []op{obs(MinTime, MinTime, false), obs(MinTime+1, MinTime, false), obs(MinTime+2, MinTime+1, true)}},
		{"max timestamp ooo=0", 0, []op{obs(MaxTime, MaxTime-1, true)}},
		{"huge ooo", MaxTime, []op{obs(MaxTime, -1, true), obs(MinTime, -1, false)}},
		{"huge ooo small ts", MaxTime, []op{obs(0, MinTime, false), obs(1, MinTime+1, true)}},
		{"ooo max-1", MaxTime - 1, []op{obs(0, MinTime+1, true), obs(MaxTime, 0, true)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := NewGenerator(tc.ooo)
			if g.Current() != MinTime {
				t.Fatalf("initial watermark %d, want MinTime", g.Current())
			}
			for i, o := range tc.ops {
				var wm int64
				var a bool
				if o.observe {
					wm, a = g.Observe(o.v)
				} else {
					a = g.Advance(o.v)
					wm = g.Current()
				}
				if wm != o.wantWM || a != o.wantAdv || g.Current() != o.wantWM {
					t.Fatalf("op %d (%+v): got wm=%d advanced=%t current=%d", i, o, wm, a, g.Current())
				}
			}
		})
	}
}

func TestGeneratorIsLate(t *testing.T) {
	g := NewGenerator(3)
	for _, ts := range []int64{MinTime + 1, -1, 0, MaxTime} {
		if g.IsLate(ts) {
			t.Errorf("IsLate(%d) before any watermark", ts)
		}
	}
	if !g.IsLate(MinTime) {
		t.Errorf("IsLate(MinTime) = false; an event at MinTime is never on time")
	}
	g.Observe(10) // watermark 6
	for ts, want := range map[int64]bool{5: true, 6: true, 7: false, 10: false, MinTime: true, MaxTime: false} {
		if got := g.IsLate(ts); got != want {
			t.Errorf("IsLate(%d) = %t, want %t", ts, got, want)
		}
	}
	g.Advance(MaxTime)
	if !g.IsLate(MaxTime) {
		t.Errorf("IsLate(MaxTime) after final watermark = false")
	}
}

func TestNewGeneratorNegativePanics(t *testing.T) {
	for _, ooo := range []int64{-1, MinTime} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("NewGenerator(%d) did not panic", ooo)
				}
			}()
			NewGenerator(ooo)
		}()
	}
}

// timeGen draws timestamps that favour the extremes and small values.
func timeGen() *rapid.Generator[int64] {
	return rapid.OneOf(
		rapid.Int64Range(-50, 50),
		rapid.Int64Range(MinTime, MinTime+50),
		rapid.Int64Range(MaxTime-50, MaxTime),
		rapid.Int64(),
	)
}

func oooGen() *rapid.Generator[int64] {
	return rapid.OneOf(
		rapid.Int64Range(0, 20),
		rapid.Int64Range(MaxTime-20, MaxTime),
		rapid.Int64Range(0, MaxTime),
	)
}

// TestGeneratorProperties checks the generator against an arbitrary-precision
// reference, plus monotonicity, lateness and snapshot round trips.
func TestGeneratorProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ooo := oooGen().Draw(t, "ooo")
		g := NewGenerator(ooo)
		minB := big.NewInt(MinTime)
		var maxTs *big.Int // nil: nothing observed
		explicit := big.NewInt(MinTime)
		ref := func() int64 {
			w := new(big.Int).Set(explicit)
			if maxTs != nil {
				b := new(big.Int).Sub(maxTs, big.NewInt(ooo))
				b.Sub(b, big.NewInt(1))
				if b.Cmp(minB) < 0 {
					b.Set(minB)
				}
				if b.Cmp(w) > 0 {
					w = b
				}
			}
			return w.Int64()
		}
		prev := g.Current()
		steps := rapid.IntRange(1, 60).Draw(t, "steps")
		for i := 0; i < steps; i++ {
			v := timeGen().Draw(t, "v")
			var adv bool
			switch rapid.IntRange(0, 9).Draw(t, "op") {
			case 0:
				adv = g.Advance(v)
				if v > explicit.Int64() {
					explicit.SetInt64(v)
				}
			case 1:
				data, err := g.MarshalBinary()
				if err != nil {
					t.Fatal(err)
				}
				var h Generator
				if err := h.UnmarshalBinary(data); err != nil {
					t.Fatalf("unmarshal %x: %v", data, err)
				}
				if h != *g {
					t.Fatalf("round trip: %+v != %+v", h, *g)
				}
				g = &h
				continue
			default:
				late := g.IsLate(v)
				if late != (v <= g.Current()) {
					t.Fatalf("IsLate(%d) = %t with watermark %d", v, late, g.Current())
				}
				var wm int64
				wm, adv = g.Observe(v)
				if wm != g.Current() {
					t.Fatalf("Observe returned %d, Current %d", wm, g.Current())
				}
				if maxTs == nil || big.NewInt(v).Cmp(maxTs) > 0 {
					maxTs = big.NewInt(v)
				}
			}
			cur := g.Current()
			if cur < prev {
				t.Fatalf("watermark decreased from %d to %d", prev, cur)
			}
			if adv != (cur > prev) {
				t.Fatalf("advanced=%t but watermark went %d -> %d", adv, prev, cur)
			}
			if want := ref(); cur != want {
				t.Fatalf("watermark %d, reference %d", cur, want)
			}
			prev = cur
		}
	})
}

func TestGeneratorUnmarshalErrors(t *testing.T) {
	good, _ := NewGenerator(3).MarshalBinary()
	g := NewGenerator(3)
	g.Observe(40)
	ok, _ := g.MarshalBinary()
	tests := map[string][]byte{
		"empty":             {},
		"version only":      {1},
		"bad version":       append([]byte{2}, good[1:]...),
		"truncated":         ok[:len(ok)-1],
		"trailing":          append(append([]byte{}, ok...), 0),
		"negative ooo":      {1, 1, 0, 0},                // ooo=-1
		"wm behind bound":   {1, 0, 20, 0},               // ooo=0 maxTs=10 wm=0
		"non-canonical":     {1, 0x86, 0x00, 0x50, 0x48}, // ooo=3 as a two-byte varint
		"overlong varint":   {1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0, 0},
		"non-canonical max": {1, 0x06, 0xd0, 0x80, 0x00, 0x48}, // maxTs=40 padded
	}
	for name, data := range tests {
		t.Run(name, func(t *testing.T) {
			h := NewGenerator(7)
			before := *h
			err := h.UnmarshalBinary(data)
			if err == nil {
				t.Fatalf("UnmarshalBinary(%x) succeeded: %+v", data, *h)
			}
			t.Log(err)
			if *h != before {
				t.Fatalf("failed UnmarshalBinary modified the generator")
			}
		})
	}
	var h Generator
	if err := h.UnmarshalBinary(ok); err != nil || h != *g {
		t.Fatalf("UnmarshalBinary(%x) into zero value: %v, %+v", ok, err, h)
	}
}

func TestGeneratorMarshalDeterministic(t *testing.T) {
	g := NewGenerator(3)
	g.Observe(40)
	a, _ := g.MarshalBinary()
	b, _ := g.MarshalBinary()
	c, _ := g.AppendBinary([]byte("x"))
	if string(a) != string(b) || string(c[1:]) != string(a) || c[0] != 'x' {
		t.Fatalf("encodings differ: %x %x %x", a, b, c)
	}
	if want := "01065048"; hex.EncodeToString(a) != want {
		t.Fatalf("encoding %x, want %s", a, want)
	}
}

func FuzzGeneratorUnmarshal(f *testing.F) {
	g := NewGenerator(3)
	g.Observe(40)
	seed, _ := g.MarshalBinary()
	f.Add(seed)
	f.Add([]byte{1, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		var h Generator
		if err := h.UnmarshalBinary(data); err != nil {
			return
		}
		again, err := h.MarshalBinary()
		if err != nil || string(again) != string(data) {
			t.Fatalf("accepted %x but re-encodes as %x (%v)", data, again, err)
		}
		prev := h.Current()
		h.Observe(0)
		if h.Current() < prev {
			t.Fatalf("decoded generator went backwards")
		}
	})
}
