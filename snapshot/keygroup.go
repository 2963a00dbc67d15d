package snapshot

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// FNV-1a, 32 bit (the same constants as hash/fnv's New32a).
const (
	fnvOffset32 = 2166136261
	fnvPrime32  = 16777619
)

// Partition returns the NATS partition number of key among k: the FNV-1a
// 32-bit hash of the key's bytes, modulo k, as an unsigned 32-bit value.
//
// This is exactly what a NATS subject transform computes for the destination
// token {{partition(k,1)}} when the key is the subject token selected by
// wildcard 1 (nats-server's subjectTransform.getHashPartition): the bytes
// hashed are the token's bytes as published, with nothing added. For this
// to hold, key must be the subject token itself: a key that needs encoding
// to be a token (it holds '.', '*', '>' or white space) must be passed here
// encoded.
//
// Golden values (K = 256): "" → 197, "a" → 44, "acc-1" → 172, "user-42" →
// 171. These never change; keygroup_test.go pins them.
//
// Partition panics if k < 1.
func Partition(key string, k int) int {
	if k < 1 {
		panic(fmt.Sprintf("snapshot: Partition with k = %d", k))
	}
	h := uint32(fnvOffset32)
	for i := 0; i < len(key); i++ {
		h ^= uint32(key[i])
		h *= fnvPrime32
	}
	return int(h % uint32(k))
}

// MaxBlocks bounds the blocks of key groups a source stream's subjects name.
const MaxBlocks = 32

