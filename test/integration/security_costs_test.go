package integration

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/cluster"
	"github.com/cepcluster/cep/internal/testutil"
	"github.com/cepcluster/cep/shard"
)

// Patterns whose cost grows with the document are refused at validate and
// deploy, quickly, with the limit they break named: a quantifier of 19,000
// (45 s of CPU and 805 MB for 1,000 events of one key before) and a 2.7 MB
// document of 150,000 emit fields (22.7 s and 1.3 GB to deploy before).
func TestCostlyPatternsRefused(t *testing.T) {
	tc := newSingle(t, 60*time.Second, cluster.Config{MaxKeys: 1000})
	c := tc.client(0)
	tc.createBank(c)

	quantifier := `SELECT * FROM bank MATCH_RECOGNIZE (PARTITION BY account ORDER BY ts
  MEASURES FIRST(A.ts) AS first_ts PATTERN (A{1,19000} B)
  DEFINE A AS type = 'A', B AS type = 'B')`
	var emit strings.Builder
	for i := 0; emit.Len() < 2_700_000; i++ {
		fmt.Fprintf(&emit, "  f%d: size(events(\"a\"))\n", i)
	}
	manyEmits := "name: emits\nsource: bank\nkey: e.account\nemit:\n" + emit.String() + "stages:\n  - name: a\n    where: e.type == \"A\"\n"
	wideKeys := "name: wide\nsource: bank\nkey: e.account\nmaxKeys: 5000\nstages:\n  - name: a\n    where: e.type == \"A\"\n"

	for _, tt := range []struct {
		name, spec, want string
		format           cepv1.SpecFormat
	}{
		{"quantifier", quantifier, "limit MaxQuantifier = 100", cepv1.SpecFormat_SPEC_FORMAT_SQL},
		{"emits", manyEmits, "limit MaxDocumentBytes = 262144", cepv1.SpecFormat_SPEC_FORMAT_SPEC},
		{"wide", wideKeys, "--max-keys = 1000", cepv1.SpecFormat_SPEC_FORMAT_SPEC},
	} {
		start := time.Now()
		_, err := c.patterns.DeployPattern(tc.ctx, req(&cepv1.DeployPatternRequest{Spec: tt.spec, Name: tt.name, Format: tt.format}))
		if err == nil {
			t.Fatalf("%s: deployed", tt.name)
		}
		if !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "docs/limits.md") {
			t.Fatalf("%s: deploy refused with %v, want it to name %q", tt.name, err, tt.want)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("%s: refusing took %v", tt.name, d)
		}
		if tt.name == "wide" {
			continue // within the document's limits: only the cluster's bound refuses it
		}
		v, err := c.patterns.ValidatePattern(tc.ctx, req(&cepv1.ValidatePatternRequest{Spec: tt.spec, Name: tt.name, Format: tt.format}))
		if err != nil || v.Msg.Valid || !strings.Contains(v.Msg.GetError().GetMessage(), tt.want) {
			t.Fatalf("%s: validate: %v, %+v", tt.name, err, v.Msg)
		}
	}
	// nothing of them runs
	list, err := c.patterns.ListPatterns(tc.ctx, req(&cepv1.ListPatternsRequest{}))
	if err != nil || len(list.Msg.Patterns) != 0 {
		t.Fatalf("patterns after the refusals: %v, %v", list.Msg.GetPatterns(), err)
	}
}

