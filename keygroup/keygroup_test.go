package keygroup_test

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/cepcluster/cep/keygroup"
)

// maxKeyGroups is snapshot.MaxKeyGroups, the largest K a savepoint header
// may declare.
const maxKeyGroups = 1 << 16

// The partition and key-group functions are part of the format: these
// values must never change (savepoints and partitioned streams depend on
// them).
func TestPartitionGolden(t *testing.T) {
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
		if got := keygroup.Partition(c.key, c.k); got != c.want {
			t.Errorf("Partition(%q, %d) = %d, want %d", c.key, c.k, got, c.want)
		}
	}
}

func TestKeyGroupGolden(t *testing.T) {
	for _, c := range []struct {
		key  string
		k    int
		want int
	}{
		{"", 256, 46}, // partition 197 = 6·32 + 5: block 5, 7th of its 8
		{"a", 256, 97},
		{"acc-1", 256, 101},
		{"user-42", 256, 93},
		{"acc-1", 7, 2883940012 % 7}, // Blocks(7) = 1: the partition itself
		{"acc-1", 1, 0},
		{"acc-1", 1000, (2883940012%1000%8)*125 + 2883940012%1000/8}, // Blocks(1000) = 8
	} {
		if got := keygroup.OfToken(c.key, c.k); got != c.want {
			t.Errorf("OfToken(%q, %d) = %d, want %d", c.key, c.k, got, c.want)
		}
	}
}

// OfKey hashes a key's token: a key that is its own token lands where
// OfToken puts it, any other where its encoding does.
func TestOfKeyHashesTheToken(t *testing.T) {
	if got := keygroup.OfKey("user-42", 256); got != 93 {
		t.Errorf("OfKey(%q, 256) = %d, want 93", "user-42", got)
	}
	for _, key := range []string{"", "a.b", "café", "*", "100%", "user-42"} {
		if got, want := keygroup.OfKey(key, 256), keygroup.OfToken(keygroup.KeyToken(key), 256); got != want {
			t.Errorf("OfKey(%q, 256) = %d, OfToken of its token %d", key, got, want)
		}
	}
}

// OfPartition is a bijection on [0, k), and a key group's block is
// its partition modulo Blocks.
func TestKeyGroupNumbering(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		k := rapid.IntRange(1, 4096).Draw(t, "k")
		b := keygroup.Blocks(k)
		if k%b != 0 || b < 1 || b > 32 {
			t.Fatalf("Blocks(%d) = %d", k, b)
		}
		seen := make([]bool, k)
		for p := 0; p < k; p++ {
			kg := keygroup.OfPartition(p, k)
			if kg < 0 || kg >= k || seen[kg] {
				t.Fatalf("k=%d: partition %d → key group %d (out of range or taken twice)", k, p, kg)
			}
			seen[kg] = true
			if kg/(k/b) != p%b {
				t.Fatalf("k=%d: key group %d is in block %d, its partition %d mod %d is %d", k, kg, kg/(k/b), p, b, p%b)
			}
		}
	})
}

// A cluster's layout gives each shard whole blocks while there are enough
// blocks, and the filter subjects of a range select exactly the blocks it
// owns a part of.
func TestBlockRangeAndFilters(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		k := rapid.SampledFrom([]int{1, 7, 16, 64, 256, 1000}).Draw(t, "k")
		shards := rapid.IntRange(1, min(k, 40)).Draw(t, "shards")
		b := keygroup.Blocks(k)
		next := 0
		for shard := 0; shard < shards; shard++ {
			first, last := keygroup.BlockRange(shard, shards, k)
			if first != next || last < first {
				t.Fatalf("k=%d shards=%d: shard %d has [%d, %d] after %d", k, shards, shard, first, last, next-1)
			}
			next = last + 1
			if shards <= b {
				if bf, _ := keygroup.BlockKeyGroups(keygroup.BlockOf(first, k), k); bf != first {
					t.Fatalf("k=%d shards=%d: shard %d starts at %d, inside a block", k, shards, shard, first)
				}
				if _, bl := keygroup.BlockKeyGroups(keygroup.BlockOf(last, k), k); bl != last {
					t.Fatalf("k=%d shards=%d: shard %d ends at %d, inside a block", k, shards, shard, last)
				}
			}
			fs := keygroup.BlockFilters("src", first, last, k)
			if shards == 1 {
				if fs != nil {
					t.Fatalf("the whole range has filters %v", fs)
				}
				continue
			}
			for blk := 0; blk < b; blk++ {
				subj := fmt.Sprintf("src.%d", blk)
				if got, ok := keygroup.BlockOfSubject(subj, k); !ok || got != blk {
					t.Fatalf("BlockOfSubject(%q) = %d, %v", subj, got, ok)
				}
				bf, bl := keygroup.BlockKeyGroups(blk, k)
				owns := bf <= last && bl >= first
				matched := false
				for _, f := range fs {
					if subjectMatches(f, subj) {
						matched = true
					}
				}
				if matched != owns {
					t.Fatalf("k=%d range [%d, %d]: block %d [%d, %d] matched %v by %v", k, first, last, blk, bf, bl, matched, fs)
				}
			}
		}
		if next != k {
			t.Fatalf("k=%d shards=%d: ranges end at %d", k, shards, next-1)
		}
	})
}

// subjectMatches is NATS's matching of a subject against a filter with '*'
// tokens (no '>').
func subjectMatches(filter, subject string) bool {
	f, s := strings.Split(filter, "."), strings.Split(subject, ".")
	if len(f) != len(s) {
		return false
	}
	for i := range f {
		if f[i] != "*" && f[i] != s[i] {
			return false
		}
	}
	return true
}

// Partition agrees with a naive FNV-1a from the standard library.
func TestPartitionMatchesHashFNV(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		key := rapid.String().Draw(t, "key")
		k := rapid.IntRange(1, maxKeyGroups).Draw(t, "k")
		h := fnv.New32a()
		h.Write([]byte(key))
		if got, want := keygroup.Partition(key, k), int(h.Sum32()%uint32(k)); got != want {
			t.Fatalf("Partition(%q, %d) = %d, want %d", key, k, got, want)
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
				counts[keygroup.OfToken(gen(i), k)]++
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
	keygroup.OfToken("x", 0)
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
		f, l := keygroup.Range(c.shard, c.shards, c.k)
		if f != c.first || l != c.last {
			t.Errorf("Range(%d, %d, %d) = [%d, %d], want [%d, %d]", c.shard, c.shards, c.k, f, l, c.first, c.last)
		}
	}
}

// Range splits [0,k) into contiguous ranges that agree with ShardOf and with
// a naive assignment.
func TestPropertyRange(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		k := rapid.IntRange(1, 2000).Draw(t, "k")
		shards := rapid.IntRange(1, k).Draw(t, "shards")
		next := 0
		for s := range shards {
			first, last := keygroup.Range(s, shards, k)
			if first != next || last < first {
				t.Fatalf("shard %d: [%d, %d], expected to start at %d", s, first, last, next)
			}
			if size := last - first + 1; size < k/shards || size > k/shards+1 {
				t.Fatalf("shard %d has %d key groups (k=%d, shards=%d)", s, size, k, shards)
			}
			for kg := first; kg <= last; kg++ {
				if got := keygroup.ShardOf(kg, shards, k); got != s {
					t.Fatalf("ShardOf(%d) = %d, Range says %d", kg, got, s)
				}
			}
			next = last + 1
		}
		if next != k {
			t.Fatalf("ranges end at %d, k = %d", next, k)
		}
	})
}
