package watermark

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// naiveCombine is the definition spelt out: sort the non-idle
// watermarks and take the first; with none, sort all and take the last.
func naiveCombine(parts []Part) (int64, bool) {
	if len(parts) == 0 {
		return MinTime, false
	}
	var active, all []int64
	for _, p := range parts {
		all = append(all, p.Watermark)
		if !p.Idle {
			active = append(active, p.Watermark)
		}
	}
	slices.Sort(active)
	slices.Sort(all)
	if len(active) > 0 {
		return active[0], true
	}
	return all[len(all)-1], true
}

func TestCombineCases(t *testing.T) {
	for _, c := range []struct {
		name  string
		parts []Part
		want  int64
		ok    bool
	}{
		{"none", nil, MinTime, false},
		{"one", []Part{{Watermark: 5}}, 5, true},
		{"min of active", []Part{{Watermark: 9}, {Watermark: 3}, {Watermark: 7}}, 3, true},
		{"idle left out", []Part{{Watermark: 9}, {Watermark: 3, Idle: true}, {Watermark: 7}}, 7, true},
		{"all idle: max", []Part{{Watermark: 9, Idle: true}, {Watermark: 3, Idle: true}}, 9, true},
		{"a partition with nothing yet holds back", []Part{{Watermark: MinTime}, {Watermark: 100}}, MinTime, true},
		{"an idle one with nothing yet does not", []Part{{Watermark: MinTime, Idle: true}, {Watermark: 100}}, 100, true},
	} {
		got, ok := Combine(c.parts)
		if got != c.want || ok != c.ok {
			t.Errorf("%s: Combine = %d, %v; want %d, %v", c.name, got, ok, c.want, c.ok)
		}
	}
}

// Combine equals the naive definition on random inputs and does not
// depend on the order of the partitions.
func TestCombineProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	vals := []int64{MinTime, MinTime + 1, -5, 0, 1, 2, 1000, MaxTime - 1, MaxTime}
	for i := 0; i < 20000; i++ {
		parts := make([]Part, rng.IntN(6))
		for j := range parts {
			parts[j] = Part{Watermark: vals[rng.IntN(len(vals))], Idle: rng.IntN(3) == 0}
		}
		want, wok := naiveCombine(parts)
		got, ok := Combine(parts)
		if got != want || ok != wok {
			t.Fatalf("Combine(%v) = %d, %v; naive %d, %v", parts, got, ok, want, wok)
		}
		rng.Shuffle(len(parts), func(a, b int) { parts[a], parts[b] = parts[b], parts[a] })
		if again, _ := Combine(parts); again != got {
			t.Fatalf("Combine depends on order: %d then %d for %v", got, again, parts)
		}
	}
}

// What is logged through Next is the running maximum of the combined
// values: it never goes back, and logs exactly when it moves forward.
func TestNextMonotone(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for run := 0; run < 200; run++ {
		logged, runMax := MinTime, MinTime
		for i := 0; i < 200; i++ {
			c := rng.Int64N(1000) - 500
			wm, ok := Next(logged, c)
			if ok != (c > runMax) {
				t.Fatalf("Next(%d, %d) logs = %v; running max %d", logged, c, ok, runMax)
			}
			runMax = max(runMax, c)
			if wm < logged {
				t.Fatalf("Next(%d, %d) = %d: back", logged, c, wm)
			}
			logged = wm
			if logged != runMax {
				t.Fatalf("logged %d, running max %d", logged, runMax)
			}
		}
	}
}

func TestActivity(t *testing.T) {
	var a Activity
	steps := []struct {
		wm, now int64
		idle    bool
	}{
		{MinTime, 0, false},   // starts active
		{MinTime, 999, false}, // not yet the timeout
		{MinTime, 1000, true}, // a timeout without a move
		{10, 1500, false},     // a move makes it active again
		{10, 2499, false},
		{10, 2500, true},
		{5, 2600, true}, // lower is no move
		{11, 2600, false},
		{11, 2000, false}, // processing time going back: not idle
	}
	for i, s := range steps {
		if got := a.Observe(s.wm, s.now, 1000); got != s.idle {
			t.Fatalf("step %d: Observe(%d, %d) idle = %v, want %v", i, s.wm, s.now, got, s.idle)
		}
	}
	var never Activity
	never.Observe(1, 0, 0)
	if never.Observe(1, 1<<40, 0) {
		t.Fatal("timeout 0 made a partition idle")
	}
}
