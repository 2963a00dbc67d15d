// Package offline is what tests hold a shard's or a cluster's output up
// to: the records the offline engine (`cepctl run`, without its final
// watermark) makes of the same lines, and a record as the engine writes
// it, without the id a cluster gives it.
package offline

import (
	"sort"
	"strings"
	"testing"

	"github.com/cepcluster/cep/nfa"
)

// Records is the JSON of the records the offline engine makes of lines
// for spec, sorted.
func Records(t testing.TB, spec []byte, lines []string) []string {
	t.Helper()
	p, err := nfa.CompileBytes(spec)
	if err != nil {
		t.Fatal(err)
	}
	r := nfa.NewRunner(p)
	var out []string
	for _, l := range lines {
		recs, err := r.Line([]byte(l))
		if err != nil {
			t.Fatal(err)
		}
		for i := range recs {
			b, _ := recs[i].AppendJSON(nil)
			out = append(out, string(b))
		}
	}
	sort.Strings(out)
	return out
}

// WithoutID is a record's JSON without its id field (the offline engine
// gives none).
func WithoutID(rec string) string {
	if j := strings.Index(rec, `,"id":"`); j >= 0 {
		k := strings.Index(rec[j+7:], `"`)
		rec = rec[:j] + rec[j+7+k+1:]
	}
	return rec
}
