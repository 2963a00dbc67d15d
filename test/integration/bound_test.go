package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cepcluster/cep/nfa"
)

// A pattern whose partial matches double with each event of one key (an
// A, then fourteen followedByAny B's) would hold 2^20 of them after twenty
// B's, and every replica would run out of memory applying the same log
// again after each restart. The engine keeps 100,000 per key; the shard
// goes on applying, other keys still match, the output is the offline
// engine's, and cep_partial_matches_dropped_total names the pattern.
func TestExplodingPatternIsBounded(t *testing.T) {
	n := startNode(t, t.TempDir(), "", 1)
	defer n.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var sb strings.Builder
	sb.WriteString("name: doubling\nsource: bank\nkey: e.account\ntime: e.ts\nstages:\n  - name: a\n    where: e.type == \"A\"\n")
	for i := 1; i <= 14; i++ {
		fmt.Fprintf(&sb, "  - name: b%d\n    contiguity: followedByAny\n    where: e.type == \"B\"\n", i)
	}
	sb.WriteString("  - name: c\n    contiguity: followedByAny\n    where: e.type == \"C\"\n")
	spec := []byte(sb.String())
	deployOnBank(t, ctx, n, spec)

	var lines []string
	ts := 1000
	add := func(account, typ string) {
		ts++
		lines = append(lines, fmt.Sprintf(`{"account":%q,"type":%q,"ts":%d}`, account, typ, ts))
	}
	add("hot", "A")
	for range 20 {
		add("hot", "B")
	}
	add("cold", "A")
	for range 14 {
		add("cold", "B")
	}
	add("cold", "C")
	add("cold", "A") // moves the watermark past the C

	p, err := nfa.CompileBytes(spec)
	if err != nil {
		t.Fatal(err)
	}
	r := nfa.NewRunner(p)
	for _, l := range lines {
		if _, err := r.Line([]byte(l)); err != nil {
			t.Fatal(err)
		}
	}
	dropped := r.Matchers()[0].Stats().Dropped
	if dropped == 0 {
		t.Fatal("the offline engine dropped nothing; the test would prove nothing")
	}
	publishAndCompare(t, n.NATSURL(), spec, "cep.out.doubling", lines, 60*time.Second)
	if got := metric(t, n, "cep_partial_matches_dropped_total", `pattern="doubling"`); got != float64(dropped) {
		t.Fatalf("cep_partial_matches_dropped_total %v, want the offline engine's %d", got, dropped)
	}
}
