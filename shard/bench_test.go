package shard

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/cepcluster/cep/internal/fbom"
	"github.com/cepcluster/cep/keygroup"
	"github.com/cepcluster/cep/nfa"
	"github.com/cepcluster/cep/nfa/expr"
)

// The apply benchmark is what one replica does per event of the cluster
// benchmark (cmd/cepbench): the log entries of benchmark 3's events, 2,000
// to an entry as the leader proposes them, decoded and applied to the
// shard state, records going to the outbox, which an acknowledgement
// entry truncates as the leader's publisher would. The reference, in the
// same run, is the engine alone on the same events already decoded
// (nfa.Matcher.EventAt, as nfa's BenchmarkFollowedByOneOrMore feeds it):
// the difference is the state machine's own cost per event (the log
// entry's decoding, JSON decoding, key groups and positions, record ids
// and JSON, the outbox).

const (
	applyKeys   = 1000
	applyGroups = 256
	applyBatch  = 2000
	applyEvents = 1 << 18 // generated once; the benchmark cycles through them
)

type applyInput struct {
	entries [][]byte // encoded log entries of applyBatch events
	raw     [][]byte // the events' JSON, in order
	keys    []string
	ts      []int64
}

var applyIn *applyInput

// applyWorkload returns benchmark 3's events as cepbench publishes them
// (same fields and proportions), encoded as log entries.
func applyWorkload() *applyInput {
	if applyIn != nil {
		return applyIn
	}
	r := rand.New(rand.NewPCG(3, 5))
	in := &applyInput{}
	var evs []Event
	for i := 0; i < applyEvents; i++ {
		k := fmt.Sprintf("k%05d", r.IntN(applyKeys))
		b := []byte(`{"k":"` + k + `","type":"`)
		b = append(b, fbom.Type(r))
		b = append(b, `","ts":`...)
		b = strconv.AppendInt(b, int64(i+1), 10)
		b = append(b, `,"v":`...)
		b = strconv.AppendInt(b, int64(r.IntN(100)), 10)
		b = append(b, '}')
		in.raw, in.keys, in.ts = append(in.raw, b), append(in.keys, k), append(in.ts, int64(i+1))
		evs = append(evs, Event{Pos: uint64(i + 1), Block: keygroup.BlockOf(keygroup.OfKey(k, applyGroups), applyGroups), Data: b})
		if len(evs) == applyBatch {
			in.entries = append(in.entries, (&Batch{Ops: []Op{EventsOp{Source: "src", Events: evs}}}).Encode(nil))
			evs = nil
		}
	}
	applyIn = in
	return in
}

func applySpec() string { return fbom.Spec("fbom", "src", 200*applyKeys) }

func BenchmarkApply(b *testing.B) {
	in := applyWorkload()
	b.Run("state-machine", func(b *testing.B) {
		var s *State
		next := 0 // entry index; positions restart with a new state per cycle
		reset := func() {
			s = NewState(0, applyGroups-1, applyGroups)
			s.Apply(&Batch{Ops: []Op{deployOp(applySpec(), 1, PolicyReset)}})
			next = 0
		}
		reset()
		b.ReportAllocs()
		b.ResetTimer()
		for done := 0; done < b.N; done += applyBatch {
			if next == len(in.entries) {
				b.StopTimer()
				reset()
				b.StartTimer()
			}
			bt, err := DecodeBatch(in.entries[next])
			if err != nil {
				b.Fatal(err)
			}
			next++
			s.Apply(bt)
			if out := s.Outbox(); len(out) > 0 {
				s.Apply(&Batch{Ops: []Op{AckOp{Seq: out[len(out)-1].Seq}}})
			}
		}
		reportRate(b)
	})
	b.Run("engine", func(b *testing.B) {
		var m *nfa.Matcher
		next := 0
		reset := func() {
			p, err := nfa.CompileNamed([]byte(applySpec()), "fbom")
			if err != nil {
				b.Fatal(err)
			}
			m = nfa.NewMatcher(p)
			next = 0
		}
		reset()
		decoded := make([]expr.Event, len(in.raw))
		for i, raw := range in.raw {
			var err error
			if decoded[i], err = expr.DecodeEvent(raw); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if next == len(in.raw) {
				b.StopTimer()
				reset()
				b.StartTimer()
			}
			m.EventAt(in.keys[next], in.ts[next], nfa.Input{Data: decoded[next], Raw: in.raw[next], Pos: uint64(next + 1)})
			next++
		}
		reportRate(b)
	})
}

func reportRate(b *testing.B) {
	if s := b.Elapsed().Seconds(); s > 0 {
		b.ReportMetric(float64(b.N)/s, "events/s")
	}
}
