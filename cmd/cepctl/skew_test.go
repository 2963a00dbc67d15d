package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
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

// Thirty events each 23h59m after the one before cannot carry the event
// time a month ahead offline either: each is measured against the time
// its line is read at (the wall clock, or --now), so after the first step
// every one is dead-lettered naming that bound, and the real events that
// follow the step match instead of coming out late. With --now the run
// is the same whenever it is repeated; without it the wall clock decides
// alike.
func TestRunRefusesEventTimeRatchet(t *testing.T) {
	dir := t.TempDir()
	spec := dir + "/skew.json"
	if err := os.WriteFile(spec, []byte(`{"name":"skew","source":"src","key":"e.k","time":"e.ts","within":"10s",
	 "stages":[{"name":"a","where":"e.t == 'A'"},{"name":"b","where":"e.t == 'B'","contiguity":"followedBy"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	const step = int64(23*60+59) * 60_000
	input := func(t0 int64) string {
		var b strings.Builder
		for i := range 31 {
			fmt.Fprintf(&b, `{"k":"r","t":"C","ts":%d}`+"\n", t0+int64(i)*step)
		}
		// real events just after the one step the bound lets through
		fmt.Fprintf(&b, `{"k":"x","t":"A","ts":%d}`+"\n"+`{"k":"x","t":"B","ts":%d}`+"\n", t0+step+1000, t0+step+2000)
		return b.String()
	}
	check := func(t *testing.T, t0 int64, args ...string) {
		t.Helper()
		out, stderr, code := run(t, input(t0), append([]string{"run", "-p", spec}, args...)...)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		if strings.Contains(out, `"type":"late"`) || strings.Count(out, `"type":"match"`) != 1 {
			t.Fatalf("records after the ratchet, want x's match and nothing late:\n%s", out)
		}
		if n := strings.Count(stderr, "cepctl: dead letter: "); n != 29 || !strings.Contains(stderr, "ahead of the time it was read at (ingest time") {
			t.Fatalf("%d dead letters, want 29 naming the ingest time:\n%s", n, stderr)
		}
	}
	t.Run("now", func(t *testing.T) {
		const t0 = int64(1_764_633_600_000)
		check(t, t0, "--now", "2025-12-02T00:00:00Z")
		a, _, _ := run(t, input(t0), "run", "-p", spec, "--now", "1764633600000")
		b, _, _ := run(t, input(t0), "run", "-p", spec, "--now", "1764633600000")
		if a != b {
			t.Fatalf("two runs with --now differ:\n%s\n%s", a, b)
		}
	})
	t.Run("wall clock", func(t *testing.T) {
		check(t, time.Now().UnixMilli())
	})
	if _, stderr, code := run(t, "", "run", "-p", spec, "--now", "yesterday"); code == 0 || !strings.Contains(stderr, `--now "yesterday": want Unix milliseconds or an RFC 3339 time`) {
		t.Fatalf("--now yesterday: exit %d, %s", code, stderr)
	}
}
