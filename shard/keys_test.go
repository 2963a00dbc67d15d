package shard

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

func deadLetterReasons(s *State) []string {
	var out []string
	for _, r := range s.Outbox() {
		if strings.HasPrefix(r.Subject, "cep.deadletter.") {
			var rec struct{ Reason string }
			json.Unmarshal(r.Payload, &rec)
			out = append(out, rec.Reason)
		}
	}
	return out
}

func matchKeys(s *State) []string {
	var out []string
	for _, r := range s.Outbox() {
		var rec struct{ Type, Key string }
		json.Unmarshal(r.Payload, &rec)
		if rec.Type == "match" {
			out = append(out, rec.Key)
		}
	}
	return out
}

// A pattern holds state for at most its deployment's MaxKeys keys on a
// shard: an event of a new key past it is dead-lettered with the bound in
// the reason, existing keys keep matching, and keys whose state ends are
// freed, after which new keys are taken again. Replicas applying the same
// log, and one restored from a snapshot, decide alike.
func TestMaxKeysBound(t *testing.T) {
	const n = 3
	d := deployOp(abSpec, 1, PolicyReset)
	d.MaxKeys = n
	log := []*Batch{
		{Ops: []Op{d, eventsOp(ev(1, "k0", "A", 10), ev(2, "k1", "A", 11), ev(3, "k2", "A", 12))}},
		{Ops: []Op{eventsOp(ev(4, "k3", "A", 13), ev(5, "k0", "B", 14), ev(6, "k4", "A", 15))}},
	}
	later := []*Batch{
		{Ops: []Op{eventsOp(ev(7, "k5", "A", 20), ev(11, "k7", "A", 21))}},
		{Ops: []Op{WatermarkOp{Pattern: "ab", Time: 500}}},
		{Ops: []Op{eventsOp(ev(12, "k3", "A", 600), ev(13, "k3", "B", 601), ev(14, "k6", "A", 602))}},
	}
	a, b := NewState(0, 15, 16), NewState(0, 15, 16)
	for _, bt := range log {
		a.Apply(bt)
		b.Apply(bt)
	}
	// k4's refused event still moved the watermark to 14, past k0's B:
	// k0 matched, and its state ended and was freed
	if info := a.Patterns()[0]; info.Keys != n-1 || info.MaxKeys != n || info.Watermark != 14 || a.patterns[0].m.HasKey("k0") {
		t.Fatalf("after %d keys, two refused and a match: %+v", n, info)
	}
	reasons := deadLetterReasons(a)
	if len(reasons) != 2 || !strings.Contains(reasons[0], "maxKeys = 3") || !strings.Contains(reasons[0], "docs/limits.md") {
		t.Fatalf("dead letters: %q", reasons)
	}
	if info := a.PatternFailures()[0]; info.KeysRefused != 2 || a.Counters().DeadLetters != 2 {
		t.Fatalf("refused %d, dead letters %d", info.KeysRefused, a.Counters().DeadLetters)
	}
	sa, sb := snap(t, a, "s"), snap(t, b, "s")
	if !bytes.Equal(sa, sb) {
		t.Fatal("replicas' snapshots differ")
	}
	r := restore(t, 0, 15, sa)
	for _, bt := range later {
		a.Apply(bt)
		r.Apply(bt)
	}
	if !slices.Equal(payloads(a), payloads(r)) {
		t.Fatalf("the restored replica differs:\n%v\n%v", payloads(a), payloads(r))
	}
	if !bytes.Equal(snap(t, a, "t"), snap(t, r, "t")) {
		t.Fatal("the restored replica's state differs")
	}
	// k5 took k0's place and k7 was refused on both (the bound survived
	// the restore); after the watermark timed every key out, k3 and k6 are
	// taken and k3 matches
	reasons = deadLetterReasons(r)
	if len(reasons) != 3 || !strings.Contains(reasons[2], "maxKeys = 3") {
		t.Fatalf("dead letters after the restore: %q", reasons)
	}
	if got := matchKeys(r); !slices.Equal(got, []string{"k0", "k3"}) {
		t.Fatalf("matches for %v, want k0 and k3: %v", got, payloads(r))
	}
	// k3's state ended with its match and was freed: only k6 holds state
	if info := r.Patterns()[0]; info.Keys != 1 || !r.patterns[0].m.HasKey("k6") {
		t.Fatalf("keys after the timeouts, a match and a new key: %+v", info)
	}
}

// Without MaxKeys a deployment gets DefaultMaxKeys; negative sets none.
func TestMaxKeysDefault(t *testing.T) {
	for _, c := range []struct{ set, want int64 }{{0, DefaultMaxKeys}, {-1, 0}, {7, 7}} {
		d := deployOp(abSpec, 1, PolicyReset)
		d.MaxKeys = c.set
		s := NewState(0, 15, 16)
		s.Apply(&Batch{Ops: []Op{d}})
		if got := s.Patterns()[0].MaxKeys; int64(got) != c.want {
			t.Errorf("MaxKeys %d: bound %d, want %d", c.set, got, c.want)
		}
	}
	// no bound: every key is taken
	d := deployOp(abSpec, 1, PolicyReset)
	d.MaxKeys = -1
	s := NewState(0, 15, 16)
	s.Apply(&Batch{Ops: []Op{d, eventsOp(ev(1, "k0", "A", 10), ev(2, "k1", "A", 11), ev(3, "k2", "A", 12))}})
	if len(deadLetterReasons(s)) != 0 || s.Patterns()[0].Keys != 3 {
		t.Fatalf("unbounded: %v, %+v", deadLetterReasons(s), s.Patterns()[0])
	}
}

// A late event of a new key takes no state: it gets its late record, not
// a refusal.
func TestMaxKeysLateEvent(t *testing.T) {
	d := deployOp(abSpec, 1, PolicyReset)
	d.MaxKeys = 1
	s := NewState(0, 15, 16)
	s.Apply(&Batch{Ops: []Op{d, eventsOp(ev(1, "k0", "A", 10), ev(2, "k0", "A", 20), ev(3, "k1", "A", 5))}})
	if len(deadLetterReasons(s)) != 0 || s.Counters().Late != 1 {
		t.Fatalf("dead letters %q, counters %+v", deadLetterReasons(s), s.Counters())
	}
}