// A flood of distinct keys leaves each pattern with state for at most its
// bound on keys on the shard (the cluster's --max-keys, or the document's
// lower maxKeys); every event of a key past it is dead-lettered with the
// bound as the reason and counted, and the keys that had state go on
// matching. Without the bound every key would keep a partial match (the
// window is an hour) and memory would grow with the number of keys.
func TestKeyFloodBounded(t *testing.T) {
	const clusterMax, docMax, flood = 200, 50, 1000
	tc := newSingle(t, 120*time.Second, cluster.Config{MaxKeys: clusterMax})
	c := tc.client(0)
	tc.createBank(c)
	spec := func(name, extra string) string {
		return fmt.Sprintf(`{"name":%q,"source":"bank","key":"e.account","time":"e.ts","within":"1h",%s
  "stages":[{"name":"a","where":"e.type == \"A\""},{"name":"b","where":"e.type == \"B\""}]}`, name, extra)
	}
	tc.deploy(c, &cepv1.DeployPatternRequest{Spec: spec("flood", "")})
	tc.deploy(c, &cepv1.DeployPatternRequest{Spec: spec("flood-small", fmt.Sprintf(`"maxKeys":%d,`, docMax))})

	lines := make([]string, 0, flood+2)
	for i := range flood {
		lines = append(lines, fmt.Sprintf(`{"account":"k%04d","type":"A","ts":%d}`, i, 1000+i))
	}
	// the first key, which has state, completes its match; the watermark
	// (outOfOrderness 0) passes it with the last event
	lines = append(lines, fmt.Sprintf(`{"account":"k0000","type":"B","ts":%d}`, 1000+flood), fmt.Sprintf(`{"account":"zz","type":"C","ts":%d}`, 2000+flood))
	account := func(ev map[string]any) string { return ev["account"].(string) }
	tc.publish("bank", account, lines)

	wantRefused := map[string]int{"flood": flood - clusterMax + 1, "flood-small": flood - docMax + 1} // +1: key zz
	testutil.EventuallyEvery(t, 60*time.Second, poll, func() error {
		for name, want := range wantRefused {
			if got := tc.metric(0, "cep_pattern_keys_refused_total", fmt.Sprintf(`pattern=%q`, name)); got != float64(want) {
				return fmt.Errorf("%s: %v events refused, want %d", name, got, want)
			}
		}
		return nil
	})
	for name, bound := range map[string]int{"flood": clusterMax, "flood-small": docMax} {
		if got := tc.metric(0, "cep_pattern_keys", fmt.Sprintf(`pattern=%q`, name)); got > float64(bound) {
			t.Fatalf("%s holds state for %v keys, over its bound %d", name, got, bound)
		}
	}
	// the shards' own accounting: keys and partial matches within the bounds
	for _, sh := range tc.nodes[0].Shards() {
		sh.FSM().View(func(s *shard.State, _ uint64) {
			for _, p := range s.Patterns() {
				if p.Keys > p.MaxKeys || p.PartialMatches > p.MaxKeys || p.BufferedEvents > p.MaxKeys {
					t.Errorf("shard %d: %+v", sh.ID(), p)
				}
			}
		})
	}

	// one dead letter per event, listing each pattern that refused it:
	// every key flood refuses, flood-small (the lower bound) refuses too
	dl := tc.waitOutputs("cep.deadletter.bank", wantRefused["flood-small"], 30*time.Second)
	byReason := map[string]int{}
	for _, r := range refusalsOf(t, dl) {
		byReason[r.Pattern+": "+r.Reason]++
	}
	for name, bound := range map[string]int{"flood": clusterMax, "flood-small": docMax} {
		reason := fmt.Sprintf("%s: pattern %s holds state for maxKeys = %d keys on this shard", name, name, bound)
		n := 0
		for r, c := range byReason {
			if strings.HasPrefix(r, reason) {
				n += c
			}
		}
		if n != wantRefused[name] {
			t.Fatalf("%d dead letters of %s give its bound as the reason, want %d: %v", n, name, wantRefused[name], byReason)
		}
	}
	// an existing key still matches, on both patterns
	for _, name := range []string{"flood", "flood-small"} {
		out := tc.waitOutputs("cep.out."+name, 1, 30*time.Second)
		if len(out) != 1 || !strings.Contains(out[0], `"key":"k0000"`) {
			t.Fatalf("%s: matches %v, want one for k0000", name, out)
		}
	}
}

// refusal is one pattern's refusal of an event, as a dead letter lists it.
type refusal struct{ Pattern, Reason string }

// refusalsOf lists the refusals of dead letters: one dead letter per
// event, its refusals listed when several patterns refused it.
func refusalsOf(t *testing.T, deadLetters []string) []refusal {
	t.Helper()
	var out []refusal
	for _, d := range deadLetters {
		var rec struct {
			Pattern, Reason string
			Refusals        []refusal
		}
		if err := json.Unmarshal([]byte(d), &rec); err != nil {
			t.Fatal(err)
		}
		if len(rec.Refusals) == 0 {
			rec.Refusals = []refusal{{rec.Pattern, rec.Reason}}
		}
		out = append(out, rec.Refusals...)
	}
	return out
}
