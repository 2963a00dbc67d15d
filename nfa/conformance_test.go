package nfa_test

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"

	"github.com/cepcluster/cep/internal/conformance"
	"github.com/cepcluster/cep/nfa"
)

// knownDifferences lists cases whose expectation we do not meet, each with
// the reason. The file is testdata/conformance/known-differences.json.
func knownDifferences(t *testing.T) map[string]string {
	b, err := os.ReadFile("../testdata/conformance/known-differences.json")
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]string
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("known-differences.json: %v", err)
	}
	return m
}

// compileCase compiles a case's pattern or query.
func compileCase(c *conformance.Case) (*nfa.Pattern, error) {
	if c.IsSQL() {
		return nfa.CompileSQL(*c.SQL, "t")
	}
	return nfa.CompileBytes(c.Pattern)
}

// runCase runs a spec case through the engine in process, exactly as
// `cepctl run` does, and returns its output records as JSON. With general
// set, a sequence pattern (nfa.SeqPattern) runs with the general step, so
// that Flink's cases check both.
func runCase(c *conformance.Case, general bool) ([]conformance.Record, error) {
	p, err := compileCase(c)
	if err != nil {
		return nil, err
	}
	r := nfa.NewRunner(p)
	if general {
		nfa.DisableSeqRunner(r)
	}
	var out []conformance.Record
	add := func(recs []nfa.Record) error {
		for i := range recs {
			b, err := recs[i].AppendJSON(nil)
			if err != nil {
				return err
			}
			var cr conformance.Record
			if err := json.Unmarshal(b, &cr); err != nil {
				return err
			}
			out = append(out, cr)
		}
		return nil
	}
	for _, line := range bytes.Split(c.InputLines(), []byte("\n")) {
		recs, err := r.Line(line)
		if err != nil {
			return nil, err
		}
		if err := add(recs); err != nil {
			return nil, err
		}
	}
	if err := add(r.Finish(c.Final())); err != nil {
		return nil, err
	}
	return out, nil
}

func TestConformance(t *testing.T) {
	cases, err := conformance.Load("../testdata/conformance")
	if err != nil {
		t.Fatal(err)
	}
	known := knownDifferences(t)
	var pass, fail, skip, knownFail, sql, both int
	for _, c := range cases {
		if c.IsSQL() {
			sql++
		}
		if c.Skip {
			skip++
			continue
		}
		t.Run(c.File, func(t *testing.T) {
			ok, why := judge(c, false)
			if p, err := compileCase(c); err == nil && nfa.SeqPattern(p) {
				// the sequence step and the general one alike
				both++
				if gok, gwhy := judge(c, true); gok != ok || (!ok && gwhy != why) {
					t.Errorf("the general step judges otherwise: %v, %s", gok, gwhy)
				}
			}
			reason, isKnown := known[c.File]
			switch {
			case ok && isKnown:
				t.Errorf("passes but is listed as a known difference (%s): remove it from known-differences.json", reason)
				fail++
			case ok:
				pass++
			case isKnown:
				knownFail++
				t.Skipf("known difference: %s (%s)", reason, why)
			default:
				fail++
				t.Errorf("%s", why)
			}
		})
	}
	t.Logf("conformance: %d passed, %d failed, %d known differences, %d skipped by the case (%d of all cases are MATCH_RECOGNIZE; %d ran with the sequence step and the general one)", pass, fail, knownFail, skip, sql, both)
}

func judge(c *conformance.Case, general bool) (bool, string) {
	recs, err := runCase(c, general)
	if err != nil {
		if _, isPattern := err.(*nfa.PatternError); isPattern || c.Expect.Error != nil {
			return c.CheckError(err.Error())
		}
		return false, "run failed: " + err.Error()
	}
	if c.Expect.Error != nil {
		return false, "pattern accepted, want an error containing " + *c.Expect.Error
	}
	return c.CheckRecords(recs)
}
