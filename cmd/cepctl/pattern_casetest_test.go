package main

import (
	"encoding/xml"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/cepcluster/cep/internal/patterntest"
)

// The example's cases pass against the example pattern.
func TestPatternTestExample(t *testing.T) {
	out, errOut, code := run(t, "", "pattern", "test", "../../examples/login-fail-logout.test.yaml")
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	if !strings.Contains(out, "5 cases passed") || strings.Contains(out, "FAIL") {
		t.Errorf("output:\n%s", out)
	}
}

// brokenCopy copies the example pattern and its tests into a directory,
// each changed by its replacer (nil: copied as it is), and returns the
// test file's path.
func brokenCopy(t *testing.T, pattern, tests *strings.Replacer) string {
	t.Helper()
	dir := t.TempDir()
	for name, r := range map[string]*strings.Replacer{"login-fail-logout.yaml": pattern, "login-fail-logout.test.yaml": tests} {
		b, err := os.ReadFile(filepath.Join("../../examples", name))
		if err != nil {
			t.Fatal(err)
		}
		changed := string(b)
		if r != nil {
			changed = r.Replace(changed)
		}
		if r != nil && changed == string(b) {
			t.Fatalf("%s: the change matched nothing", name)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(changed), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "login-fail-logout.test.yaml")
}

// A changed expectation and a changed pattern each fail the case they
// touch, with a diff naming the field, and the JUnit report says so too.
func TestPatternTestBrokenCopiesFail(t *testing.T) {
	for _, tc := range []struct {
		name              string
		pattern, tests    *strings.Replacer
		failCase, wantOut string
	}{
		{"an expected field changed", nil, strings.NewReplacer("amount: 12.5}", "amount: 13}"),
			"two failures then a logout", "fields.amount: expected 13, got 12.5"},
		{"the window changed", strings.NewReplacer("within: 5m", "within: 1m"), nil,
			"a logout after the window times out", "timeoutAt: expected 301000, got 61000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := brokenCopy(t, tc.pattern, tc.tests)
			junit := filepath.Join(t.TempDir(), "report.xml")
			out, errOut, code := run(t, "", "pattern", "test", file, "--junit", junit)
			if code == 0 {
				t.Fatalf("a broken copy passed:\n%s", out)
			}
			if !strings.Contains(errOut, "1 of 5 cases failed") {
				t.Errorf("stderr: %s", errOut)
			}
			if !strings.Contains(out, "FAIL "+file) || !strings.Contains(out, tc.failCase) || !strings.Contains(out, tc.wantOut) {
				t.Errorf("output lacks FAIL %s and %q:\n%s", tc.failCase, tc.wantOut, out)
			}
			b, err := os.ReadFile(junit)
			if err != nil {
				t.Fatal(err)
			}
			var rep patterntest.JUnitSuites
			if err := xml.Unmarshal(b, &rep); err != nil {
				t.Fatalf("%v\n%s", err, b)
			}
			if rep.Tests != 5 || rep.Failures != 1 || rep.Errors != 0 {
				t.Fatalf("report counts: %+v", rep)
			}
			for _, c := range rep.Suites[0].Cases {
				if (c.Failure != nil) != (c.Name == tc.failCase) {
					t.Errorf("case %q: failure %+v", c.Name, c.Failure)
				}
				if c.Failure != nil && !strings.Contains(c.Failure.Text, tc.wantOut) {
					t.Errorf("failure text lacks %q: %s", tc.wantOut, c.Failure.Text)
				}
			}
		})
	}
}

// validate --test refuses a pattern whose tests fail, and says why; with
// passing tests it validates as before.
func TestPatternValidateRunsTestsFirst(t *testing.T) {
	good := "../../examples/login-fail-logout.test.yaml"
	out, errOut, code := run(t, "", "pattern", "validate", "../../examples/login-fail-logout.yaml", "--test", good)
	if code != 0 || !strings.HasPrefix(out, "ok: login-fail-logout") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	bad := brokenCopy(t, strings.NewReplacer("within: 5m", "within: 1m"), nil)
	out, errOut, code = run(t, "", "pattern", "validate", filepath.Join(filepath.Dir(bad), "login-fail-logout.yaml"), "--test", good, "--test", bad)
	if code == 0 || strings.Contains(out, "ok:") {
		t.Fatalf("validated despite a failing test:\n%s%s", out, errOut)
	}
	if !strings.Contains(errOut, "timeoutAt: expected 301000, got 61000") || !strings.Contains(errOut, "not going on (--test)") {
		t.Errorf("stderr:\n%s", errOut)
	}
}

// deploy --test refuses before it calls the server: none is running here.
func TestPatternDeployRunsTestsFirst(t *testing.T) {
	bad := brokenCopy(t, strings.NewReplacer("within: 5m", "within: 1m"), nil)
	_, errOut, code := run(t, "", "pattern", "deploy", filepath.Join(filepath.Dir(bad), "login-fail-logout.yaml"), "--test", bad, "--server", "127.0.0.1:1")
	if code == 0 || !strings.Contains(errOut, "not going on (--test)") || strings.Contains(errOut, "connect") {
		t.Errorf("exit %d:\n%s", code, errOut)
	}
}

// The README's quick start and docs/debugging.md show `cepctl
// pattern test` on the example with its output.
func TestReadmePatternTestExample(t *testing.T) {
	t.Chdir("../..")
	for _, f := range []string{"README.md", "docs/debugging.md"} {
		doc, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		shown := regexp.MustCompile("(?s)```sh\nbin/cepctl (pattern test [^\n]*)\n```\n\n```text\n(.*?)```").FindAllStringSubmatch(string(doc), -1)
		if len(shown) == 0 {
			t.Fatalf("%s shows no `cepctl pattern test` with its output", f)
		}
		for _, s := range shown {
			out, errOut, code := run(t, "", strings.Fields(s[1])...)
			if code != 0 || out != s[2] {
				t.Errorf("%s: cepctl %s (exit %d, stderr %q) prints\n%s\nthe document shows\n%s", f, s[1], code, errOut, out, s[2])
			}
		}
	}
}
