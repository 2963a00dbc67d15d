package shard

import "github.com/cepcluster/cep/keygroup"

// KeyGroup maps a partition key to its key group (keygroup.OfKey).
func KeyGroup(key string, groups int) int {
	return keygroup.OfKey(key, groups)
}
