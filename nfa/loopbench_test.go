package nfa_test

import (
	"encoding/json"
	"fmt"
	"os"
	"testing"

	"github.com/cepcluster/cep/nfa"
)

// The looping shapes of BENCHMARKS.md's "Looping stages": one key, n
// consecutive A events then one B. Every A starts a partial match and every
// partial match takes every later A, so the run makes n(n+1)/2 partial-match
// steps and one match; the time per step must not grow with n.
const (
	loopSQL = `SELECT * FROM record MATCH_RECOGNIZE (
  PARTITION BY k ORDER BY ts
  MEASURES FIRST(A.ts) AS s
  AFTER MATCH SKIP PAST LAST ROW
  PATTERN (A+ B)
  DEFINE A AS A.t = 'A', B AS B.t = 'B')`
	loopStrict = `{"name":"loop-strict","key":"e.k","time":"e.ts","skip":"skipPastLastEvent",
  "stages":[{"name":"a","where":"e.t == \"A\"","oneOrMore":true,"consecutive":true},
            {"name":"b","contiguity":"next","where":"e.t == \"B\""}]}`
	loopRelaxed = `{"name":"loop-relaxed","key":"e.k","time":"e.ts","skip":"skipPastLastEvent",
  "stages":[{"name":"a","where":"e.t == \"A\"","oneOrMore":true},
            {"name":"b","where":"e.t == \"B\""}]}`
)

func loopPatterns(tb testing.TB) []struct {
	name string
	p    *nfa.Pattern
} {
	qp, err := nfa.CompileSQL(loopSQL, "loop")
	if err != nil {
		tb.Fatal(err)
	}
	return []struct {
		name string
		p    *nfa.Pattern
	}{{"sql", qp}, {"strict", mustCompile(tb, loopStrict)}, {"relaxed", mustCompile(tb, loopRelaxed)}}
}

func loopInput(tb testing.TB, n int) []nfa.Input {
	in := make([]nfa.Input, 0, n+1)
	for i := 0; i <= n; i++ {
		t := "A"
		if i == n {
			t = "B"
		}
		data := map[string]any{"k": "x", "t": t, "ts": int64(i + 1)}
		raw, err := json.Marshal(data)
		if err != nil {
			tb.Fatal(err)
		}
		in = append(in, nfa.Input{Data: data, Raw: raw})
	}
	return in
}

// runLoop feeds the input and returns the number of matches.
func runLoop(p *nfa.Pattern, in []nfa.Input) int {
	m := nfa.NewMatcher(p)
	c := 0
	for i := range in {
		c += countType(m.EventAt("x", int64(i+1), in[i]), "match")
	}
	return c + countType(m.Finish(true), "match")
}

func BenchmarkLoop(b *testing.B) {
	for _, tc := range loopPatterns(b) {
		for _, n := range []int{100, 200, 400, 800} {
			in := loopInput(b, n)
			b.Run(fmt.Sprintf("%s/n=%d", tc.name, n), func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					if c := runLoop(tc.p, in); c != 1 {
						b.Fatalf("%d matches, want 1", c)
					}
				}
				steps := float64(n) * float64(n+1) / 2
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/steps, "ns/step")
			})
		}
	}
}

// goAroundInput is aircraft tracks for examples/go-around.sql, as JSON
// lines: each descends for 170 readings a second apart (all within its 3
// minute window, every reading an A and a B) and then climbs for 10,
// interleaved.
func goAroundInput(aircraft int) [][]byte {
	const t0 = 1717236000000
	var lines [][]byte
	for i := 0; i < 180; i++ {
		vr, alt := -5, 1450-i*5
		if i >= 170 {
			vr, alt = 5, 600+(i-170)*20
		}
		for a := 0; a < aircraft; a++ {
			lines = append(lines, fmt.Appendf(nil, `{"input":{"icao24":"a%05d","on_ground":false,"vertical_rate":%d,"baro_altitude":%d},"record_time":%d}`,
				a, vr, alt, t0+i*1000))
		}
	}
	return lines
}

func BenchmarkGoAround(b *testing.B) {
	q, err := os.ReadFile("../examples/go-around.sql")
	if err != nil {
		b.Fatal(err)
	}
	p, err := nfa.CompileSQL(string(q), "go-around")
	if err != nil {
		b.Fatal(err)
	}
	lines := goAroundInput(20)
	for i := 0; i < b.N; i++ {
		r := nfa.NewRunner(p)
		c := 0
		for _, l := range lines {
			recs, err := r.Line(l)
			if err != nil {
				b.Fatal(err)
			}
			c += countType(recs, "match")
		}
		if c += countType(r.Finish(true), "match"); c != 20 {
			b.Fatalf("%d matches, want 20", c)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(lines)), "ns/event")
}
