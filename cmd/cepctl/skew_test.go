package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// An event at the end of time in the middle of the example input is
// dead-lettered (on stderr, as a cluster publishes it on
// cep.deadletter.<source>) with its reason, and changes nothing else: the
// records are those of the input without it, and the match it would have
// made late still arrives.
func TestRunDeadLettersFarFutureEvent(t *testing.T) {
	ex, err := os.ReadFile("../../examples/events.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(ex)), "\n")
	const poison = `{"account":"acc-9","type":"LOGIN","ts":9223372036854775807}`
	with := append(append(append([]string{}, lines[:2]...), poison), lines[2:]...)
	without := append(append(append([]string{}, lines[:2]...), ""), lines[2:]...) // a blank line keeps the line numbers

	got, stderr, code := run(t, strings.Join(with, "\n")+"\n", "run", "-p", "../../examples/login-fail-logout.yaml")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	want, _, code := run(t, strings.Join(without, "\n")+"\n", "run", "-p", "../../examples/login-fail-logout.yaml")
	if code != 0 || !strings.Contains(want, `"type":"match","pattern":"login-fail-logout","key":"acc-1"`) {
		t.Fatalf("exit %d, the example's match missing:\n%s", code, want)
	}
	if got != want {
		t.Fatalf("with the far-future event:\n%s\nwithout it:\n%s", got, want)
	}
	type deadLetter struct {
		Source, Pattern, Reason string
		Position                uint64
		Data                    json.RawMessage
	}
	var dead []deadLetter
	for _, l := range strings.Split(stderr, "\n") {
		if rest, ok := strings.CutPrefix(l, "cepctl: dead letter: "); ok {
			var d deadLetter
			if err := json.Unmarshal([]byte(rest), &d); err != nil {
				t.Fatalf("%q: %v", l, err)
			}
			dead = append(dead, d)
		}
	}
	if len(dead) != 1 {
		t.Fatalf("dead letters in %q, want one", stderr)
	}
	d := dead[0]
	if d.Source != "bank" || d.Pattern != "login-fail-logout" || d.Position != 3 || string(d.Data) != poison ||
		!strings.HasPrefix(d.Reason, "pattern login-fail-logout: time 9223372036854775807 is too close to the end of the time range: maxFutureSkew = 24h0m0s") {
		t.Fatalf("dead letter %+v", d)
	}
}
