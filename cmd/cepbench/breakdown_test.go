package main

import (
	"math"
	"testing"

	"github.com/google/pprof/profile"
)

// TestBreakdownChargesTheFirstMatchingCategory builds a profile whose
// samples have known stacks and checks each is charged to the first
// category that names a function on its stack, whatever the frame's depth,
// and that the parts add up to the total.
func TestBreakdownChargesTheFirstMatchingCategory(t *testing.T) {
	fn := map[string]*profile.Function{}
	loc := func(names ...string) *profile.Location {
		l := &profile.Location{}
		for _, n := range names {
			if fn[n] == nil {
				fn[n] = &profile.Function{ID: uint64(len(fn) + 1), Name: n}
			}
			l.Line = append(l.Line, profile.Line{Function: fn[n]})
		}
		return l
	}
	sample := func(ns int64, stack ...*profile.Location) *profile.Sample {
		return &profile.Sample{Value: []int64{1, ns}, Location: stack}
	}
	p := &profile.Profile{
		SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		Sample: []*profile.Sample{
			// the matcher inside the FSM inside Raft: the matcher's
			sample(3_000_000, loc("runtime.mallocgc"), loc("github.com/cepcluster/cep/nfa.(*Matcher).advance"),
				loc("github.com/cepcluster/cep/shard.(*FSM).Apply"), loc("github.com/hashicorp/raft.(*Raft).runFSM")),
			// decoding inlined into the apply: the decoding's
			sample(2_000_000, loc("github.com/valyala/fastjson.(*Parser).Parse", "github.com/cepcluster/cep/nfa.DecodeInput"),
				loc("github.com/cepcluster/cep/shard.(*FSM).Apply")),
			sample(1_000_000, loc("github.com/nats-io/nats-server/v2/server.(*consumer).getNextMsg")),
			sample(500_000, loc("runtime.futex")),
		},
	}
	b, err := breakdown(p, 1000)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{
		"nfa matcher (shard apply)":         3,
		"event JSON decoding":               2,
		"NATS server: consumers delivering": 1,
		otherCategory:                       0.5,
	}
	sum := 0.0
	for _, part := range b.Parts {
		if math.Abs(part.MicrosPerEvent-want[part.Category]) > 1e-9 {
			t.Errorf("%s: %.3f µs/event, want %.3f", part.Category, part.MicrosPerEvent, want[part.Category])
		}
		delete(want, part.Category)
		sum += part.MicrosPerEvent
	}
	if len(want) > 0 {
		t.Errorf("categories missing: %v", want)
	}
	if math.Abs(sum-b.Total) > 1e-9 || math.Abs(b.Total-6.5) > 1e-9 {
		t.Errorf("parts add to %.3f, total %.3f, want 6.5", sum, b.Total)
	}
	if b.Parts[0].Category != "nfa matcher (shard apply)" {
		t.Errorf("largest first: %v", b.Parts)
	}
	if _, err := breakdown(&profile.Profile{SampleType: []*profile.ValueType{{Type: "alloc_space", Unit: "bytes"}}}, 1); err == nil {
		t.Error("a heap profile was taken for a CPU profile")
	}
}
