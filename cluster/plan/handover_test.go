package plan

import (
	"fmt"
	"sort"
	"testing"

	"pgregory.net/rapid"
)

// The rules each trigger followed before they asked HandOverTarget, kept
// to show what changed: nothing, but that the preferred replica is taken
// when it qualifies, and ties go to the lowest id.

// natsHandOverTargetBefore is the cut-off leader's rule.
func natsHandOverTargetBefore(self string, mine uint64, reports []Replica) (id string, ok bool) {
	sorted := append([]Replica(nil), reports...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].ID < sorted[j].ID })
	var best uint64
	for _, r := range sorted {
		if r.ID == self || !r.Voter || !r.NATSReachable || r.Applied+BehindHandOff < mine {
			continue
		}
		if !ok || r.Applied > best {
			id, best, ok = r.ID, r.Applied, true
		}
	}
	return id, ok
}

// behindBefore is handOffIfBehind's rule (mostApplied, in the
// configuration's order, then the threshold).
func behindBefore(self string, mine, last uint64, reports []Replica) (id string, ok bool) {
	if last < mine+BehindHandOff {
		return "", false
	}
	var applied uint64
	for _, r := range reports {
		if !r.Voter || r.ID == self || !r.NATSReachable {
			continue
		}
		if !ok || r.Applied > applied {
			id, applied, ok = r.ID, r.Applied, true
		}
	}
	if !ok || applied+BehindHandOff/2 < last {
		return "", false
	}
	return id, true
}

// preferredBefore is handOver's rule, given the preferred replica's report.
func preferredBefore(self, preferred string, mine uint64, rep Replica) bool {
	if preferred == "" || preferred == self || !rep.Voter {
		return false
	}
	if !rep.NATSReachable {
		return false
	}
	return rep.Applied+HandOverLag >= mine
}

func drawHandOver(t *rapid.T, trigger Trigger) HandOver {
	h := HandOver{Trigger: trigger, Self: "n1"}
	h.Applied = rapid.Uint64Range(0, 1000).Draw(t, "mine")
	h.Last = h.Applied + rapid.Uint64Range(0, 200).Draw(t, "to_apply")
	h.Preferred = rapid.SampledFrom([]string{"", "n1", "n2", "n3", "n7"}).Draw(t, "preferred")
	seen := map[string]bool{}
	for i, n := 0, rapid.IntRange(0, 6).Draw(t, "replicas"); i < n; i++ {
		id := fmt.Sprintf("n%d", rapid.IntRange(1, 8).Draw(t, "id"))
		if seen[id] { // a configuration names each server once
			continue
		}
		seen[id] = true
		h.Replicas = append(h.Replicas, Replica{
			ID:            id,
			Voter:         rapid.Bool().Draw(t, "voter"),
			Applied:       rapid.Uint64Range(0, 1300).Draw(t, "applied"),
			NATSReachable: rapid.SampledFrom([]bool{true, true, false}).Draw(t, "reaches_nats"),
		})
	}
	return h
}

func reportOf(h HandOver, id string) (Replica, bool) {
	for _, r := range h.Replicas {
		if r.ID == id {
			return r, true
		}
	}
	return Replica{}, false
}

// checkAsBefore: the new rule hands over exactly when the old one did, and
// to the old one's choice, or to the preferred replica, or to one that
// has applied as much.
func checkAsBefore(t *rapid.T, h HandOver, old string, oldOK bool) {
	id, ok := HandOverTarget(h)
	if ok != oldOK {
		t.Fatalf("%v: hands over %v (%s), before %v (%s): %+v", h.Trigger, ok, id, oldOK, old, h)
	}
	if !ok || id == old || id == h.Preferred {
		return
	}
	a, _ := reportOf(h, id)
	b, _ := reportOf(h, old)
	if a.Applied != b.Applied || id > old {
		t.Fatalf("%v: chose %s (applied %d), before %s (applied %d): %+v", h.Trigger, id, a.Applied, old, b.Applied, h)
	}
}

func TestHandOverCutOffAsBefore(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		h := drawHandOver(t, CutOff)
		old, ok := natsHandOverTargetBefore(h.Self, h.Applied, h.Replicas)
		checkAsBefore(t, h, old, ok)
	})
}

func TestHandOverBehindAsBefore(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		h := drawHandOver(t, Behind)
		old, ok := behindBefore(h.Self, h.Applied, h.Last, h.Replicas)
		checkAsBefore(t, h, old, ok)
	})
}

func TestHandOverPreferredAsBefore(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		h := drawHandOver(t, Preferred)
		// handOver asks only the preferred replica's node
		rep, found := reportOf(h, h.Preferred)
		if found {
			h.Replicas = []Replica{rep}
		} else {
			h.Replicas = nil
		}
		old := found && preferredBefore(h.Self, h.Preferred, h.Applied, rep)
		id, ok := HandOverTarget(h)
		if ok != old || ok && id != h.Preferred {
			t.Fatalf("hands over %v to %s, before %v: %+v", ok, id, old, h)
		}
	})
}

// Whatever the trigger, the target is another voter that reaches NATS,
// the preferred replica when it qualifies, otherwise one that has applied
// the most of those that qualify (the lowest id of them); none is chosen
// only when none qualifies.
func TestHandOverTargetQualifies(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		trigger := rapid.SampledFrom([]Trigger{Preferred, Behind, CutOff, Closing}).Draw(t, "trigger")
		h := drawHandOver(t, trigger)
		// the mark each trigger measures a replica against, independently
		qualifies := func(r Replica) bool {
			if r.ID == h.Self || !r.Voter || !r.NATSReachable {
				return false
			}
			switch trigger {
			case Preferred:
				return h.Preferred != h.Self && r.ID == h.Preferred && r.Applied+HandOverLag >= h.Applied
			case Behind:
				return h.Last-h.Applied >= BehindHandOff && r.Applied+BehindHandOff/2 >= h.Last
			case CutOff, Closing:
				return r.Applied+BehindHandOff >= h.Applied
			}
			return false
		}
		var best *Replica
		for i := range h.Replicas {
			r := &h.Replicas[i]
			if qualifies(*r) && (best == nil || r.Applied > best.Applied || r.Applied == best.Applied && r.ID < best.ID) {
				best = r
			}
		}
		id, ok := HandOverTarget(h)
		if best == nil {
			if ok {
				t.Fatalf("chose %s though no replica qualifies: %+v", id, h)
			}
			return
		}
		if !ok {
			t.Fatalf("chose none though %s qualifies: %+v", best.ID, h)
		}
		chosen, _ := reportOf(h, id)
		if !qualifies(chosen) {
			t.Fatalf("chose %s, which does not qualify: %+v", id, h)
		}
		if p, found := reportOf(h, h.Preferred); found && qualifies(p) {
			if id != h.Preferred {
				t.Fatalf("chose %s though the preferred %s qualifies: %+v", id, h.Preferred, h)
			}
			return
		}
		if id != best.ID {
			t.Fatalf("chose %s (applied %d), want %s (applied %d): %+v", id, chosen.Applied, best.ID, best.Applied, h)
		}
	})
}
