package shard

import (
	"strings"
	"testing"

	"github.com/cepcluster/cep/keygroup"
)

// A re-keyed event whose key, as a subject token, is past
// keygroup.MaxTokenBytes is dead-lettered naming the bound, not put in
// the outbox under a subject NATS would close the connection for; a key
// at the bound, escapes counted, is forwarded; every replica decides the
// same from the event alone.
func TestForwardDeadLettersKeysPastTheTokenBound(t *testing.T) {
	const derived = "src.kuser"
	spec := `{"name":"byuser","key":"e.user","time":"e.ts","stages":[{"name":"a","where":"e.t == \"A\""}]}`
	dep := deployOp(spec, 1, PolicyReset)
	dep.Reads = []string{derived}
	atBound := strings.Repeat(".", keygroup.MaxTokenBytes/3) // "%2E" each
	evs := []Event{
		{Pos: 1, Block: 1, Data: []byte(`{"user":"` + strings.Repeat("u", 5000) + `","t":"A","ts":1}`)},
		{Pos: 2, Block: 1, Data: []byte(`{"user":"` + atBound + `","t":"A","ts":2}`)},
		{Pos: 3, Block: 1, Data: []byte(`{"user":"` + atBound + `.","t":"A","ts":3}`)},
	}
	for range 2 { // two replicas
		s := NewState(0, 15, 16)
		s.Apply(&Batch{Ops: []Op{dep}})
		s.Apply(&Batch{Ops: []Op{ForwardOp{Source: "src", Target: derived, Events: evs}}})
		out := s.Outbox()
		if len(out) != 3 {
			t.Fatalf("outbox: %+v", out)
		}
		for i, o := range out {
			if err := keygroup.CheckSubjectBounds(o.Subject); err != nil {
				t.Errorf("record %d on a subject past the bounds: %v", i, err)
			}
		}
		if out[0].Subject != DeadLetterSubject("src") || !strings.Contains(string(out[0].Payload), "MaxTokenBytes = 255") ||
			!strings.Contains(string(out[0].Payload), `"position":1`) {
			t.Errorf("the 5,000-byte key: %s %s", out[0].Subject, out[0].Payload)
		}
		if out[1].Subject != derived+"."+keygroup.KeyToken(atBound) || out[1].ID != ForwardID(derived, 2) {
			t.Errorf("the key at the bound: %s %s", out[1].Subject, out[1].ID)
		}
		if out[2].Subject != DeadLetterSubject("src") || !strings.Contains(string(out[2].Payload), "MaxTokenBytes") {
			t.Errorf("the key one escape past the bound: %s %s", out[2].Subject, out[2].Payload)
		}
		if s.Forwarded()[derived] != 3 {
			t.Errorf("forwarded %v", s.Forwarded())
		}
	}
}
