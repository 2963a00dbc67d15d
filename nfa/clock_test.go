package nfa

import (
	"fmt"
	"os"
	"slices"
	"testing"

	"github.com/cepcluster/cep/nfa/expr"
	"github.com/cepcluster/cep/watermark"
)

// A Clocked matcher's events move only its source's progress; its
// watermark moves with Clock. Given, after each event, the watermark an
// unclocked matcher reaches, it produces the same records: the clock
// is the only difference.
func TestClockedFollowsTheLoggedClock(t *testing.T) {
	spec, err := os.ReadFile("../examples/login-fail-logout.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p, err := CompileBytes(spec)
	if err != nil {
		t.Fatal(err)
	}
	auto, clocked := NewMatcher(p), NewMatcher(p)
	clocked.SetClocked(true)
	var lines []string
	for i := 0; i < 300; i++ {
		typ := []string{"LOGIN", "PAYMENT_FAILED", "PAYMENT_FAILED", "LOGOUT"}[i%4]
		lines = append(lines, fmt.Sprintf(`{"account":"acc-%d","type":%q,"amount":1,"ts":%d}`, (i/4)%7, typ, 1000+i*400-(i%3)*300))
	}
	var want, got []string
	for i, l := range lines {
		ev, err := expr.DecodeEvent([]byte(l))
		if err != nil {
			t.Fatal(err)
		}
		in := Input{Data: ev, Raw: []byte(l), Pos: uint64(i + 1)}
		for _, r := range mustEvent(t, auto, in) {
			want = append(want, recString(r))
		}
		before := clocked.CurrentWatermark()
		for _, r := range mustEvent(t, clocked, in) {
			got = append(got, recString(r))
		}
		if clocked.CurrentWatermark() != before {
			t.Fatalf("event %d moved a clocked matcher's watermark from %d to %d", i, before, clocked.CurrentWatermark())
		}
		if clocked.SourceProgress("") != auto.CurrentWatermark() {
			t.Fatalf("event %d: progress %d, unclocked watermark %d", i, clocked.SourceProgress(""), auto.CurrentWatermark())
		}
		for _, r := range clocked.Clock("", auto.CurrentWatermark()) {
			got = append(got, recString(r))
		}
		if clocked.SourceClock("") != auto.CurrentWatermark() {
			t.Fatalf("event %d: clock %d, want %d", i, clocked.SourceClock(""), auto.CurrentWatermark())
		}
	}
	if len(want) == 0 {
		t.Fatal("the input produced no record: the comparison shows nothing")
	}
	if fmt.Sprint(want) != fmt.Sprint(got) {
		t.Fatalf("clocked records differ:\n got %v\nwant %v", got, want)
	}
	// a clock behind this matcher's own progress moves the watermark to
	// the clock, not to the progress
	ahead := NewMatcher(p)
	ahead.SetClocked(true)
	for i, l := range []string{`{"account":"a","type":"LOGIN","ts":1000}`, `{"account":"b","type":"LOGIN","ts":90000}`} {
		ev, _ := expr.DecodeEvent([]byte(l))
		mustEvent(t, ahead, Input{Data: ev, Raw: []byte(l), Pos: uint64(i + 1)})
	}
	ahead.Clock("", 500)
	if ahead.CurrentWatermark() != 500 || ahead.SourceProgress("") != 90000-2000-1 {
		t.Fatalf("after Clock(500): watermark %d, progress %d", ahead.CurrentWatermark(), ahead.SourceProgress(""))
	}
	// a clock going back is ignored
	wm := clocked.CurrentWatermark()
	clocked.Clock("", wm-1000)
	if clocked.CurrentWatermark() != wm {
		t.Fatalf("Clock back moved the watermark to %d from %d", clocked.CurrentWatermark(), wm)
	}
	// the future-skew bound judges against the clock
	if err := clocked.CheckTime("", watermark.AddSat(wm, 2*DefaultMaxFutureSkew)); !IsTimeError(err) {
		t.Fatalf("a time two days ahead of the clock was not refused: %v", err)
	}
}

func mustEvent(t *testing.T, m *Matcher, in Input) []Record {
	t.Helper()
	recs, err := m.Event(in)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

func recString(r Record) string {
	b, _ := r.AppendJSON(nil)
	return string(b)
}

// A clocked matcher that stops taking the clock (a shard left alone)
// catches up at once with what its events show: from any point, its
// records so far equal those of a matcher that never took the clock (in
// another order across keys: they come at once), one source or several.
func TestUnclockCatchesUp(t *testing.T) {
	one, err := os.ReadFile("../examples/login-fail-logout.yaml")
	if err != nil {
		t.Fatal(err)
	}
	two := []byte("name: two\nsource: [a, b]\nkey: e.account\ntime: e.ts\noutOfOrderness: 500\nstages:\n  - name: login\n    where: e.type == \"LOGIN\"\n  - name: logout\n    where: e.type == \"LOGOUT\"\n")
	for _, spec := range [][]byte{one, two} {
		p, err := CompileBytes(spec)
		if err != nil {
			t.Fatal(err)
		}
		name := p.Name()
		var lines []string
		for i := 0; i < 120; i++ {
			typ := []string{"LOGIN", "PAYMENT_FAILED", "PAYMENT_FAILED", "LOGOUT"}[i%4]
			lines = append(lines, fmt.Sprintf(`{"account":"acc-%d","type":%q,"amount":1,"ts":%d}`, (i/4)%7, typ, 1000+i*400-(i%3)*300))
		}
		feed := func(m *Matcher, i int, l string) []Record {
			ev, err := expr.DecodeEvent([]byte(l))
			if err != nil {
				t.Fatal(err)
			}
			in := Input{Data: ev, Raw: []byte(l), Pos: uint64(i + 1)}
			if !m.MultiSource() {
				return mustEvent(t, m, in)
			}
			key, err1 := m.KeyOf(in)
			ts, err2 := m.TimeOf(in)
			if err1 != nil || err2 != nil {
				t.Fatal(err1, err2)
			}
			return m.EventFrom([]string{"a", "b"}[i%2], key, ts, in)
		}
		for _, cut := range []int{1, 17, 60, 119} {
			auto, clocked := NewMatcher(p), NewMatcher(p)
			clocked.SetClocked(true)
			var want, got []string
			for i, l := range lines[:cut+1] {
				for _, r := range feed(auto, i, l) {
					want = append(want, recString(r))
				}
				for _, r := range feed(clocked, i, l) {
					got = append(got, recString(r))
				}
			}
			for _, r := range clocked.Unclock() {
				got = append(got, recString(r))
			}
			slices.Sort(want)
			slices.Sort(got)
			if cut == 119 && len(want) == 0 {
				t.Fatalf("%s: the input produced no record: the comparison shows nothing", name)
			}
			if fmt.Sprint(want) != fmt.Sprint(got) || clocked.CurrentWatermark() != auto.CurrentWatermark() {
				t.Fatalf("%s, unclocked after event %d: watermark %d, want %d; records\n got %v\nwant %v", name, cut, clocked.CurrentWatermark(), auto.CurrentWatermark(), got, want)
			}
		}
	}
}

// Events of two aligned sources read before the matcher's first tick
// leave no source idle at that tick: the source ahead stays paused until
// the other catches up. (They were marked active at processing time 0,
// so the first tick, at the wall clock, found both silent since 1970:
// the other idle, the source ahead read on; seen as a shard reading 860
// events of one source while the other held the watermark.)
func TestAlignedSourcesNotIdleAtTheFirstTick(t *testing.T) {
	p, err := CompileBytes([]byte(`{"name":"two","source":["fast","slow"],"key":"e.k","time":"e.ts","maxDrift":1000,"idleTimeout":3600000,
	  "stages":[{"name":"x","where":"e.t == \"A\""},{"name":"y","where":"e.t == \"B\""}]}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, clocked := range []bool{false, true} {
		m := NewMatcher(p)
		m.SetClocked(clocked)
		event := func(source string, ts int64) {
			in := Input{Data: map[string]any{"k": "k", "t": "A", "ts": ts}, Raw: []byte(`{}`), Pos: uint64(ts)}
			m.EventFrom(source, "k", ts, in)
			if clocked {
				m.Clock(source, ts) // the shard's clock follows its own events
			}
		}
		event("slow", 90)
		event("fast", 5000)
		if !m.Paused("fast") {
			t.Fatalf("clocked %v: fast, 4.9 s ahead of slow, not paused before any tick", clocked)
		}
		m.Tick(1_764_000_000_000) // the first tick, at the wall clock
		if !m.Paused("fast") {
			t.Fatalf("clocked %v: fast not paused after the first tick: slow counts as idle", clocked)
		}
		if m.Paused("slow") {
			t.Fatalf("clocked %v: slow paused", clocked)
		}
	}
}
