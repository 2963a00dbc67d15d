package main

import (
	"strconv"
	"testing"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/cepcluster/cep/keygroup"
)

// TestDyadicFiltersCoverTheShardsBlocks checks, for every split of 32
// blocks among 1 to 32 shards, that the tree layout's prefix filters of a
// shard match exactly the subjects of the blocks at its positions, each
// once, and that the shards' filters together match every block once.
func TestDyadicFiltersCoverTheShardsBlocks(t *testing.T) {
	const blocks = 32
	subject := func(b int) string { // what the tree transform stores for block b
		s := "src"
		for m := 2; m <= blocks; m *= 2 {
			s += "." + strconv.Itoa(b%m)
		}
		return s
	}
	for shards := 1; shards <= blocks; shards++ {
		seen := make([]int, blocks)
		for s := range shards {
			fb, lb := keygroup.Range(s, shards, blocks)
			filters := dyadicFilters("src", fb, lb, blocks)
			if len(filters) > 2*5 {
				t.Errorf("%d shards, shard %d: %d filters", shards, s, len(filters))
			}
			for b := range blocks {
				n := 0
				for _, f := range filters {
					if server.SubjectMatchesFilter(subject(b), f) {
						n++
					}
				}
				p := reverseBits(b, 5)
				if in := p >= fb && p <= lb; (n == 1) != in || n > 1 {
					t.Fatalf("%d shards, shard %d [%d,%d]: block %d (position %d) matched by %d of %v", shards, s, fb, lb, b, p, n, filters)
				}
				seen[b] += n
			}
		}
		for b, n := range seen {
			if n != 1 {
				t.Fatalf("%d shards: block %d read %d times", shards, b, n)
			}
		}
	}
}
