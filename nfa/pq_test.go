package nfa

import (
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// A queue's unsorted flag is never false while its array is out of order,
// whatever mix of offers, polls, removals and runs built it; and appendRun
// leaves exactly the array that offering the run's entries one by one
// does (java.util.PriorityQueue's layout, which decides the order of
// records), whether it copies the run in one go or not.
func TestAppendRunEqualsOffering(t *testing.T) {
	copied := 0
	rapid.Check(t, func(t *rapid.T) {
		// few distinct start times: equal keys are where layouts differ
		ent := func(label string) qent {
			ts := int64(rapid.IntRange(0, 6).Draw(t, label+"ts"))
			return qent{ts: ts, order: uint64(rapid.IntRange(0, 2).Draw(t, label+"order")), cs: &compState{startTs: ts}}
		}
		var q csQueue
		for step := range rapid.IntRange(5, 60).Draw(t, "steps") {
			switch rapid.IntRange(0, 6).Draw(t, "op") {
			case 6:
				q = csQueue{} // start over, sorted
			case 0, 1:
				q.offerEnt(ent("offer"))
			case 2:
				q.poll()
			case 3:
				k := rapid.IntRange(0, 6).Draw(t, "dropBelow")
				q.removeIf(func(c *compState) bool { return c.startTs < int64(k) })
			default:
				run := make([]qent, rapid.IntRange(0, 6).Draw(t, "runLen"))
				for i := range run {
					run[i] = ent("run")
				}
				if rapid.Bool().Draw(t, "sortRun") {
					// what a step copies: a run of a sorted queue
					slices.SortStableFunc(run, func(x, y qent) int { return cmpEnt(&x, &y) })
				}
				runSorted := slices.IsSortedFunc(run, func(x, y qent) int { return cmpEnt(&x, &y) })
				if runSorted && rapid.Bool().Draw(t, "claimUnsorted") {
					runSorted = false // allowed: the caller may not know
				}
				ref := csQueue{a: slices.Clone(q.a), unsorted: q.unsorted}
				for i := range run {
					ref.offerEnt(run[i])
				}
				inOneGo := len(run) > 1 && runSorted && !q.unsorted && (len(q.a) == 0 || cmpEnt(&q.a[len(q.a)-1], &run[0]) <= 0)
				q.appendRun(run, runSorted)
				if !slices.Equal(q.a, ref.a) {
					t.Fatalf("step %d: appendRun gives %v, offering %v", step, keysOf(q.a), keysOf(ref.a))
				}
				if inOneGo {
					copied++
				}
			}
			if !q.unsorted && !slices.IsSortedFunc(q.a, func(x, y qent) int { return cmpEnt(&x, &y) }) {
				t.Fatalf("step %d: %v is out of order but not marked so", step, keysOf(q.a))
			}
		}
	})
	if copied == 0 {
		t.Fatal("no run was copied in one go")
	}
	t.Logf("%d runs copied in one go", copied)
}

func keysOf(a []qent) [][2]int64 {
	out := make([][2]int64, len(a))
	for i, e := range a {
		out[i] = [2]int64{e.ts, int64(e.order)}
	}
	return out
}

// A queue whose sorted flag were wrong would have advanceTime look at too
// short a prefix for timeouts, and the key, due again at once, would be
// fired for ever. timeAdvance notices (the key is still due) and looks at
// every partial match: the watermark returns, with the timeout.
func TestWrongSortedFlagDoesNotHang(t *testing.T) {
	p, err := CompileBytes([]byte(`{"name":"p","key":"e.k","time":"e.ts","within":10,"stages":[
		{"name":"a","where":"e.t == \"A\""},{"name":"b","where":"e.t == \"B\""}]}`))
	if err != nil {
		t.Fatal(err)
	}
	m := NewMatcher(p)
	m.test.noSeq = true // the general step's queue is what this is about
	m.cfg.AutoWatermark = false
	for _, line := range []string{`{"k":"k","t":"A","ts":1}`, `{"k":"k","t":"A","ts":5}`} {
		in, _, _, err := ParseLine([]byte(line))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.Event(in); err != nil {
			t.Fatal(err)
		}
	}
	m.Watermark(6)
	ks := m.keys["k"]
	a := ks.partial.a
	if len(a) != 3 || a[0].ts != 1 || a[1].ts != 5 || ks.partial.unsorted {
		t.Fatalf("queue %v (unsorted %v), want the partial matches started at 1 and 5 and the start state, sorted", keysOf(a), ks.partial.unsorted)
	}
	a[0], a[1] = a[1], a[0] // out of order, still flagged sorted
	done := make(chan []Record, 1)
	go func() { done <- m.Watermark(12) }()
	select {
	case recs := <-done:
		if len(recs) != 1 || recs[0].Type != "timeout" || recs[0].Start != 1 || recs[0].TimeoutAt != 11 {
			t.Fatalf("records %+v, want the timeout of the partial match started at 1", recs)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the watermark did not return")
	}
}
