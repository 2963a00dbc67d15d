package keygroup

import "fmt"

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
		panic(fmt.Sprintf("keygroup: Partition with k = %d", k))
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

// OfKey returns the key group of a partition key (the string the source's
// key expression gives) among k groups: the key is encoded as a NATS
// subject token (KeyToken) and hashed the way the source stream's
// partition() transform hashes that token (OfToken), so the key group a
// shard computes for a key is the one NATS stored the event under. It is
// fixed for the life of a cluster: state and savepoints are sectioned by
// key group. OfKey panics if k < 1.
func OfKey(key string, k int) int {
	return OfToken(KeyToken(key), k)
}

// OfToken returns the key group of a key among k groups given the key's
// subject token, the last token of the subject it was published on: what
// the stream's partition() transform hashed. A key as the source's key
// expression gives it goes through OfKey instead, which encodes it first;
// the two agree only for keys that are their own token.
//
// The key group is a renumbering of the token's NATS partition
// p = Partition(token, k) that makes a block of consecutive key groups
// share one partition(B) value:
//
//	OfToken = (p mod B)·(k/B) + p div B,   B = Blocks(k)
//
// Since B divides k, p mod B is Partition(token, B): a stream whose subject
// transform is PartitionDestination stores an event published on
// "src.<token>" as "src.<block>", where block = OfToken div (k/B)
// (BlockOf). Source streams name blocks, not key groups or keys, because
// the server's cost of serving a consumer with several filter subjects
// grows with the number of distinct subjects stored (see DESIGN.md).
//
// Golden values (K = 256, B = 32): "" → 46, "a" → 97, "acc-1" → 101,
// "user-42" → 93. These never change; keygroup_test.go pins them.
//
// OfToken panics if k < 1.
func OfToken(token string, k int) int {
	return OfPartition(Partition(token, k), k)
}

// OfPartition maps NATS partition p of k to its key group (see OfToken), a
// bijection on [0, k).
func OfPartition(p, k int) int {
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
		panic(fmt.Sprintf("keygroup: Range(%d, %d, %d)", shard, shards, k))
	}
	return (shard*k + shards - 1) / shards, ((shard+1)*k - 1) / shards
}

// ShardOf returns the shard that owns key group kg under Range: Flink's
// computeOperatorIndexForKeyGroup, kg * shards / k. It panics unless
// 1 <= shards <= k and 0 <= kg < k.
func ShardOf(kg, shards, k int) int {
	if shards < 1 || shards > k || kg < 0 || kg >= k {
		panic(fmt.Sprintf("keygroup: ShardOf(%d, %d, %d)", kg, shards, k))
	}
	return kg * shards / k
}
