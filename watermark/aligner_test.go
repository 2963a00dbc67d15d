package watermark

import (
	"encoding/hex"
	"math/big"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

func TestNewAlignerPanics(t *testing.T) {
	tests := map[string]func(){
		"no sources":     func() { NewAligner(nil, 0, 0) },
		"duplicate":      func() { NewAligner([]string{"a", "b", "a"}, 0, 0) },
		"negative idle":  func() { NewAligner([]string{"a"}, -1, 0) },
		"negative drift": func() { NewAligner([]string{"a"}, 0, -1) },
	}
	for _, name := range []string{"no sources", "duplicate", "negative idle", "negative drift"} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("did not panic")
				}
			}()
			tests[name]()
		})
	}
}

func TestAlignerUnknownSourcePanics(t *testing.T) {
	a := NewAligner([]string{"a"}, 0, 0)
	for name, f := range map[string]func(){
		"Observe":         func() { a.Observe("b", 1, 0) },
		"Paused":          func() { a.Paused("b", 0) },
		"Idle":            func() { a.Idle("b", 0) },
		"SourceWatermark": func() { a.SourceWatermark("b") },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s on unknown source did not panic", name)
				}
			}()
			f()
		}()
	}
}

func TestAlignerDoesNotAliasSources(t *testing.T) {
	in := []string{"b", "a"}
	a := NewAligner(in, 0, 0)
	in[0] = "z"
	if got := a.Sources(); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("Sources = %v", got)
	}
	if !slices.Equal(in, []string{"z", "a"}) {
		t.Fatalf("NewAligner reordered its argument: %v", in)
	}
}

func TestAlignerTable(t *testing.T) {
	type obs struct {
		src     string
		wm, now int64
	}
	tests := []struct {
		name        string
		idle, drift int64
		obs         []obs
		now         int64
		want        int64
		paused      []string
	}{
		{"both reported", 0, 0, []obs{{"a", 5, 0}, {"b", 5, 0}}, 0, 5, nil},
		{"min of two", 0, 0, []obs{{"a", 5, 0}, {"b", 3, 0}}, 0, 3, nil},
		{"unreported holds at min", 0, 0, []obs{{"a", 5, 0}}, 1 << 40, MinTime, nil},
		{"unreported times out", 10, 0, []obs{{"a", 5, 0}, {"a", 6, 10}}, 10, 6, nil},
		{"idle boundary exclusive", 10, 0, []obs{{"a", 5, 0}, {"b", 3, 1}}, 10, 3, nil},
		{"idle boundary", 10, 0, []obs{{"a", 5, 0}, {"b", 3, 1}, {"a", 6, 11}}, 11, 6, nil},
		{"all idle max", 10, 0, []obs{{"a", 5, 0}, {"b", 3, 0}}, 10, 5, nil},
		{"drift pauses", 0, 2, []obs{{"a", 5, 0}, {"b", 2, 0}}, 0, 2, []string{"a"}},
		{"drift boundary", 0, 3, []obs{{"a", 5, 0}, {"b", 2, 0}}, 0, 2, nil},
		{"now before lastActive", 10, 0, []obs{{"a", 5, 100}, {"b", 3, 100}}, 50, 3, nil},
		{"extreme now", 1, 0, []obs{{"a", 5, MinTime}, {"b", 3, MaxTime}}, MaxTime, 3, nil},
		{"max idle timeout", MaxTime, 0, []obs{{"a", 5, MinTime}, {"b", 3, MaxTime}}, MaxTime, 3, nil},
		{"final watermarks", 0, 1, []obs{{"a", MaxTime, 0}, {"b", MaxTime, 0}}, 0, MaxTime, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := NewAligner([]string{"a", "b"}, tc.idle, tc.drift)
			for _, o := range tc.obs {
				a.Observe(o.src, o.wm, o.now)
			}
			if got := a.Peek(tc.now); got != tc.want {
				t.Fatalf("Peek = %d, want %d", got, tc.want)
			}
			var paused []string
			for _, s := range a.Sources() {
				if a.Paused(s, tc.now) {
					paused = append(paused, s)
				}
			}
			if !slices.Equal(paused, tc.paused) {
				t.Fatalf("paused %v, want %v", paused, tc.paused)
			}
			if got := a.Watermark(tc.now); got != tc.want {
				t.Fatalf("Watermark = %d, want %d", got, tc.want)
			}
		})
	}
}

