package main

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"io"
	"strings"
	"testing"

	"github.com/cepcluster/cep/api"
	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/nfa"
	"github.com/cepcluster/cep/nfa/explain"
)

const sourcedPattern = "source: bank\n" + loginPattern

// badRefPattern is sourcedPattern with a condition reading a stage it
// does not have.
var badRefPattern = strings.Replace(sourcedPattern, `where: e.type == "LOGOUT"`, `where: e.type == "LOGOUT" && size(events("faild")) > 1`, 1)

const badRefError = `pattern "login-fail": stage "logout": field "where": events("faild") (at 1:28) names no stage of the pattern (its stages: login, failed, logout); did you mean "failed"?`

// explain FILE compiles the file here, with no server, and prints the
// picture the nfa/explain package draws of the same document.
func TestPatternExplainOffline(t *testing.T) {
	doc := writeTemp(t, "login.yaml", sourcedPattern)
	p, err := nfa.CompileBytes([]byte(sourcedPattern))
	if err != nil {
		t.Fatal(err)
	}
	want := explain.Pattern(p)
	for format, w := range map[string]string{"": want.Text, "text": want.Text, "dot": want.Dot, "svg": want.SVG} {
		args := []string{"pattern", "explain", doc}
		if format != "" {
			args = append(args, "-o", format)
		}
		r := cepctlEnv(t, nil, "", args...).mustOK(t)
		if r.stdout != w {
			t.Errorf("-o %q prints\n%s\nwant\n%s", format, r.stdout, w)
		}
	}
	svg := cepctlEnv(t, nil, "", "pattern", "explain", doc, "-o", "svg").mustOK(t).stdout
	d := xml.NewDecoder(strings.NewReader(svg))
	for {
		if _, err := d.Token(); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("svg: %v", err)
		}
	}
	for _, s := range p.Automaton().States {
		if !strings.Contains(svg, ">"+s.Name+"<") {
			t.Errorf("svg does not name state %s", s.Name)
		}
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(cepctlEnv(t, nil, "", "pattern", "explain", doc, "-o", "json").mustOK(t).stdout), &m); err != nil || m["dot"] != want.Dot {
		t.Errorf("-o json: %v, %v", err, m)
	}
	// stdin, and a refused document
	if r := cepctlEnv(t, nil, sourcedPattern, "pattern", "explain", "-").mustOK(t); r.stdout != want.Text {
		t.Errorf("from stdin: %s", r.stdout)
	}
	cepctlEnv(t, nil, "", "pattern", "explain", writeTemp(t, "bad.yaml", badRefPattern)).mustFail(t, "bad.yaml: "+badRefError)
	cepctlEnv(t, nil, "", "pattern", "explain", doc, "-o", "png").mustFail(t, `unknown output format "png"`)
	// a picture needs no source, as cepctl run does not
	if r := cepctlEnv(t, nil, "", "pattern", "explain", writeTemp(t, "nosrc.yaml", loginPattern)).mustOK(t); r.stdout != want.Text {
		t.Errorf("without a source: %s", r.stdout)
	}
}

// explain NAME asks the server for the deployed pattern.
func TestPatternExplainDeployed(t *testing.T) {
	var got *cepv1.ExplainPatternRequest
	url := startAPI(t, api.Backends{Patterns: &fakePatterns{
		ExplainFunc: func(_ context.Context, r *cepv1.ExplainPatternRequest) (*cepv1.ExplainPatternResponse, error) {
			got = r
			if r.Name != "login-fail" {
				return nil, api.ErrNotFound
			}
			return &cepv1.ExplainPatternResponse{Name: r.Name, Version: 3, Text: "TEXT\n", Dot: "DOT\n", Svg: "<svg/>\n", Warnings: []string{"careful"}}, nil
		},
	}})
	r := cepctl(t, url, "pattern", "explain", "login-fail").mustOK(t)
	if r.stdout != "TEXT\n" || r.stderr != "cepctl: warning: careful\n" || got.GetName() != "login-fail" || got.GetSpec() != "" {
		t.Errorf("stdout %q, stderr %q, request %v", r.stdout, r.stderr, got)
	}
	if r := cepctl(t, url, "pattern", "explain", "login-fail", "-o", "dot").mustOK(t); r.stdout != "DOT\n" {
		t.Errorf("-o dot: %q", r.stdout)
	}
	cepctl(t, url, "pattern", "explain", "other").mustFail(t, "not found")
}

// validate FILE checks offline, with the warnings, when no server is
// given; a stage reference naming no stage is refused there as by the
// server; with a server given the server decides.
func TestPatternValidateOffline(t *testing.T) {
	doc := writeTemp(t, "login.yaml", strings.Replace(sourcedPattern, "key: e.user\n", "", 1))
	r := cepctlEnv(t, nil, "", "pattern", "validate", doc).mustOK(t)
	if r.stdout != "ok: login-fail (3 stages, event time)\n" || !strings.Contains(r.stderr, `cepctl: warning: pattern "login-fail": field "key": none`) {
		t.Errorf("stdout %q, stderr %q", r.stdout, r.stderr)
	}
	bad := writeTemp(t, "bad.yaml", badRefPattern)
	cepctlEnv(t, nil, "", "pattern", "validate", bad).mustFail(t, "bad.yaml: "+badRefError)
	q := writeTemp(t, "q.sql", strings.Replace(sqlQuery, "A.ts AS t", "A.ts AS t, Z.ts AS z", 1))
	cepctlEnv(t, nil, "", "pattern", "validate", q).mustFail(t, "q.sql:", "variable 'Z' is not defined in PATTERN")
	cepctlEnv(t, nil, "", "pattern", "validate", writeTemp(t, "nosrc.yaml", loginPattern)).mustFail(t, `names no source`)

	// a server given by the environment is asked, not this engine
	called := false
	url := startAPI(t, api.Backends{Patterns: &fakePatterns{
		ValidateFunc: func(context.Context, *cepv1.ValidatePatternRequest) (*cepv1.ValidatePatternResponse, error) {
			called = true
			return &cepv1.ValidatePatternResponse{Valid: true, Name: "from-server"}, nil
		},
	}})
	r = cepctlEnv(t, map[string]string{"CEPCTL_SERVER": url}, "", "pattern", "validate", bad).mustOK(t)
	if !called || !strings.Contains(r.stdout, "from-server") {
		t.Errorf("with CEPCTL_SERVER: %q", r.stdout)
	}
}

// cepctl run refuses a pattern whose condition reads a stage it does not
// have, rather than run it with an empty list there.
func TestRunRefusesUnknownStage(t *testing.T) {
	bad := writeTemp(t, "bad.yaml", badRefPattern)
	cepctlEnv(t, nil, "", "run", "-p", bad, "-i", "/dev/null").mustFail(t, "bad.yaml: "+badRefError)
}
