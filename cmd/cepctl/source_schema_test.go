package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cepcluster/cep/internal/schema"
	"github.com/cepcluster/cep/internal/testutil"
)

// typoPattern is the example pattern with amount misspelt in a condition.
const typoPattern = `name: typo
source: bank
key: e.account
time: e.ts
stages:
  - name: login
    where: e.type == "LOGIN"
  - name: failed
    where: e.type == "PAYMENT_FAILED" && e.amout > 100
`

// typoQuery is the example query with price misspelt in a DEFINE.
const typoQuery = `SELECT * FROM ticker MATCH_RECOGNIZE (
    PARTITION BY symbol ORDER BY ts
    MEASURES LAST(DOWN.price) AS bottom
    PATTERN (START DOWN{2,} UP)
    DEFINE
        DOWN AS DOWN.prcie < PREV(DOWN.price),
        UP AS UP.price > FIRST(DOWN.price)
) AS v`

// infer-schema --from-file writes a schema every sample event fits (the
// independent check: schema.Check on each), which validate --schema
// reads back; validate --sample refuses the misspelt field with the
// sample's, and passes the example pattern.
func TestInferSchemaAndValidateOffline(t *testing.T) {
	r := cepctlEnv(t, nil, "", "source", "infer-schema", "--from-file", "../../examples/events.jsonl").mustOK(t)
	s, err := schema.Parse([]byte(r.stdout))
	if err != nil {
		t.Fatalf("infer-schema wrote what Parse refuses: %v\n%s", err, r.stdout)
	}
	evs, err := readSampleEvents(&deps{}, "../../examples/events.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if err := s.Check(e); err != nil {
			t.Errorf("%v does not fit the inferred schema: %v\n%s", e, err, r.stdout)
		}
	}
	if !strings.Contains(r.stdout, "account: string\n") || !strings.Contains(r.stdout, "amount: number?\n") {
		t.Errorf("inferred:\n%s", r.stdout)
	}
	schemaFile := writeTemp(t, "bank.yaml", r.stdout)
	typo := writeTemp(t, "typo.yaml", typoPattern)

	want := `typo.yaml: pattern "typo": stage "failed": field "where": no field "amout" in source bank; did you mean "amount"? (e.amout at 1:31)`
	for _, flag := range [][]string{{"--sample", "../../examples/events.jsonl"}, {"--schema", schemaFile}} {
		r := cepctlEnv(t, nil, "", append([]string{"pattern", "validate", typo}, flag...)...)
		if r.code == 0 || !strings.HasSuffix(strings.TrimSpace(r.stderr), want) {
			t.Errorf("validate %s: exit %d, stderr %q, want it to end %q", flag, r.code, r.stderr, want)
		}
		cepctlEnv(t, nil, "", append([]string{"pattern", "validate", "../../examples/login-fail-logout.yaml"}, flag...)...).mustOK(t)
	}

	q := writeTemp(t, "v.sql", typoQuery)
	r = cepctlEnv(t, nil, "", "pattern", "validate", q, "--sample", "../../examples/ticker.jsonl")
	if r.code == 0 || !strings.Contains(r.stderr, "prcie") || !strings.Contains(r.stderr, `price`) || strings.Count(r.stderr, "6:22") != 1 {
		t.Errorf("a misspelt column: exit %d, %q, want it named with its position once", r.code, r.stderr)
	}
	cepctlEnv(t, nil, "", "pattern", "validate", "../../examples/v-shape.sql", "--sample", "../../examples/ticker.jsonl").mustOK(t)
}

