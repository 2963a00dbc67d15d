// Package fbom defines benchmark 3's workload, shared by the engine
// benchmark (nfa/bench_test.go) and the cluster benchmark (cmd/cepbench):
// followedBy + oneOrMore + within with a condition over events(). An A (1 %
// of the events) starts a partial match that takes every later B (20 %)
// whose v exceeds the A's, up to MaxB of them, until the window closes.
package fbom

import (
	"fmt"
	"math/rand/v2"
)

const (
	// MaxB bounds the B events of one match.
	MaxB = 10
	// APercent is the start stage's selectivity and BPercent the share of
	// B events, in percent; the rest are "N" (noise).
	APercent = 1
	BPercent = 20
)

// Spec is the pattern document: name, the source it reads ("" for none:
// the engine benchmark runs it offline) and its window in ms.
func Spec(name, source string, withinMs int) string {
	src := ""
	if source != "" {
		src = fmt.Sprintf("\n  \"source\": %q,", source)
	}
	return fmt.Sprintf(`{
  "name": %q,%s
  "key": "e.k",
  "time": "e.ts",
  "within": %d,
  "stages": [
    {"name": "a", "where": "e.type == \"A\""},
    {"name": "b", "contiguity": "followedBy", "oneOrMore": true,
     "where": "e.type == \"B\" && e.v > max(events(\"a\").map(x, x.v)) && size(events(\"b\")) < %d"}
  ]
}`, name, src, withinMs, MaxB)
}

// Type draws an event type: 'A', 'B' or 'N'.
func Type(r *rand.Rand) byte {
	switch x := r.IntN(100); {
	case x < APercent:
		return 'A'
	case x < APercent+BPercent:
		return 'B'
	default:
		return 'N'
	}
}
