package watermark

import (
	"fmt"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

type tv struct {
	ts int64
	v  int
}

func drain(q *Queue[int], wm int64) []tv {
	var out []tv
	q.PopUpTo(wm, func(ts int64, v int) { out = append(out, tv{ts, v}) })
	return out
}

func contents(q *Queue[int]) []tv {
	var out []tv
	q.Items(func(ts int64, v int) { out = append(out, tv{ts, v}) })
	return out
}

func TestQueueZeroValue(t *testing.T) {
	var q Queue[int]
	if q.Len() != 0 {
		t.Fatalf("Len = %d", q.Len())
	}
	if _, ok := q.MinTime(); ok {
		t.Fatalf("MinTime ok on empty queue")
	}
	q.PopUpTo(MaxTime, func(int64, int) { t.Fatal("popped from empty queue") })
	q.Items(func(int64, int) { t.Fatal("item in empty queue") })
	q.PopUpTo(MaxTime, nil)
}

func TestQueueTable(t *testing.T) {
	tests := []struct {
		name   string
		push   []int64 // values are the push indices
		wm     int64
		popped []tv
		left   []tv
	}{
		{"in order", []int64{1, 2, 3}, 2, []tv{{1, 0}, {2, 1}}, []tv{{3, 2}}},
		{"reverse", []int64{3, 2, 1}, 2, []tv{{1, 2}, {2, 1}}, []tv{{3, 0}}},
		{"ties stable", []int64{5, 5, 4, 5, 4}, 4, []tv{{4, 2}, {4, 4}}, []tv{{5, 0}, {5, 1}, {5, 3}}},
		{"none due", []int64{5, 6}, 4, nil, []tv{{5, 0}, {6, 1}}},
		{"all due", []int64{6, 5}, MaxTime, []tv{{5, 1}, {6, 0}}, nil},
		{"extremes", []int64{MaxTime, MinTime, 0}, MaxTime - 1, []tv{{MinTime, 1}, {0, 2}}, []tv{{MaxTime, 0}}},
		{"min watermark pops MinTime", []int64{MinTime, MinTime + 1}, MinTime, []tv{{MinTime, 0}}, []tv{{MinTime + 1, 1}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var q Queue[int]
			for i, ts := range tc.push {
				q.Push(ts, i)
			}
			if got := drain(&q, tc.wm); !slices.Equal(got, tc.popped) {
				t.Fatalf("popped %v, want %v", got, tc.popped)
			}
			if got := contents(&q); !slices.Equal(got, tc.left) {
				t.Fatalf("left %v, want %v", got, tc.left)
			}
			if q.Len() != len(tc.left) {
				t.Fatalf("Len %d, want %d", q.Len(), len(tc.left))
			}
		})
	}
}

func TestQueueReentrancyPanics(t *testing.T) {
	expectPanic := func(name string, f func()) {
		t.Helper()
		defer func() {
			if recover() == nil {
				t.Errorf("%s did not panic", name)
			}
		}()
		f()
	}
	var q Queue[int]
	q.Push(1, 1)
	q.Push(2, 2)
	expectPanic("Push in Items", func() { q.Items(func(int64, int) { q.Push(0, 0) }) })
	expectPanic("PopUpTo in Items", func() { q.Items(func(int64, int) { q.PopUpTo(5, nil) }) })
	expectPanic("Items in PopUpTo", func() { q.PopUpTo(1, func(int64, int) { q.Items(func(int64, int) {}) }) })
	// Item 1 was popped before the callback panicked; the queue is still usable.
	q.Push(0, 0)
	if got, want := contents(&q), []tv{{0, 0}, {2, 2}}; !slices.Equal(got, want) {
		t.Fatalf("after panics: %v, want %v", got, want)
	}
	// Read-only methods are allowed in callbacks.
	q.PopUpTo(MaxTime, func(int64, int) { _ = q.Len(); _, _ = q.MinTime() })
}

// TestQueueReleasesReferences checks that popped slots no longer hold values.
func TestQueueReleasesReferences(t *testing.T) {
	var q Queue[*int]
	for i := 0; i < 100; i++ {
		v := i
		q.Push(int64(i), &v)
	}
	q.PopUpTo(49, nil)
	for i, it := range q.items[:q.head] {
		if it.v != nil {
			t.Fatalf("slot %d still holds a pointer after pop", i)
		}
	}
	for i := 100; i < 1000; i++ { // forces compaction
		v := i
		q.Push(int64(i), &v)
		q.PopUpTo(int64(i-10), nil)
	}
	full := q.items[:cap(q.items)]
	for i := range full {
		live := i >= q.head && i < len(q.items)
		if !live && full[i].v != nil {
			t.Fatalf("dead slot %d holds a pointer (head=%d len=%d)", i, q.head, len(q.items))
		}
	}
	// With ~11 live items the backing array must stop growing.
	c := cap(q.items)
	for i := 1000; i < 100000; i++ {
		q.Push(int64(i), nil)
		q.PopUpTo(int64(i-10), nil)
	}
	if cap(q.items) != c {
		t.Fatalf("backing array grew from %d to %d with ~11 live items", c, cap(q.items))
	}
}

// TestQueueAgainstReference compares random interleavings of Push and
// PopUpTo with a naive model: append, then stable sort by timestamp.
func TestQueueAgainstReference(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var q Queue[int]
		var ref []tv
		next := 0
		// Timestamps cluster around a moving base so that most pushes are in
		// order or slightly out of order, with occasional outliers and ties.
		base := int64(0)
		tsGen := rapid.OneOf(
			rapid.Int64Range(-3, 3),
			rapid.Int64Range(-40, 40),
			rapid.Just(int64(0)),
		)
		steps := rapid.IntRange(0, 300).Draw(t, "steps")
		for i := 0; i < steps; i++ {
			switch op := rapid.IntRange(0, 9).Draw(t, "op"); {
			case op < 6: // push
				var ts int64
				switch rapid.IntRange(0, 19).Draw(t, "kind") {
				case 0:
					ts = MinTime
				case 1:
					ts = MaxTime
				default:
					ts = base + tsGen.Draw(t, "dts")
					base += rapid.Int64Range(0, 2).Draw(t, "step")
				}
				q.Push(ts, next)
				ref = append(ref, tv{ts, next})
				slices.SortStableFunc(ref, func(a, b tv) int {
					switch {
					case a.ts < b.ts:
						return -1
					case a.ts > b.ts:
						return 1
					}
					return 0
				})
				next++
			case op < 9: // pop
				var wm int64
				if rapid.IntRange(0, 19).Draw(t, "wmkind") == 0 {
					wm = rapid.SampledFrom([]int64{MinTime, MaxTime}).Draw(t, "wmx")
				} else {
					wm = base + rapid.Int64Range(-20, 5).Draw(t, "dwm")
				}
				got := drain(&q, wm)
				n := 0
				for n < len(ref) && ref[n].ts <= wm {
					n++
				}
				want := slices.Clone(ref[:n])
				ref = ref[n:]
				if !slices.Equal(got, want) {
					t.Fatalf("PopUpTo(%d) = %v, want %v", wm, got, want)
				}
			default: // restore from Items into a fresh queue
				var r Queue[int]
				q.Items(func(ts int64, v int) { r.Push(ts, v) })
				q = r
			}
			if q.Len() != len(ref) {
				t.Fatalf("Len = %d, want %d", q.Len(), len(ref))
			}
			m, ok := q.MinTime()
			if ok != (len(ref) > 0) || (ok && m != ref[0].ts) {
				t.Fatalf("MinTime = %d,%t; reference %v", m, ok, ref)
			}
			if got := contents(&q); !slices.Equal(got, ref) && !(len(got) == 0 && len(ref) == 0) {
				t.Fatalf("Items = %v, want %v", got, ref)
			}
		}
	})
}

// xorshift is a tiny deterministic PRNG for benchmarks.
type xorshift uint64

func (x *xorshift) next() uint64 {
	*x ^= *x << 13
	*x ^= *x >> 7
	*x ^= *x << 17
	return uint64(*x)
}

// BenchmarkQueue measures one Push plus its share of PopUpTo, with the
// watermark trailing the pushes by `lag` and drained every 64 pushes.
func BenchmarkQueue(b *testing.B) {
	for _, disorder := range []int64{0, 4, 32} {
		b.Run(fmt.Sprintf("disorder=%d", disorder), func(b *testing.B) {
			var q Queue[int]
			rng := xorshift(0x9e3779b97f4a7c15)
			const lag = 100
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				ts := int64(i)
				if disorder > 0 {
					ts -= int64(rng.next() % uint64(disorder+1))
				}
				q.Push(ts, i)
				if i%64 == 63 {
					q.PopUpTo(int64(i)-lag, func(int64, int) {})
				}
			}
		})
	}
}

func BenchmarkGeneratorObserve(b *testing.B) {
	g := NewGenerator(10)
	rng := xorshift(1)
	for i := 0; b.Loop(); i++ {
		g.Observe(int64(i) - int64(rng.next()%16))
	}
}
