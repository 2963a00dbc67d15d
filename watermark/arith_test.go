package watermark

import (
	"math"
	"math/big"
	"testing"

	"pgregory.net/rapid"
)

func clamp(x *big.Int) int64 {
	if x.Cmp(big.NewInt(math.MaxInt64)) > 0 {
		return MaxTime
	}
	if x.Cmp(big.NewInt(math.MinInt64)) < 0 {
		return MinTime
	}
	return x.Int64()
}

// The saturating arithmetic equals exact arithmetic clamped to int64, also
// at and around both ends.
func TestSaturatingArithmetic(t *testing.T) {
	near := rapid.OneOf(rapid.Int64Range(math.MaxInt64-3, math.MaxInt64), rapid.Int64Range(math.MinInt64, math.MinInt64+3),
		rapid.Int64Range(-3, 3), rapid.Int64())
	rapid.Check(t, func(t *rapid.T) {
		a, b := near.Draw(t, "a"), near.Draw(t, "b")
		sum := new(big.Int).Add(big.NewInt(a), big.NewInt(b))
		diff := new(big.Int).Sub(big.NewInt(a), big.NewInt(b))
		if got, want := AddSat(a, b), clamp(sum); got != want {
			t.Fatalf("AddSat(%d, %d) = %d, want %d", a, b, got, want)
		}
		if got, want := SubSat(a, b), clamp(diff); got != want {
			t.Fatalf("SubSat(%d, %d) = %d, want %d", a, b, got, want)
		}
		if s, ok := AddChecked(a, b); ok != sum.IsInt64() || ok && s != sum.Int64() {
			t.Fatalf("AddChecked(%d, %d) = %d, %v; exact %s", a, b, s, ok, sum)
		}
		want := uint64(0)
		if diff.Sign() > 0 {
			want = diff.Uint64()
		}
		if got := Since(a, b); got != want {
			t.Fatalf("Since(%d, %d) = %d, want %s", a, b, got, diff)
		}
	})
}

// Observed times at either end of int64 never move the watermark back nor
// wrap it: it is the max time − outOfOrderness − 1, clamped at MinTime.
func TestGeneratorAtTheEnds(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ooo := rapid.OneOf(rapid.Int64Range(0, 10), rapid.Int64Range(math.MaxInt64-3, math.MaxInt64)).Draw(t, "ooo")
		g := NewGenerator(ooo)
		prev, maxTs := g.Current(), int64(MinTime)
		for _, ts := range rapid.SliceOfN(rapid.OneOf(rapid.Int64Range(math.MaxInt64-3, math.MaxInt64),
			rapid.Int64Range(math.MinInt64, math.MinInt64+3), rapid.Int64()), 1, 20).Draw(t, "times") {
			maxTs = max(maxTs, ts)
			g.Observe(ts)
			want := clamp(new(big.Int).Sub(new(big.Int).Sub(big.NewInt(maxTs), big.NewInt(ooo)), big.NewInt(1)))
			if g.Current() < prev || g.Current() != max(want, prev) {
				t.Fatalf("after %d (max %d, ooo %d): watermark %d, was %d, want %d", ts, maxTs, ooo, g.Current(), prev, want)
			}
			prev = g.Current()
		}
	})
}
