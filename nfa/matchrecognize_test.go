package nfa_test

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/cepcluster/cep/nfa"
)

// track renders positions of one aircraft as input lines in the shape the
// reference document's query reads: {"input": {...}, "record_time": ms}.
func track(icao string, t0 int64, points [][3]float64) []string {
	var out []string
	for i, p := range points {
		onGround := p[2] == 1
		out = append(out, fmt.Sprintf(`{"input":{"icao24":%q,"on_ground":%t,"vertical_rate":%g,"baro_altitude":%g},"record_time":%d}`,
			icao, onGround, p[0], p[1], t0+int64(i)*10_000))
	}
	return out
}

// interleave merges tracks by time (they share t0 and step).
func interleave(tracks ...[]string) []string {
	var out []string
	for i := 0; ; i++ {
		added := false
		for _, t := range tracks {
			if i < len(t) {
				out = append(out, t[i])
				added = true
			}
		}
		if !added {
			return out
		}
	}
}

// The go-around query of the reference document, verbatim (with its
// projecting subquery), finds a go-around in a track that descends below
// 1500 m, keeps descending, climbs twice and climbs above the climb, and
// finds nothing in a normal landing.
func TestGoAroundQueryFromReference(t *testing.T) {
	q, err := os.ReadFile("../examples/go-around.sql")
	if err != nil {
		t.Fatal(err)
	}
	p, err := nfa.CompileSQL(string(q), "go-around")
	if err != nil {
		t.Fatal(err)
	}
	const t0 = 1717236000000
	// vertical_rate, baro_altitude, on_ground
	goAround := track("3c6444", t0, [][3]float64{
		{-6, 1600, 0}, // above 1500: not A
		{-6, 1450, 0}, // A
		{-5, 1300, 0}, // B
		{-5, 1150, 0}, // B
		{-4, 1100, 0}, // B (lowest)
		{4, 1150, 0},  // C
		{5, 1250, 0},  // C
		{6, 1400, 0},  // D: above the last C
		{6, 1550, 0},
	})
	landing := track("4b1805", t0, [][3]float64{
		{-5, 1400, 0}, {-5, 1200, 0}, {-5, 900, 0}, {-4, 500, 0}, {-3, 200, 0}, {0, 0, 1}, {0, 0, 1},
	})
	r := nfa.NewRunner(p)
	var rows []string
	for _, line := range append(interleave(goAround, landing), fmt.Sprintf(`{"$watermark": %d}`, t0+1_000_000)) {
		recs, err := r.Line([]byte(line))
		if err != nil {
			t.Fatal(err)
		}
		for i := range recs {
			b, _ := recs[i].AppendJSON(nil)
			rows = append(rows, string(b))
		}
	}
	for _, rec := range r.Finish(true) {
		b, _ := rec.AppendJSON(nil)
		rows = append(rows, string(b))
	}
	want := fmt.Sprintf(`{"type":"match","pattern":"go-around","key":"3c6444","fields":{"icao24":"3c6444","aircraft":"3c6444","descent_start":%d,"lowest_altitude":1100,"altitude_after_climb":1400}}`, t0+10_000)
	if len(rows) != 1 || rows[0] != want {
		t.Fatalf("got %d rows:\n%s\nwant\n%s", len(rows), strings.Join(rows, "\n"), want)
	}
}

func TestSQLErrors(t *testing.T) {
	for _, tc := range []struct {
		query   string
		columns []string
		want    string
	}{
		{"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES A.amout AS x PATTERN (A) DEFINE A AS A.amount > 1)",
			[]string{"ts", "amount"}, "no field 'amout'. Did you mean 'amount'?"},
		{"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES C.x AS x PATTERN (A B) DEFINE A AS x > 1)",
			nil, "line 1:55: variable 'C' is not defined in PATTERN"},
		{"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES A.x AS x PATTERN (A | B+) DEFINE A AS x > 1)",
			nil, "line 1:78: greedy quantifier '+' on 'B', the last variable of an alternative"},
		{"SELECT * FROM t MATCH_RECOGNIZE (ORDER BY ts MEASURES A.x AS x PATTERN (A B) DEFINE A AS FOO(x) > 1)",
			nil, "line 1:90: function FOO is not supported"},
	} {
		_, err := nfa.CompileSQLColumns(tc.query, "q", tc.columns)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s:\n got %v\nwant %q", tc.query, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Errorf("error is not one line: %q", err)
		}
	}
}

