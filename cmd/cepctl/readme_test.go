package main

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// The README shows `cepctl run` on the examples with their output: each
// command it shows prints exactly the JSON block that follows it.
func TestReadmeRunExamples(t *testing.T) {
	t.Chdir("../..")
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	shown := regexp.MustCompile("(?s)```sh\ngo run ./cmd/cepctl (run [^\n]*)\n```.*?```json\n(.*?)```").FindAllStringSubmatch(string(readme), -1)
	if len(shown) < 2 {
		t.Fatalf("the README shows %d `cepctl run` commands with their output, want the pattern's and the query's", len(shown))
	}
	for _, s := range shown {
		out, errOut, code := run(t, "", strings.Fields(s[1])...)
		if code != 0 || out != s[2] {
			t.Errorf("cepctl %s (exit %d, stderr %q) prints\n%s\nthe README shows\n%s", s[1], code, errOut, out, s[2])
		}
	}
}

// The README's quick start shows `cepctl pattern explain` on the example
// with its output.
func TestReadmeExplainExample(t *testing.T) {
	t.Chdir("../..")
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	shown := regexp.MustCompile("(?s)```sh\nbin/cepctl (pattern explain [^\n]*)\n```\n\n```text\n(.*?)```").FindAllStringSubmatch(string(readme), -1)
	if len(shown) == 0 {
		t.Fatal("the README shows no `cepctl pattern explain` with its output")
	}
	for _, s := range shown {
		r := cepctlEnv(t, nil, "", strings.Fields(s[1])...)
		if r.code != 0 || r.stdout != s[2] {
			t.Errorf("cepctl %s (exit %d, stderr %q) prints\n%s\nthe README shows\n%s", s[1], r.code, r.stderr, r.stdout, s[2])
		}
	}
}
