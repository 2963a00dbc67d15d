package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cepcluster/cep/internal/testutil"
)

// Against a real node: the quick start's events published, acc-3's
// trace read from the source's stream equals the trace of acc-3's events
// run offline (cepctl run --trace, time left at the last event), and it
// shows why acc-3 has not matched: a partial match waiting for a logout.
// Another key's events are not in it; -o json is JSON lines; a pattern
// that does not exist is NotFound.
func TestPatternTraceFromTheStream(t *testing.T) {
	url := quickStartNode(t)
	doc := "../../examples/login-fail-logout.yaml"
	events := "../../examples/events.jsonl"
	cepctl(t, url, "publish", "--source", "bank", "-f", events).mustOK(t)

	b, err := os.ReadFile(events)
	if err != nil {
		t.Fatal(err)
	}
	var acc3 []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if strings.Contains(l, `"acc-3"`) {
			acc3 = append(acc3, l)
		}
	}
	only := filepath.Join(t.TempDir(), "acc-3.jsonl")
	if err := os.WriteFile(only, []byte(strings.Join(acc3, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, want, code := run(t, "", "run", "-p", doc, "-i", only, "--trace", "--final-watermark=false")
	if code != 0 || want == "" {
		t.Fatalf("the offline trace: exit %d, %q", code, want)
	}
	var got string
	testutil.Eventually(t, 30*time.Second, func() error {
		got = cepctl(t, url, "pattern", "trace", "login-fail-logout", "--key", "acc-3").mustOK(t).stdout
		if got != want {
			return &testError{"the trace from the stream:\n" + got + "\noffline:\n" + want}
		}
		return nil
	})
	if !strings.Contains(got, "acc-3") || strings.Contains(got, "acc-1") {
		t.Errorf("the trace of acc-3 names other keys or not acc-3:\n%s", got)
	}
	js := cepctl(t, url, "pattern", "trace", "login-fail-logout", "--key", "acc-3", "--last", "1", "-o", "json").mustOK(t).stdout
	for _, l := range strings.Split(strings.TrimSpace(js), "\n") {
		if !strings.HasPrefix(l, "{") || !strings.Contains(l, `"acc-3"`) && strings.Contains(l, `"key"`) {
			t.Errorf("-o json line %q", l)
		}
	}
	cepctl(t, url, "pattern", "trace", "nope", "--key", "x").mustFail(t, "not found")
	cepctl(t, url, "pattern", "trace", "login-fail-logout").mustFail(t, "--key")
}