// Against a real node: a source created with a schema keeps it, validate
// and deploy refuse a pattern or query reading a field it lacks, naming
// the closest, and infer-schema NAME reads the source's stored events.
func TestSourceSchemaAgainstANode(t *testing.T) {
	url := startNode(t)
	schemaFile := writeTemp(t, "bank.yaml", "account: string\ntype: string\nts: integer\namount: number?\n")
	testutil.Eventually(t, 30*time.Second, func() error {
		if r := cepctl(t, url, "source", "create", "bank", "--key", "e.account", "--schema", schemaFile); r.code != 0 && !strings.Contains(r.stderr, "already") {
			return &testError{r.stderr}
		}
		return nil
	})
	var src struct {
		Fields []struct {
			Path, Type string
			Optional   bool
		}
	}
	if err := json.Unmarshal([]byte(cepctl(t, url, "source", "get", "bank", "-o", "json").mustOK(t).stdout), &src); err != nil || len(src.Fields) != 4 || src.Fields[1].Path != "amount" || !src.Fields[1].Optional {
		t.Errorf("source get: %+v %v", src, err)
	}

	if out := cepctl(t, url, "source", "get", "bank").mustOK(t).stdout; !strings.Contains(out, "4 fields") || !strings.Contains(out, "amount: number?") {
		t.Errorf("source get:\n%s", out)
	}

	typo := writeTemp(t, "typo.yaml", typoPattern)
	// at the line and column where the document writes the failed stage's where
	want := typo + `:9:5: pattern "typo": stage "failed": field "where": no field "amout" in source bank; did you mean "amount"? (e.amout at 1:31)` + "\n"
	for _, cmd := range []string{"validate", "deploy"} {
		if r := cepctl(t, url, "pattern", cmd, typo); r.code == 0 || r.stderr != "cepctl: "+want {
			t.Errorf("pattern %s of a misspelt field: exit %d, stderr %q, want %q", cmd, r.code, r.stderr, want)
		}
	}
	cepctl(t, url, "pattern", "deploy", "../../examples/login-fail-logout.yaml").mustOK(t)

	cepctl(t, url, "source", "create", "ticker", "--key", "e.symbol", "--schema", writeTemp(t, "t.yaml", "symbol: string\nprice: number\nts: integer\n")).mustOK(t)

	// --strict needs the schema it checks events against; the source
	// says it is strict
	cepctl(t, url, "source", "create", "pay", "--key", "e.account", "--strict").mustFail(t, "--strict checks events against the fields --schema FILE declares")
	cepctl(t, url, "source", "create", "pay", "--key", "e.account", "--strict", "--schema", schemaFile).mustOK(t)
	if out := cepctl(t, url, "source", "get", "pay").mustOK(t).stdout; !strings.Contains(out, "4 fields (strict: events that do not fit are dead-lettered)") {
		t.Errorf("source get of a strict source:\n%s", out)
	}
	q := writeTemp(t, "v.sql", typoQuery)
	if r := cepctl(t, url, "pattern", "deploy", "--name", "v", q); r.code == 0 || r.stderr != "cepctl: "+q+":6:22: no field 'prcie'. Did you mean 'price'?\n" {
		t.Errorf("deploy of a misspelt column: exit %d, stderr %q", r.code, r.stderr)
	}

	// without a schema the query deploys; its events lack the column,
	// which /metrics counts (it reads NULL: no condition error shows it)
	cepctl(t, url, "source", "create", "ticks", "--key", "e.symbol").mustOK(t)
	cepctl(t, url, "pattern", "deploy", "--name", "v", writeTemp(t, "v2.sql", strings.Replace(typoQuery, "FROM ticker", "FROM ticks", 1))).mustOK(t)
	cepctl(t, url, "publish", "--source", "ticks", "-f", "../../examples/ticker.jsonl").mustOK(t)
	lines, err := os.ReadFile("../../examples/ticker.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	want = fmt.Sprintf(`cep_pattern_absent_field_events_total{field="prcie",pattern="v",shard="1"} %d`, strings.Count(string(lines), "\n"))
	testutil.Eventually(t, 30*time.Second, func() error {
		res, err := http.Get(url + "/metrics")
		if err != nil {
			return err
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		if !strings.Contains(string(b), want) {
			return fmt.Errorf("no %s in /metrics", want)
		}
		return nil
	})

	cepctl(t, url, "publish", "--source", "bank", "-f", "../../examples/events.jsonl").mustOK(t)
	var inferred string
	testutil.Eventually(t, 30*time.Second, func() error {
		r := cepctl(t, url, "source", "infer-schema", "bank")
		if r.code != 0 {
			return &testError{r.stderr}
		}
		inferred = r.stdout
		return nil
	})
	file := cepctlEnv(t, nil, "", "source", "infer-schema", "--from-file", "../../examples/events.jsonl").mustOK(t).stdout
	if inferred != file {
		t.Errorf("infer-schema bank:\n%s\nfrom the file it was published from:\n%s", inferred, file)
	}
}
