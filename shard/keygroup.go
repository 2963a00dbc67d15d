package shard

import (
	"github.com/cepcluster/cep/keygroup"
	"github.com/cepcluster/cep/snapshot"
)

// KeyGroup maps a partition key to its key group: the key is encoded as a
// NATS subject token (keygroup.KeyToken) and hashed the way the source
// stream's partition() transform hashes that token (snapshot.KeyGroup), so
// the key group a shard computes for a key is the one NATS stored the event
// under. It is fixed for the life of a cluster: state and savepoints are
// sectioned by key group.
func KeyGroup(key string, groups int) int {
	return snapshot.KeyGroup(keygroup.KeyToken(key), groups)
}
