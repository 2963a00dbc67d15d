package shard

import "hash/fnv"

// KeyGroup maps a partition key to one of groups key groups: FNV-1a 32-bit
// of the key's bytes, modulo groups. It is fixed for the life of a cluster:
// state and savepoints are sectioned by key group.
func KeyGroup(key string, groups int) int {
	h := fnv.New32a()
	h.Write([]byte(key))
	return int(h.Sum32() % uint32(groups))
}