// alignerModel is an independent, naive statement of the Aligner's rules.
type alignerModel struct {
	idle, drift int64
	wm          map[string]int64
	active      map[string]int64 // last processing time the source was active
	started     bool
	last        int64
}

func (m *alignerModel) begin(now int64) {
	if !m.started {
		m.started = true
		for s := range m.wm {
			m.active[s] = now
		}
	}
}

func (m *alignerModel) isIdle(s string, now int64) bool {
	if m.idle == 0 || !m.started {
		return false
	}
	diff := new(big.Int).Sub(big.NewInt(now), big.NewInt(m.active[s]))
	return diff.Cmp(big.NewInt(m.idle)) >= 0
}

func (m *alignerModel) peek(now int64) int64 {
	var act, all []int64
	for s, w := range m.wm {
		all = append(all, w)
		if !m.isIdle(s, now) {
			act = append(act, w)
		}
	}
	var w int64
	if len(act) > 0 {
		w = slices.Min(act)
	} else {
		w = slices.Max(all)
	}
	return max(w, m.last)
}

func TestAlignerAgainstModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		names := rapid.SliceOfNDistinct(rapid.SampledFrom([]string{"a", "b", "c", "dd", "e"}), 1, 5, rapid.ID[string]).Draw(t, "sources")
		idle := rapid.OneOf(rapid.Just(int64(0)), rapid.Int64Range(1, 30), rapid.Just(MaxTime)).Draw(t, "idle")
		drift := rapid.OneOf(rapid.Just(int64(0)), rapid.Int64Range(1, 30), rapid.Just(MaxTime)).Draw(t, "drift")
		a := NewAligner(names, idle, drift)
		m := &alignerModel{idle: idle, drift: drift, wm: map[string]int64{}, active: map[string]int64{}, last: MinTime}
		for _, s := range names {
			m.wm[s] = MinTime
		}
		now := rapid.OneOf(rapid.Int64Range(-100, 100), rapid.Just(MinTime)).Draw(t, "start")
		srcWM := map[string]int64{}
		steps := rapid.IntRange(0, 80).Draw(t, "steps")
		prev := MinTime
		for i := 0; i < steps; i++ {
			if rapid.Bool().Draw(t, "tick") && now < MaxTime-40 {
				now += rapid.Int64Range(0, 40).Draw(t, "dt")
			}
			src := rapid.SampledFrom(names).Draw(t, "src")
			switch rapid.IntRange(0, 5).Draw(t, "op") {
			case 0, 1, 2:
				w := srcWM[src] + rapid.Int64Range(-5, 20).Draw(t, "dwm")
				if rapid.IntRange(0, 30).Draw(t, "final") == 0 {
					w = MaxTime
				} else if srcWM[src] > MaxTime-100 {
					w = MaxTime
				}
				srcWM[src] = w
				a.Observe(src, w, now)
				m.begin(now)
				m.wm[src] = max(m.wm[src], w)
				m.active[src] = max(m.active[src], now)
			case 3:
				got := a.Watermark(now)
				m.begin(now)
				want := m.peek(now)
				m.last = want
				if got != want {
					t.Fatalf("Watermark(%d) = %d, model %d", now, got, want)
				}
				if got < prev {
					t.Fatalf("Watermark decreased %d -> %d", prev, got)
				}
				prev = got
			case 4:
				data, err := a.MarshalBinary()
				if err != nil {
					t.Fatal(err)
				}
				var b Aligner
				if err := b.UnmarshalBinary(data); err != nil {
					t.Fatalf("unmarshal %x: %v", data, err)
				}
				a = &b
			case 5:
				// Queries must not change state.
				before, _ := a.MarshalBinary()
				_ = a.Peek(now)
				_ = a.Paused(src, now)
				_ = a.Idle(src, now)
				after, _ := a.MarshalBinary()
				if string(before) != string(after) {
					t.Fatalf("query changed state")
				}
			}
			want := m.peek(now)
			if got := a.Peek(now); got != want {
				t.Fatalf("Peek(%d) = %d, model %d", now, got, want)
			}
			for _, s := range names {
				if got := a.SourceWatermark(s); got != m.wm[s] {
					t.Fatalf("SourceWatermark(%s) = %d, model %d", s, got, m.wm[s])
				}
				if got, wantIdle := a.Idle(s, now), m.isIdle(s, now); got != wantIdle {
					t.Fatalf("Idle(%s, %d) = %t, model %t", s, now, got, wantIdle)
				}
				w := m.wm[s]
				ahead := new(big.Int).Sub(big.NewInt(w), big.NewInt(want))
				wantP := drift > 0 && ahead.Cmp(big.NewInt(drift)) > 0
				if got := a.Paused(s, now); got != wantP {
					t.Fatalf("Paused(%s, %d) = %t, model %t (wm %d, combined %d)", s, now, got, wantP, w, want)
				}
			}
		}
	})
}

