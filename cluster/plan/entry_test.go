package plan

import (
	"slices"
	"strconv"
	"testing"

	"pgregory.net/rapid"

	"github.com/cepcluster/cep/keygroup"
)

type readEvent struct {
	pos   uint64
	block int
}

func at(e readEvent) (uint64, int) { return e.pos, e.block }

// nextAfterBefore is the loop read's flush ran before it asked NextAfter.
func nextAfterBefore(after uint64, forward bool, evs []readEvent) uint64 {
	for _, e := range evs {
		if forward || e.block >= 0 {
			after = max(after, e.pos)
		}
	}
	return after
}

// The next entry follows on from where flush's own loop put it.
func TestNextAfterAsBefore(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		after := rapid.Uint64Range(0, 100).Draw(t, "after")
		forward := rapid.Bool().Draw(t, "forward")
		var evs []readEvent
		pos := after
		for i, n := 0, rapid.IntRange(0, 20).Draw(t, "events"); i < n; i++ {
			pos += rapid.Uint64Range(1, 5).Draw(t, "gap")
			evs = append(evs, readEvent{pos, rapid.IntRange(-1, 15).Draw(t, "block")})
		}
		got, want := NextAfter(after, forward, evs, at), nextAfterBefore(after, forward, evs)
		if got != want {
			t.Fatalf("NextAfter = %d, before %d: after %d forward %v %v", got, want, after, forward, evs)
		}
		// it never goes back, and passes every event of a block
		if got < after {
			t.Fatalf("went back from %d to %d", after, got)
		}
		for _, e := range evs {
			if (forward || e.block >= 0) && e.pos > got {
				t.Fatalf("event at %d (block %d) not passed: %d", e.pos, e.block, got)
			}
		}
	})
}

// A shard reads the blocks whose subjects keygroup.BlockFilters gives it
// (every block for the whole range).
func TestReadsBlockIsBlockFilters(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		k := rapid.SampledFrom([]int{16, 64, 256}).Draw(t, "k")
		first := rapid.IntRange(0, k-1).Draw(t, "first")
		last := rapid.IntRange(first, k-1).Draw(t, "last")
		filters := keygroup.BlockFilters("src", first, last, k)
		for b := range keygroup.Blocks(k) {
			want := filters == nil || slices.Contains(filters, "src."+strconv.Itoa(b))
			if got := ReadsBlock(b, first, last, k); got != want {
				t.Fatalf("k %d [%d, %d] block %d: ReadsBlock %v, filters %v", k, first, last, b, got, filters)
			}
		}
	})
}
