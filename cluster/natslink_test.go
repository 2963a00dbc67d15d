package cluster

import (
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
