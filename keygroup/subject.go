package keygroup

import (
	"strconv"
	"strings"
)

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
