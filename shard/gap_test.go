package shard

import (
	"errors"
	"fmt"
	"testing"
)

// An entry of events that follows on an entry the shard never applied (Raft
// refused it, then took the next) is refused whole, so its reader reads
// again from where the shard is; read again, the events give the records of
// a shard that applied every entry. The same for an entry re-keying a
// derived source.
func TestEntryAfterOneNotAppliedIsRefused(t *testing.T) {
	var evs []Event
	for i := range 30 {
		k := fmt.Sprintf("k%d", i%3)
		evs = append(evs, ev(uint64(i+1), k, []string{"A", "B", "C"}[(i/3)%3], int64(10+i)))
	}
	entry := func(from, to int, after uint64) *Batch {
		op := eventsOp(evs[from:to]...)
		op.After = after
		return &Batch{Ops: []Op{op}}
	}
	deploy := &Batch{Ops: []Op{deployOp(abSpec, 1, PolicyReset), deployOp(anySpec, 1, PolicyReset)}}
	all := NewState(0, 15, 16)
	all.Apply(deploy)
	for _, b := range []*Batch{entry(0, 10, 0), entry(10, 20, 10), entry(20, 30, 20)} {
		if err := all.Apply(b); err != nil {
			t.Fatal(err)
		}
	}

	s := NewState(0, 15, 16)
	s.Apply(deploy)
	s.Apply(entry(0, 10, 0))
	// the entry of events 11-20 was refused by Raft: the next is not applied
	err := s.Apply(entry(20, 30, 20))
	var gap *GapError
	if !errors.As(err, &gap) || gap.After != 20 || gap.Applied != 10 {
		t.Fatalf("an entry after one not applied: %v", err)
	}
	if got := s.Positions()["src"]; got != 10 {
		t.Fatalf("position %d after a refused entry, want 10", got)
	}
	// read again from position 10, in other entries
	for _, b := range []*Batch{entry(10, 25, 10), entry(25, 30, 25)} {
		if err := s.Apply(b); err != nil {
			t.Fatal(err)
		}
	}
	if a, b := fmt.Sprint(outboxRecords(all)), fmt.Sprint(outboxRecords(s)); a != b || len(outboxRecords(all)) == 0 {
		t.Fatalf("records after the events were read again:\n%s\nwant\n%s", b, a)
	}

	fw := func(from, to int, after uint64) *Batch {
		return &Batch{Ops: []Op{ForwardOp{Source: "src", Target: "src.kx", Events: evs[from:to], After: after}}}
	}
	s.Apply(fw(0, 10, 0))
	if err := s.Apply(fw(20, 30, 20)); !errors.As(err, &gap) || gap.Applied != 10 {
		t.Fatalf("a forwarding entry after one not applied: %v", err)
	}
	if err := s.Apply(fw(10, 30, 10)); err != nil || s.Forwarded()["src.kx"] != 30 {
		t.Fatalf("forwarding read again: %v, forwarded up to %d", err, s.Forwarded()["src.kx"])
	}
}
