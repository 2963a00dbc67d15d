package integration

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/cluster"
	"github.com/cepcluster/cep/nfa"
)

// MATCH_RECOGNIZE queries deployed to a node — the README's example and
// random ones (quantifiers greedy and reluctant, PREV/FIRST/LAST and
// aggregates in DEFINE and MEASURES, PREV/NEXT in MEASURES, each skip, with and without WITHIN,
// a select list or *, groups, SUBSET, timeouts, alternation) — over one stream of ticks with some disorder: each
// query's rows on NATS are exactly those the offline engine produces.
func TestQueriesEqualOffline(t *testing.T) {
	example, err := os.ReadFile("../../examples/v-shape.sql")
	if err != nil {
		t.Fatal(err)
	}
	queries := map[string]string{"v-shape": string(example),
		// groups, SUBSET, COUNT(V.*), MAX_BY and timeouts from a query
		"groups": `SELECT * FROM ticker MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts
			MEASURES COUNT(U.*) AS ab, MAX_BY(U.id, U.price) AS top, LAST(CLASSIFIER(), 1) AS before_last
			AFTER MATCH SKIP PAST LAST ROW PATTERN (S (A B)+? C) SUBSET U = (A, B)
			DEFINE A AS kind = 'A', B AS kind = 'B', C AS kind = 'C')`,
		"timeouts": `SELECT * FROM ticker MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts
			MEASURES FIRST(A.id) AS first_id, COUNT(A.*) AS n ONE ROW PER MATCH SHOW TIMEOUT MATCHES
			PATTERN (A{3} B) WITHIN INTERVAL '0.02' SECOND
			DEFINE A AS price >= 15, B AS price < 12)`,
		// physical navigation in MEASURES, beyond the match's last row too
		"navigation": `SELECT * FROM ticker MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts
			MEASURES PREV(B.price) AS before_last_b, NEXT(FIRST(A.id), 2) AS third_id,
				PREV(FIRST(B.id), 2) AS two_before_b, NEXT(LAST(C.id)) AS after_end, PREV(id, 3) AS fourth_last
			AFTER MATCH SKIP PAST LAST ROW PATTERN (A B+? C) WITHIN INTERVAL '1' SECOND
			DEFINE A AS kind = 'A', B AS kind = 'B' OR B.price > PREV(FIRST(B.price)), C AS kind = 'C')`,
		// alternation (the leftmost preferred), a repeated one, PERMUTE
		"alternation": `SELECT * FROM ticker MATCH_RECOGNIZE (PARTITION BY symbol ORDER BY ts
			MEASURES FIRST(CLASSIFIER()) AS first_var, LAST(CLASSIFIER()) AS last_var, COUNT(*) AS rows_, FIRST(id) AS first_id
			AFTER MATCH SKIP TO NEXT ROW PATTERN ((A | H) (B | C)+? PERMUTE(X, Y))
			DEFINE A AS kind = 'A', H AS price > 20, B AS kind = 'B', C AS price < 15, X AS kind = 'C', Y AS kind = 'A')`,
	}
	r := rand.New(rand.NewPCG(11, 3))
	for len(queries) < 16 {
		name := fmt.Sprintf("q%d", len(queries))
		q := randomQuery(r)
		if _, err := nfa.CompileSQL(q, name); err != nil {
			continue // what Flink refuses (a greedy quantifier last, say): draw again
		}
		queries[name] = q
	}
	var lines []string
	ts := 1000
	for i := range 600 {
		ts += 1 + r.IntN(3)
		evTs := ts
		if r.IntN(10) == 0 {
			evTs -= 1 + r.IntN(3)
		}
		lines = append(lines, fmt.Sprintf(`{"id":%d,"symbol":"S%d","kind":%q,"price":%d,"ts":%d}`,
			i, r.IntN(4), string(rune('A'+r.IntN(3))), 10+r.IntN(20), evTs))
	}

	tc := newSingle(t, 2*time.Minute, cluster.Config{Shards: 1})
	c, ctx := tc.client(0), tc.ctx
	if _, err := c.sources.CreateSource(ctx, req(&cepv1.CreateSourceRequest{Name: "ticker", Key: "e.symbol"})); err != nil {
		t.Fatal(err)
	}
	for name, q := range queries {
		tc.deploy(c, &cepv1.DeployPatternRequest{Spec: q, Name: name, Format: cepv1.SpecFormat_SPEC_FORMAT_SQL})
	}
	tc.publish("ticker", func(e map[string]any) string { return fmt.Sprint(e["symbol"]) }, lines)

	producing := 0
	for name, q := range queries {
		p, err := nfa.CompileSQL(q, name)
		if err != nil {
			t.Fatal(err)
		}
		want := offlineRun(t, p, lines)
		want = withoutIDs(want)
		if slices.ContainsFunc(want, func(r string) bool { return strings.HasPrefix(r, `{"type":"match"`) }) {
			producing++
		} else if name == "groups" || name == "navigation" || name == "alternation" {
			t.Errorf("query %s matches nothing; the test would prove little", name)
		}
		if name == "timeouts" && !slices.ContainsFunc(want, func(r string) bool { return strings.HasPrefix(r, `{"type":"timeout"`) }) {
			t.Errorf("query timeouts times nothing out; the test would prove little")
		}
		subject := "cep.out." + name
		got := withoutIDs(tc.outputsOnceThere(subject, len(want), 30*time.Second))
		if d := differsFromOffline(got, want, q); d != "" {
			t.Errorf("query %s: %s", name, d)
		}
	}
	if producing < len(queries)/3 {
		t.Fatalf("only %d of %d queries match anything; the test would prove little", producing, len(queries))
	}
}

