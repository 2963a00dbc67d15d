package shard

import (
	"bytes"
	"strings"
	"testing"
)

// A defect in the engine makes a matcher panic on some entry. Every
// replica would crash on that entry alike, and again on each replay: the
// shard could never apply its log again. Instead the failing pattern's
// state is dropped on every replica alike and the event dead-lettered
// with the reason; the other patterns' records are the same as without
// the fault, the failing pattern goes on with the events after it, and
// the replicas stay byte-identical.
func TestEngineFailureDropsThePatternState(t *testing.T) {
	log := randomLog(11, 60)
	apply := func(faultAt int) *State {
		calls := 0
		s := NewState(0, 15, 16)
		s.injectFault = func(pattern, key string) bool {
			if pattern != "any" || key != "k3" {
				return false
			}
			calls++
			return calls == faultAt
		}
		for _, b := range log {
			s.Apply(b)
		}
		return s
	}
	clean, a, b := apply(-1), apply(4), apply(4)
	if !bytes.Equal(snap(t, a, "s"), snap(t, b, "s")) {
		t.Fatal("replicas that applied the same log with the same fault differ")
	}
	byPattern := func(s *State) map[string][]string {
		out := map[string][]string{}
		for _, r := range s.Outbox() {
			out[r.Subject] = append(out[r.Subject], r.ID+" "+string(r.Payload))
		}
		return out
	}
	want, got := byPattern(clean), byPattern(a)
	for _, subj := range []string{"cep.out.ab", "cep.out.w"} {
		if strings.Join(got[subj], "\n") != strings.Join(want[subj], "\n") {
			t.Errorf("%s: %d records with the fault, %d without", subj, len(got[subj]), len(want[subj]))
		}
	}
	var failedAt []uint64
	for _, r := range a.Outbox() {
		if r.Subject == DeadLetterSubject("src") && strings.Contains(string(r.Payload), "pattern any failed on this entry and its state was dropped: injected fault") {
			failedAt = append(failedAt, r.Seq)
		}
	}
	if len(failedAt) != 1 {
		t.Fatalf("dead letters %v, want one for the failure", got[DeadLetterSubject("src")])
	}
	// the pattern went on: it has records of k3 after the fault, and
	// differs from the run without it (its state was dropped)
	after := 0
	for _, r := range a.Outbox() {
		if r.Subject == "cep.out.any" && r.Seq > failedAt[0] && strings.Contains(string(r.Payload), `"key":"k3"`) {
			after++
		}
	}
	if after == 0 || strings.Join(got["cep.out.any"], "\n") == strings.Join(want["cep.out.any"], "\n") {
		t.Fatalf("pattern any: %d records (%d of k3 after the fault) with the fault, %d without", len(got["cep.out.any"]), after, len(want["cep.out.any"]))
	}
}