func TestAlignerMarshal(t *testing.T) {
	a := NewAligner([]string{"b", "a"}, 100, 10)
	a.Observe("b", 40, 1000)
	a.Observe("a", 50, 1010)
	a.Watermark(1020)
	data, err := a.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	const want = "01c8011401" + "50" + "02" + "0161" + "64" + "e40f" + "0162" + "50" + "d00f"
	if got := hex.EncodeToString(data); got != want {
		t.Fatalf("encoding %s, want %s", got, want)
	}
	var b Aligner
	if err := b.UnmarshalBinary(data); err != nil {
		t.Fatal(err)
	}
	if b.Peek(1020) != 40 || b.IdleTimeout() != 100 || b.MaxDrift() != 10 || !slices.Equal(b.Sources(), []string{"a", "b"}) {
		t.Fatalf("decoded aligner differs: %+v", b)
	}
}

func TestAlignerUnmarshalErrors(t *testing.T) {
	a := NewAligner([]string{"a", "b"}, 100, 10)
	a.Observe("a", 5, 7)
	good, _ := a.MarshalBinary()
	mut := func(f func(b []byte) []byte) []byte { return f(slices.Clone(good)) }
	tests := map[string][]byte{
		"empty":          {},
		"bad version":    mut(func(b []byte) []byte { b[0] = 9; return b }),
		"truncated":      good[:len(good)-1],
		"trailing":       append(slices.Clone(good), 0),
		"bad started":    mut(func(b []byte) []byte { b[4] = 2; return b }),
		"zero sources":   {1, 0, 0, 0, 1, 0},
		"huge count":     {1, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff, 0x0f, 1, 'a', 0, 0},
		"unsorted":       {1, 0, 0, 0, 1, 2, 1, 'b', 0, 0, 1, 'a', 0, 0},
		"duplicate":      {1, 0, 0, 0, 1, 2, 1, 'a', 0, 0, 1, 'a', 0, 0},
		"negative idle":  {1, 1, 0, 0, 1, 1, 1, 'a', 0, 0},
		"negative drift": {1, 0, 1, 0, 1, 1, 1, 'a', 0, 0},
		"non-canonical":  {1, 0x80, 0x00, 0, 0, 1, 1, 1, 'a', 0, 0},
		"name too long":  {1, 0, 0, 0, 1, 1, 9, 'a', 0, 0},
	}
	for name, data := range tests {
		t.Run(name, func(t *testing.T) {
			b := NewAligner([]string{"x"}, 0, 0)
			before, _ := b.MarshalBinary()
			err := b.UnmarshalBinary(data)
			if err == nil {
				t.Fatalf("UnmarshalBinary(%x) succeeded", data)
			}
			t.Log(err)
			after, _ := b.MarshalBinary()
			if string(before) != string(after) {
				t.Fatalf("failed UnmarshalBinary modified the aligner")
			}
		})
	}
	// Sanity: the minimal valid form is accepted.
	var b Aligner
	if err := b.UnmarshalBinary([]byte{1, 0, 0, 0, 1, 1, 1, 'a', 0, 0}); err != nil {
		t.Fatalf("minimal encoding rejected: %v", err)
	}
}

func FuzzAlignerUnmarshal(f *testing.F) {
	a := NewAligner([]string{"a", "b"}, 100, 10)
	a.Observe("a", 5, 7)
	seed, _ := a.MarshalBinary()
	f.Add(seed)
	f.Add([]byte{1, 0, 0, 0, 1, 1, 1, 'a', 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		var b Aligner
		if err := b.UnmarshalBinary(data); err != nil {
			return
		}
		again, err := b.MarshalBinary()
		if err != nil || string(again) != string(data) {
			t.Fatalf("accepted %x but re-encodes as %x (%v)", data, again, err)
		}
		for _, s := range b.Sources() {
			b.Observe(s, 0, 0)
			_ = b.Paused(s, 0)
		}
		_ = b.Watermark(0)
	})
}
