package snapshot_test

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"testing"

	"pgregory.net/rapid"

	"github.com/cepcluster/cep/snapshot"
)

// The key-group function is part of the format: these values must never
// change (savepoints and partitioned streams depend on them).
func TestKeyGroupGolden(t *testing.T) {
	for _, c := range []struct {
		key  string
		k    int
		want int
	}{
		{"", 256, 197}, // FNV-1a offset basis 2166136261 % 256
		{"a", 256, 44},
		{"acc-1", 256, 172},
		{"user-42", 256, 171},
		{"acc-2", 256, 101},
		{"ключ", 256, 225},
		{"order:9001", 256, 17},
		{"acc-1", 7, 2883940012 % 7},
		{"acc-1", 1, 0},
		{"acc-1", 65536, 2883940012 % 65536},
	} {
		if got := snapshot.KeyGroup(c.key, c.k); got != c.want {
			t.Errorf("KeyGroup(%q, %d) = %d, want %d", c.key, c.k, got, c.want)
		}
	}
}

// KeyGroup agrees with a naive FNV-1a from the standard library.
func TestKeyGroupMatchesHashFNV(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		key := rapid.String().Draw(t, "key")
		k := rapid.IntRange(1, snapshot.MaxKeyGroups).Draw(t, "k")
		h := fnv.New32a()
		h.Write([]byte(key))
		if got, want := snapshot.KeyGroup(key, k), int(h.Sum32()%uint32(k)); got != want {
			t.Fatalf("KeyGroup(%q, %d) = %d, want %d", key, k, got, want)
		}
	})
}

// Keys of several shapes spread over the key groups: no key group gets less
// than 70% or more than 130% of the mean. FNV-1a is not a perfect mixer:
// keys that differ only in a decimal suffix come out lumpier than random
// keys at K = 256 (about ±13%) and 1000 (about ±24%), which a shard owning
// many key groups averages out; random keys pass a chi-square test.
func TestKeyGroupDistribution(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	shapes := map[string]func(i int) string{
		"sequential": func(i int) string { return fmt.Sprintf("key-%d", i) },
		"account":    func(i int) string { return fmt.Sprintf("acc-%08d", i*7919) },
		"random":     func(int) string { return fmt.Sprintf("%x", rng.Uint64()) },
	}
	for name, gen := range shapes {
		for _, k := range []int{7, 128, 256, 1000} {
			const n = 200_000
			counts := make([]int, k)
			for i := range n {
				counts[snapshot.KeyGroup(gen(i), k)]++
			}
			mean := float64(n) / float64(k)
			chi2 := 0.0
			for kg, c := range counts {
				if float64(c) < 0.7*mean || float64(c) > 1.3*mean {
					t.Errorf("%s keys, k=%d: key group %d has %d keys, mean %.0f", name, k, kg, c, mean)
				}
				d := float64(c) - mean
				chi2 += d * d / mean
			}
			// chi-square with k-1 degrees of freedom: about k-1 ± sqrt(2(k-1)).
			df := float64(k - 1)
			t.Logf("%s keys, k=%d: chi-square %.0f (df %.0f)", name, k, chi2, df)
			if name == "random" && chi2 > df+6*math.Sqrt(2*df) {
				t.Errorf("random keys, k=%d: chi-square %.1f too large for %v degrees of freedom", k, chi2, df)
			}
		}
	}
}

func TestKeyGroupPanicsOnBadK(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("no panic for k = 0")
		}
	}()
	snapshot.KeyGroup("x", 0)
}

func TestRangeExamples(t *testing.T) {
	for _, c := range []struct{ shard, shards, k, first, last int }{
		{0, 1, 256, 0, 255},
		{0, 2, 256, 0, 127},
		{1, 2, 256, 128, 255},
		{0, 3, 256, 0, 85},
		{1, 3, 256, 86, 170},
		{2, 3, 256, 171, 255},
		{4, 5, 16, 13, 15},
	} {
		f, l := snapshot.Range(c.shard, c.shards, c.k)
		if f != c.first || l != c.last {
			t.Errorf("Range(%d, %d, %d) = [%d, %d], want [%d, %d]", c.shard, c.shards, c.k, f, l, c.first, c.last)
		}
	}
}
