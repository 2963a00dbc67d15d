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

// The README's restore walkthrough (and the other savepoint restores it
// shows) gives cepctl flags it takes: each `savepoint restore` line parses,
// with the server the walkthrough names, and every --positions shown means
// a mapping.
func TestReadmeSavepointRestores(t *testing.T) {
	t.Chdir("../..")
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	server := ""
	if m := regexp.MustCompile(`(?m)^B="--server (\S+)"$`).FindSubmatch(readme); m != nil {
		server = string(m[1])
	}
	lines := regexp.MustCompile(`(?m)^bin/cepctl (.*savepoint restore .*?)(?:\s+#.*)?$`).FindAllSubmatch(readme, -1)
	positions := 0
	for _, l := range lines {
		args := strings.Fields(strings.ReplaceAll(strings.ReplaceAll(string(l[1]), "$B", "--server "+server), "'", ""))
		got, err := parse(t, parseEnv{}, "savepoint", newSavepointRestoreCmd, args...)
		if err != nil {
			t.Errorf("README: cepctl %s: %v", l[1], err)
			continue
		}
		if strings.Contains(string(l[1]), "$B") && (server == "" || got.Server != "http://"+server && got.Server != server) {
			t.Errorf("README: cepctl %s: server %q, the walkthrough's is %q", l[1], got.Server, server)
		}
		if got.Positions != "" {
			positions++
			if m, _, err := positionMapping(got.Positions); err != nil || m == 0 {
				t.Errorf("README: --positions %s: %v", got.Positions, err)
			}
		}
	}
	if len(lines) < 3 || positions == 0 {
		t.Fatalf("the README shows %d savepoint restores, %d with --positions: the walkthrough is missing", len(lines), positions)
	}
}
