package cluster

import (
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// The link is down from the first unanswered probe until one is answered,
// whatever comes in between.
func TestNATSLinkDownFromFirstUnansweredProbe(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var l natsLink
		t0 := time.Unix(1000, 0)
		var downSince time.Time // the reference: first failure of the current run
		at := t0
		for i, n := 0, rapid.IntRange(1, 50).Draw(t, "probes"); i < n; i++ {
			at = at.Add(time.Duration(rapid.IntRange(1, 2000).Draw(t, "gap_ms")) * time.Millisecond)
			ok := rapid.Bool().Draw(t, "answered")
			wasDown := !downSince.IsZero()
			changed := l.observe(ok, at)
			switch {
			case ok:
				downSince = time.Time{}
			case downSince.IsZero():
				downSince = at
			}
			if changed != (wasDown == ok) {
				t.Fatalf("probe %d answered=%v: changed=%v while the link was down=%v", i, ok, changed, wasDown)
			}
			now := at.Add(time.Duration(rapid.IntRange(0, 5000).Draw(t, "now_ms")) * time.Millisecond)
			want := time.Duration(0)
			if !downSince.IsZero() {
				want = max(now.Sub(downSince), time.Nanosecond)
			}
			if got := l.unreachableFor(now); got != want {
				t.Fatalf("unreachableFor = %v, want %v", got, want)
			}
		}
	})
}

// The replica a leader cut off from NATS hands over to reaches NATS, votes,
// is not the leader itself, has nearly caught up, and has applied the most
// of those that qualify; none is chosen only when none qualifies.
func TestNATSHandOverTargetQualifies(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		self := "n1"
		mine := rapid.Uint64Range(0, 1000).Draw(t, "mine")
		var reports []replicaReport
		for i, n := 0, rapid.IntRange(0, 6).Draw(t, "replicas"); i < n; i++ {
			reports = append(reports, replicaReport{
				id:              fmt.Sprintf("n%d", rapid.IntRange(1, 8).Draw(t, "id")),
				voter:           rapid.Bool().Draw(t, "voter"),
				applied:         rapid.Uint64Range(0, 1100).Draw(t, "applied"),
				natsUnreachable: time.Duration(rapid.SampledFrom([]int{0, 0, 1, 3000}).Draw(t, "down_ms")) * time.Millisecond,
			})
		}
		qualifies := func(r replicaReport) bool {
			return r.id != self && r.voter && r.natsUnreachable == 0 && r.applied+behindHandOff >= mine
		}
		id, ok := natsHandOverTarget(self, mine, reports)
		var best *replicaReport
		for i := range reports {
			if qualifies(reports[i]) && (best == nil || reports[i].applied > best.applied || reports[i].applied == best.applied && reports[i].id < best.id) {
				best = &reports[i]
			}
		}
		if best == nil {
			if ok {
				t.Fatalf("chose %s though no replica qualifies: %+v", id, reports)
			}
			return
		}
		if !ok {
			t.Fatalf("chose none though %s qualifies: %+v", best.id, reports)
		}
		var chosen *replicaReport
		for i := range reports {
			if reports[i].id == id && qualifies(reports[i]) && (chosen == nil || reports[i].applied > chosen.applied) {
				chosen = &reports[i]
			}
		}
		if chosen == nil || chosen.applied != best.applied {
			t.Fatalf("chose %s, want one that qualifies with applied %d (%s): %+v", id, best.applied, best.id, reports)
		}
	})
}
