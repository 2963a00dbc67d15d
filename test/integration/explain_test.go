package integration

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/nfa"
	"github.com/cepcluster/cep/nfa/explain"
)

const explainSpec = `{"name": "ex", "source": "tx", "key": "e.account", "within": "1m",
  "emit": {"n": "size(events(\"b\"))"},
  "stages": [{"name": "a", "where": "e.type == \"A\""}, {"name": "b", "oneOrMore": true, "where": "e.v > REF"}]}`

// A node refuses a stage reference that names no stage in validate,
// deploy and update, naming the reference and the stages; and it draws a
// deployed pattern's automaton (by name) and a given spec's as the
// offline package draws the same document.
func TestExplainAndStageReferences(t *testing.T) {
	tc, c := nodeWithSource(t, 1, 60*time.Second)
	good := strings.ReplaceAll(explainSpec, "REF", `events(\"a\")[0].v`)
	bad := strings.ReplaceAll(explainSpec, "REF", `events(\"nosuch\")[0].v`)
	const want = `pattern "ex": stage "b": field "where": events("nosuch") (at 1:7) names no stage of the pattern (its stages: a, b)`

	v, err := c.patterns.ValidatePattern(tc.ctx, req(&cepv1.ValidatePatternRequest{Spec: bad}))
	if err != nil || v.Msg.Valid || v.Msg.GetError().GetMessage() != want || v.Msg.GetError().GetStage() != "b" || v.Msg.GetError().GetField() != "where" {
		t.Fatalf("validate: %v, %+v", err, v.Msg)
	}
	_, err = c.patterns.DeployPattern(tc.ctx, req(&cepv1.DeployPatternRequest{Spec: bad}))
	if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), want) {
		t.Fatalf("deploy: %v", err)
	}
	if _, err := c.patterns.DeployPattern(tc.ctx, req(&cepv1.DeployPatternRequest{Spec: good})); err != nil {
		t.Fatalf("deploy: %v", err)
	}
	_, err = c.patterns.UpdatePattern(tc.ctx, req(&cepv1.UpdatePatternRequest{Spec: bad, Name: "ex"}))
	if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), want) {
		t.Fatalf("update: %v", err)
	}

	p, err := nfa.CompileBytes([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	offline := explain.Pattern(p)
	for _, r := range []*cepv1.ExplainPatternRequest{{Name: "ex"}, {Spec: good}} {
		x, err := c.patterns.ExplainPattern(tc.ctx, req(r))
		if err != nil {
			t.Fatalf("explain %+v: %v", r, err)
		}
		m := x.Msg
		wantVersion := uint64(1)
		if r.Spec != "" {
			wantVersion = 0
		}
		if m.Name != "ex" || m.Version != wantVersion || m.Text != offline.Text || m.Dot != offline.Dot || m.Svg != offline.SVG {
			t.Errorf("explain %+v: name %q version %d, text\n%s\noffline\n%s", r, m.Name, m.Version, m.Text, offline.Text)
		}
	}
	_, err = c.patterns.ExplainPattern(tc.ctx, req(&cepv1.ExplainPatternRequest{Name: "nosuch"}))
	if connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("explain an unknown name: %v", err)
	}
	_, err = c.patterns.ExplainPattern(tc.ctx, req(&cepv1.ExplainPatternRequest{Spec: bad}))
	var ce *connect.Error
	if !errors.As(err, &ce) || ce.Code() != connect.CodeInvalidArgument || !strings.Contains(ce.Message(), want) {
		t.Errorf("explain a bad spec: %v", err)
	}

	// the command line against the node: the deployed pattern by name,
	// and a validate that the node refuses
	bin := buildCepctl(t)
	cepctl := func(args ...string) (string, error) {
		cmd := exec.CommandContext(tc.ctx, bin, append([]string{"--server", "http://" + tc.nodes[0].APIAddr()}, args...)...)
		cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "XDG_CONFIG_HOME=")
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return stderr.String(), err
		}
		return string(out), nil
	}
	for format, w := range map[string]string{"text": offline.Text, "dot": offline.Dot, "svg": offline.SVG} {
		if out, err := cepctl("pattern", "explain", "ex", "-o", format); err != nil || out != w {
			t.Errorf("cepctl pattern explain ex -o %s: %v\n%s", format, err, out)
		}
	}
	file := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(file, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := cepctl("pattern", "validate", file); err == nil || !strings.Contains(out, want) {
		t.Errorf("cepctl pattern validate of a bad reference: %v\n%s", err, out)
	}
}
