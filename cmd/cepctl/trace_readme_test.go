package main

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// The README's `cepctl run --trace` example writes exactly the trace the
// README shows after it.
func TestReadmeTraceExample(t *testing.T) {
	t.Chdir("../..")
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	shown := regexp.MustCompile("(?s)```sh\n#[^\n]*\ngo run ./cmd/cepctl (run [^\n]*--trace[^\n]*) >/dev/null\n```\n\n```text\n(.*?)```").FindAllStringSubmatch(string(readme), -1)
	if len(shown) == 0 {
		t.Fatal("the README shows no `cepctl run --trace` with its trace")
	}
	for _, s := range shown {
		_, trace, code := run(t, "", strings.Fields(s[1])...)
		if code != 0 || trace != s[2] {
			t.Errorf("cepctl %s (exit %d) writes to stderr\n%s\nthe README shows\n%s", s[1], code, trace, s[2])
		}
	}
}