// randomQuery draws a MATCH_RECOGNIZE query over ticks {symbol, kind,
// price, ts}.
func randomQuery(r *rand.Rand) string {
	pick := func(xs ...string) string { return xs[r.IntN(len(xs))] }
	vars := []string{"A", "B", "C"}[:2+r.IntN(2)]
	var pattern, defines []string
	for i, v := range vars {
		q := pick("", "", "+", "*", "?", "{2}", "{1,3}", "+?", "{2,}")
		if i == 0 && (q == "*" || q == "?") {
			q = "" // a pattern that can match nothing is refused
		}
		pattern = append(pattern, v+q)
		cond := fmt.Sprintf("%s.kind = '%s'", v, pick("A", "B", "C"))
		switch r.IntN(4) {
		case 1:
			cond += fmt.Sprintf(" AND %s.price > PREV(%s.price)", v, v)
		case 2:
			cond += fmt.Sprintf(" AND %s.price >= FIRST(A.price)", v)
		case 3:
			cond += fmt.Sprintf(" AND (LAST(%s.price, 1) IS NULL OR %s.price < LAST(%s.price, 1))", v, v, v)
		}
		defines = append(defines, fmt.Sprintf("%s AS %s", v, cond))
	}
	last := vars[len(vars)-1]
	measures := []string{
		"FIRST(A.price) AS first_a",
		fmt.Sprintf("LAST(%s.price) AS last_%s", last, strings.ToLower(last)),
		fmt.Sprintf("COUNT(%s.price) AS n_%s", vars[1], strings.ToLower(vars[1])),
		fmt.Sprintf("AVG(%s.price) AS avg_%s", vars[1], strings.ToLower(vars[1])),
		"MATCH_ROWTIME() AS end_ts",
	}
	skip := pick("PAST LAST ROW", "TO NEXT ROW", "TO FIRST "+last, "TO LAST "+vars[1])
	within := ""
	if r.IntN(2) == 0 {
		within = fmt.Sprintf(" WITHIN INTERVAL '%d' SECOND", 1+r.IntN(3))
	}
	sel := "*"
	if r.IntN(3) == 0 {
		sel = "symbol, first_a, end_ts"
	}
	return fmt.Sprintf(`SELECT %s
FROM ticker
MATCH_RECOGNIZE (
    PARTITION BY symbol
    ORDER BY ts
    MEASURES %s
    ONE ROW PER MATCH
    AFTER MATCH SKIP %s
    PATTERN (%s)%s
    DEFINE %s
) AS m`, sel, strings.Join(measures, ", "), skip, strings.Join(pattern, " "), within, strings.Join(defines, ", "))
}
