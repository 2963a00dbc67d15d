package nfa_test

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/cepcluster/cep/nfa"
)

// atLimitDocument is a pattern document near every document limit at
// once: MaxEmitFields fields whose expressions fill MaxExpressionBytes, a
// group taken MaxQuantifier times that expands to MaxExpandedStages, and
// white space up to MaxDocumentBytes.
func atLimitDocument(tb testing.TB) []byte {
	var inner []map[string]any
	for i := range nfa.MaxExpandedStages / nfa.MaxQuantifier {
		inner = append(inner, map[string]any{"name": fmt.Sprintf("g%d", i), "where": fmt.Sprintf(`e.t == "G%d"`, i)})
	}
	doc := map[string]any{"name": "at-limit", "key": "e.k", "time": "e.ts", "within": "1h",
		"stages": []map[string]any{{"name": "grp", "group": inner, "times": nfa.MaxQuantifier}}}
	per := (nfa.MaxExpressionBytes - 200) / nfa.MaxEmitFields
	emit := map[string]string{}
	term := `size(events("g0")) + `
	for i := range nfa.MaxEmitFields {
		emit[fmt.Sprintf("f%03d", i)] = strings.Repeat(term, (per-1)/len(term)) + "0"
	}
	doc["emit"] = emit
	b, err := json.Marshal(doc)
	if err != nil {
		tb.Fatal(err)
	}
	if len(b) > nfa.MaxDocumentBytes {
		tb.Fatalf("document of %d bytes", len(b))
	}
	return append(b, strings.Repeat(" ", nfa.MaxDocumentBytes-len(b))...)
}

// heapMB reports the live heap while keep is still in use.
func heapMB(b *testing.B, keep any) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(ms.HeapAlloc)/(1<<20), "heap-MB")
	runtime.KeepAlive(keep)
}

// BenchmarkAtLimits measures what the limits let through: compiling (the
// work of a deploy) the largest document, and 1,000 events of one key
// through the costliest quantifier and the longest expanded sequence.
func BenchmarkAtLimits(b *testing.B) {
	b.Run("deploy-document", func(b *testing.B) {
		doc := atLimitDocument(b)
		b.SetBytes(int64(len(doc)))
		var p *nfa.Pattern
		for b.Loop() {
			var err error
			if p, err = nfa.CompileBytes(doc); err != nil {
				b.Fatal(err)
			}
		}
		heapMB(b, p)
	})
	run := func(b *testing.B, p *nfa.Pattern, line func(i int) string) {
		var r *nfa.Runner
		for b.Loop() {
			r = nfa.NewRunner(p)
			for i := range 1000 {
				if _, err := r.Line([]byte(line(i))); err != nil {
					b.Fatal(err)
				}
			}
			r.Finish(true)
		}
		heapMB(b, r)
	}
	b.Run("sql-quantifier/1000-events-one-key", func(b *testing.B) {
		q := fmt.Sprintf(`SELECT * FROM s MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts MEASURES FIRST(A.ts) AS f PATTERN (A{1,%d} B) DEFINE A AS t = 'A', B AS t = 'B')`, nfa.MaxQuantifier)
		p, err := nfa.CompileSQL(q, "q")
		if err != nil {
			b.Fatal(err)
		}
		run(b, p, func(i int) string {
			t := "A"
			if i%(nfa.MaxQuantifier+1) == nfa.MaxQuantifier {
				t = "B"
			}
			return fmt.Sprintf(`{"k":"x","t":%q,"ts":%d}`, t, i+1)
		})
	})
	b.Run("expanded-stages/1000-events-one-key", func(b *testing.B) {
		p, err := nfa.CompileBytes(atLimitDocument(b))
		if err != nil {
			b.Fatal(err)
		}
		n := nfa.MaxExpandedStages / nfa.MaxQuantifier
		run(b, p, func(i int) string { return fmt.Sprintf(`{"k":"x","t":"G%d","ts":%d}`, i%n, i+1) })
	})
}