// Blocks returns B, how many blocks of k/B consecutive key groups the
// source subjects distinguish: the greatest common divisor of k and 32.
func Blocks(k int) int {
	a, b := k, MaxBlocks
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// KeyGroup returns the key group of key among k groups. It is a
// renumbering of the key's NATS partition p = Partition(key, k) that makes
// a block of consecutive key groups share one partition(B) value:
//
//	KeyGroup = (p mod B)·(k/B) + p div B,   B = Blocks(k)
//
// Since B divides k, p mod B is Partition(key, B): a stream whose subject
// transform is PartitionDestination stores an event published on
// "src.<key>" as "src.<block>", where block = KeyGroup div (k/B)
// (BlockOf). Source streams name blocks, not key groups or keys, because
// the server's cost of serving a consumer with several filter subjects
// grows with the number of distinct subjects stored (see DESIGN.md).
//
// Golden values (K = 256, B = 32): "" → 46, "a" → 97, "acc-1" → 101,
// "user-42" → 93. These never change; keygroup_test.go pins them.
//
// KeyGroup panics if k < 1.
func KeyGroup(key string, k int) int {
	return KeyGroupOfPartition(Partition(key, k), k)
}

// KeyGroupOfPartition maps NATS partition p of k to its key group (see
// KeyGroup), a bijection on [0, k).
func KeyGroupOfPartition(p, k int) int {
	b := Blocks(k)
	return (p%b)*(k/b) + p/b
}

// BlockOf returns the block of key group kg of k.
func BlockOf(kg, k int) int { return kg / (k / Blocks(k)) }

// BlockKeyGroups returns the key groups [first, last] of block b of k.
func BlockKeyGroups(b, k int) (first, last int) {
	per := k / Blocks(k)
	return b * per, (b+1)*per - 1
}

// PartitionDestination is the destination of the subject transform of a
// source stream with subjects "<prefix>.*": "<prefix>.<block>".
func PartitionDestination(prefix string, k int) string {
	return prefix + ".{{partition(" + strconv.Itoa(Blocks(k)) + ",1)}}"
}

// BlockOfSubject returns the block of a subject stored under
// PartitionDestination: the number after the last '.'.
func BlockOfSubject(subject string, k int) (int, bool) {
	i := strings.LastIndexByte(subject, '.')
	if i < 0 {
		return 0, false
	}
	b, err := strconv.Atoi(subject[i+1:])
	if err != nil || b < 0 || b >= Blocks(k) {
		return 0, false
	}
	return b, true
}

// BlockFilters lists the stored subjects a shard owning the key groups
// [first, last] reads: one per block it owns a part of, none at all (the
// whole stream) when the range is every key group. Under BlockRange a
// shard owns whole blocks; a range that splits a block (more shards than
// blocks) shares that block's subject with its neighbour, and each skips
// the other's events.
func BlockFilters(prefix string, first, last, k int) []string {
	if first == 0 && last == k-1 {
		return nil
	}
	var out []string
	for b := BlockOf(first, k); b <= BlockOf(last, k); b++ {
		out = append(out, prefix+"."+strconv.Itoa(b))
	}
	return out
}

// BlockRange is the key-group range of shard (0-based) of shards when a
// cluster lays out k key groups: whole blocks, split the way Range splits
// key groups, while there are at least as many blocks as shards; Range
// itself beyond that.
func BlockRange(shard, shards, k int) (first, last int) {
	b := Blocks(k)
	if shards > b {
		return Range(shard, shards, k)
	}
	fb, lb := Range(shard, shards, b)
	first, _ = BlockKeyGroups(fb, k)
	_, last = BlockKeyGroups(lb, k)
	return first, last
}

// Range returns the key groups [first, last] that shard (0-based) owns when
// k key groups are split into shards contiguous ranges. It is Flink's
// KeyGroupRangeAssignment.computeKeyGroupRangeForOperatorIndex:
//
//	first = ceil(shard * k / shards)      = (shard*k + shards - 1) / shards
//	last  = ceil((shard+1) * k / shards) - 1 = ((shard+1)*k - 1) / shards
//
// Ranges are consecutive, cover [0, k) without overlap, and differ in size by
// at most one. Range panics unless 1 <= shards <= k and 0 <= shard < shards.
func Range(shard, shards, k int) (first, last int) {
	if shards < 1 || shards > k || shard < 0 || shard >= shards {
		panic(fmt.Sprintf("snapshot: Range(%d, %d, %d)", shard, shards, k))
	}
	return (shard*k + shards - 1) / shards, ((shard+1)*k - 1) / shards
}

// ShardOf returns the shard that owns key group kg under Range: Flink's
// computeOperatorIndexForKeyGroup, kg * shards / k. It panics unless
// 1 <= shards <= k and 0 <= kg < k.
func ShardOf(kg, shards, k int) int {
	if shards < 1 || shards > k || kg < 0 || kg >= k {
		panic(fmt.Sprintf("snapshot: ShardOf(%d, %d, %d)", kg, shards, k))
	}
	return kg * shards / k
}

// ForEachKeyGroup restores the key-group range [first, last] from the
// readers of a savepoint (or of several Raft snapshots) taken under any shard
// layout: for each key group in the range that has a section, in ascending
// order, it calls fn with the payload from the one reader whose header range
// covers it. It fails before calling fn if the readers disagree on K or the
// cluster id, or if their ranges overlap inside [first, last] or leave part of
// it uncovered. Named sections are shard-level and left to the caller.
func ForEachKeyGroup(readers []*Reader, first, last int, fn func(kg int, payload []byte) error) error {
	if len(readers) == 0 {
		return fmt.Errorf("snapshot: no readers for key groups [%d, %d]", first, last)
	}
	k, cluster := readers[0].h.KeyGroups, readers[0].h.ClusterID
	if first < 0 || first > last || last >= k {
		return fmt.Errorf("%w: [%d, %d] not within [0, %d)", ErrOutOfRange, first, last, k)
	}
	var use []*Reader
	for _, r := range readers {
		if r.h.KeyGroups != k || r.h.ClusterID != cluster {
			return fmt.Errorf("snapshot: %q (cluster %q, K %d) does not match %q (cluster %q, K %d)",
				r.h.ID, r.h.ClusterID, r.h.KeyGroups, readers[0].h.ID, cluster, k)
		}
		if r.h.LastKeyGroup >= first && r.h.FirstKeyGroup <= last {
			use = append(use, r)
		}
	}
	sort.SliceStable(use, func(i, j int) bool { return use[i].h.FirstKeyGroup < use[j].h.FirstKeyGroup })
	next := first
	for _, r := range use {
		start := max(r.h.FirstKeyGroup, first)
		if start > next {
			return fmt.Errorf("snapshot: no reader covers key groups [%d, %d]", next, start-1)
		}
		if start < next {
			return fmt.Errorf("snapshot: %q overlaps another reader at key group %d", r.h.ID, start)
		}
		next = r.h.LastKeyGroup + 1
	}
	if next <= last {
		return fmt.Errorf("snapshot: no reader covers key groups [%d, %d]", next, last)
	}
	for _, r := range use {
		for _, si := range r.kgs {
			kg := r.sections[si].KeyGroup
			if kg < first || kg > last {
				continue
			}
			p, err := r.read(r.sections[si])
			if err != nil {
				return err
			}
			if err := fn(kg, p); err != nil {
				return err
			}
		}
	}
	return nil
}