// Navigation over CLASSIFIER() reads the navigated row's variable (SQL:2016
// 5.6.4: FIRST(CLASSIFIER()) of a match A B C is 'A'), in MEASURES and, by
// PREV, in DEFINE.
func TestClassifierUnderNavigation(t *testing.T) {
	p, err := nfa.CompileSQL(`SELECT * FROM t MATCH_RECOGNIZE (
		ORDER BY ts
		MEASURES FIRST(CLASSIFIER()) AS f, FIRST(CLASSIFIER(), 1) AS f1, LAST(CLASSIFIER(), 1) AS l1,
			LAST(CLASSIFIER()) AS l, CLASSIFIER() AS c
		AFTER MATCH SKIP PAST LAST ROW
		PATTERN (A B C)
		DEFINE A AS v = 'a', C AS PREV(CLASSIFIER()) = 'B')`, "q")
	if err != nil {
		t.Fatal(err)
	}
	r := nfa.NewRunner(p)
	var rows []string
	for _, line := range []string{`{"v":"a","ts":1}`, `{"v":"b","ts":2}`, `{"v":"c","ts":3}`, `{"$watermark":10}`} {
		recs, err := r.Line([]byte(line))
		if err != nil {
			t.Fatal(err)
		}
		for i := range recs {
			b, _ := recs[i].AppendJSON(nil)
			rows = append(rows, string(b))
		}
	}
	want := `{"type":"match","pattern":"q","key":"","fields":{"f":"A","f1":"B","l1":"B","l":"C","c":"C"}}`
	if len(rows) != 1 || rows[0] != want {
		t.Fatalf("got %d rows:\n%s\nwant\n%s", len(rows), strings.Join(rows, "\n"), want)
	}
}

// ONE ROW PER MATCH SHOW TIMEOUT MATCHES reports a partial match that
// WITHIN ends, with its rows by variable and the measures over them; a
// partial match that a row ends first (strict contiguity) is not one.
func TestSQLShowTimeoutMatches(t *testing.T) {
	const q = `SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts
		MEASURES A.ts AS a_ts, COUNT(B.ts) AS bs, LAST(CLASSIFIER()) AS reached
		ONE ROW PER MATCH SHOW TIMEOUT MATCHES
		PATTERN (A B{2} C) WITHIN INTERVAL '2' SECOND
		DEFINE A AS v = 'a', B AS v = 'b', C AS v = 'c')`
	p, err := nfa.CompileSQL(q, "q")
	if err != nil {
		t.Fatal(err)
	}
	r := nfa.NewRunner(p)
	var got []string
	for _, line := range []string{
		`{"k":"x","v":"a","ts":1000}`, `{"k":"x","v":"b","ts":1500}`, `{"k":"x","v":"b","ts":1600}`, `{"k":"x","v":"c","ts":1700}`, // a match
		`{"k":"y","v":"a","ts":3000}`, `{"k":"y","v":"b","ts":3500}`, // times out at 5000
		`{"k":"z","v":"a","ts":3600}`, `{"k":"z","v":"x","ts":3700}`, // ended by a row: nothing
		`{"k":"y","v":"x","ts":6000}`,
	} {
		recs, err := r.Line([]byte(line))
		if err != nil {
			t.Fatal(err)
		}
		for i := range recs {
			b, _ := recs[i].AppendJSON(nil)
			got = append(got, string(b))
		}
	}
	for _, rec := range r.Finish(true) {
		b, _ := rec.AppendJSON(nil)
		got = append(got, string(b))
	}
	want := []string{
		`{"type":"match","pattern":"q","key":"x","fields":{"k":"x","a_ts":1000,"bs":2,"reached":"C"}}`,
		`{"type":"timeout","pattern":"q","key":"y","start":3000,"timeoutAt":5000,"events":{"A":[{"k":"y","v":"a","ts":3000}],"B":[{"k":"y","v":"b","ts":3500}]},"fields":{"k":"y","a_ts":3000,"bs":1,"reached":"B"}}`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// without the clause, the same query reports no timeout
	p, err = nfa.CompileSQL(strings.Replace(q, " SHOW TIMEOUT MATCHES", "", 1), "q")
	if err != nil {
		t.Fatal(err)
	}
	r = nfa.NewRunner(p)
	for _, line := range []string{`{"k":"y","v":"a","ts":3000}`, `{"k":"y","v":"x","ts":6000}`} {
		recs, _ := r.Line([]byte(line))
		if len(recs) > 0 {
			t.Fatalf("records without SHOW TIMEOUT MATCHES: %v", recs)
		}
	}
	if _, err := nfa.CompileSQL(strings.Replace(q, " WITHIN INTERVAL '2' SECOND", "", 1), "q"); err == nil || !strings.Contains(err.Error(), "line 3:21: SHOW TIMEOUT MATCHES needs WITHIN") {
		t.Fatalf("without WITHIN: %v", err)
	}
}
