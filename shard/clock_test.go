package shard

import (
	"reflect"
	"strings"
	"testing"

	"github.com/cepcluster/cep/watermark"
)

func clockedDeploy() *Deploy {
	op := deployOp(abSpec, 1, PolicyReset)
	op.Clock = true
	return op
}

// OpClock and a deployment's clock flag survive encoding; a version 5
// entry has no clock flag (false) and may not carry OpClock.
func TestClockBatchEncoding(t *testing.T) {
	b := &Batch{Ops: []Op{clockedDeploy(), ClockOp{Pattern: "ab", Source: "src", Time: -7},
		ClockModeOp{Pattern: "ab", On: true}, ClockModeOp{Pattern: "ab"}}}
	enc := b.Encode(nil)
	got, err := DecodeBatch(enc)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, b) {
		t.Fatalf("decoded %+v, want %+v", got, b)
	}
	old := &Batch{Ops: []Op{deployOp(abSpec, 1, PolicyReset)}}
	v5 := old.Encode(nil)
	v5 = append([]byte{5}, v5[1:len(v5)-2]...) // version 5 had no clock flag (nor bound on bytes)
	if got, err := DecodeBatch(v5); err != nil || got.Ops[0].(*Deploy).Clock {
		t.Fatalf("version 5 deployment: %v, %+v", err, got)
	}
	clockV5 := append([]byte{5}, (&Batch{Ops: []Op{ClockOp{Pattern: "ab", Source: "src", Time: 1}}}).Encode(nil)[1:]...)
	if _, err := DecodeBatch(clockV5); err == nil {
		t.Fatal("a version 5 entry with a clock op decoded")
	}
	bad := (&Batch{Ops: []Op{clockedDeploy()}}).Encode(nil)
	bad[len(bad)-2] = 2 // the deployment's clock flag (before the bound on bytes)
	if _, err := DecodeBatch(bad); err == nil || !strings.Contains(err.Error(), "clock flag") {
		t.Fatalf("a clock flag of 2 decoded: %v", err)
	}
}

// On a clocked deployment, events move the source's progress but not the
// watermark; OpClock moves it, a lower one changes nothing, and a
// replica restored from a snapshot behaves alike.
func TestApplyClock(t *testing.T) {
	s := NewState(0, 15, 16)
	s.Apply(&Batch{Ops: []Op{clockedDeploy()}})
	s.Apply(&Batch{Ops: []Op{eventsOp(ev(1, "x", "A", 10), ev(2, "x", "B", 20), ev(3, "y", "C", 500))}})
	cs := s.Clocks()
	if len(cs) != 1 || cs[0].Progress != 499 || cs[0].MaxTime != 500 || cs[0].Clock != watermark.MinTime || cs[0].Source != "src" {
		t.Fatalf("clocks after the events: %+v", cs)
	}
	if len(s.Outbox()) != 0 {
		t.Fatalf("events moved a clocked watermark: %v", payloads(s))
	}
	s.Apply(&Batch{Ops: []Op{ClockOp{Pattern: "ab", Source: "src", Time: 30}}})
	if out := payloads(s); len(out) != 1 || !strings.Contains(out[0], `"type":"match"`) {
		t.Fatalf("outbox after the clock: %v", out)
	}
	s.Apply(&Batch{Ops: []Op{ClockOp{Pattern: "ab", Source: "src", Time: 5}, ClockOp{Pattern: "nope", Source: "src", Time: 99}, ClockOp{Pattern: "ab", Source: "other", Time: 99}}})
	if c := s.Clocks()[0].Clock; c != 30 {
		t.Fatalf("clock %d after a lower one and foreign ones, want 30", c)
	}
	r := restore(t, 0, 15, snap(t, s, "a"))
	for _, st := range []*State{s, r} {
		st.Apply(&Batch{Ops: []Op{eventsOp(ev(4, "z", "A", 600), ev(5, "z", "B", 610))}})
		if c := st.Clocks()[0]; c.Clock != 30 || c.Progress != 609 {
			t.Fatalf("clock after more events: %+v", c)
		}
		st.Apply(&Batch{Ops: []Op{ClockOp{Pattern: "ab", Source: "src", Time: 700}}})
	}
	if a, b := payloads(s), payloads(r); !reflect.DeepEqual(a, b) || len(a) != 2 {
		t.Fatalf("restored replica differs:\n%v\n%v", a, b)
	}
}

// A deployment without the clock flag (logged before it existed) keeps
// the watermark of the shard's own events and lists no clock.
func TestUnclockedDeploymentKeepsOwnWatermark(t *testing.T) {
	s := NewState(0, 15, 16)
	s.Apply(&Batch{Ops: []Op{deployOp(abSpec, 1, PolicyReset)}})
	s.Apply(&Batch{Ops: []Op{eventsOp(ev(1, "x", "A", 10), ev(2, "x", "B", 20), ev(3, "y", "C", 500))}})
	if len(s.Clocks()) != 0 || len(s.Outbox()) != 1 {
		t.Fatalf("clocks %+v, outbox %v", s.Clocks(), payloads(s))
	}
	// people see its watermark all the same: the events' (max time 500,
	// outOfOrderness 0, so 499) with the newest event time
	if w := s.Watermarks(); len(w) != 1 || w[0].Clock != 499 || w[0].MaxTime != 500 || w[0].Source != "src" {
		t.Fatalf("watermarks %+v", w)
	}
}

// OpClockMode switches a pattern between its own events (a shard alone)
// and the clock, for the matchers and for what a snapshot keeps.
func TestClockMode(t *testing.T) {
	s := NewState(0, 15, 16)
	s.Apply(&Batch{Ops: []Op{clockedDeploy(), ClockModeOp{Pattern: "ab", On: false}}})
	if m := s.ClockModes(); len(m) != 1 || m["ab"] {
		t.Fatalf("modes %v", m)
	}
	s.Apply(&Batch{Ops: []Op{eventsOp(ev(1, "x", "A", 10), ev(2, "x", "B", 20), ev(3, "y", "C", 500))}})
	if len(s.Outbox()) != 1 || len(s.Clocks()) != 0 {
		t.Fatalf("off the clock, events move the watermark: outbox %v, clocks %+v", payloads(s), s.Clocks())
	}
	s.Apply(&Batch{Ops: []Op{ClockModeOp{Pattern: "ab", On: true}}})
	r := restore(t, 0, 15, snap(t, s, "m"))
	for _, st := range []*State{s, r} {
		st.Apply(&Batch{Ops: []Op{eventsOp(ev(4, "z", "A", 600), ev(5, "z", "B", 610), ev(6, "y", "C", 2000))}})
		if len(st.Outbox()) != 1 || !st.ClockModes()["ab"] {
			t.Fatalf("on the clock again (restored %v), events moved the watermark: %v", st == r, payloads(st))
		}
	}
}
