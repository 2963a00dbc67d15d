package shard

import (
	"errors"
	"fmt"
	"time"

	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"
)

// LogOpenTimeout bounds the wait for a Raft log file's lock: a file
// another process holds fails the open instead of blocking it for ever
// (the data directory's lock is the first guard; this one covers a file
// reached some other way, such as a copied or shared directory).
const LogOpenTimeout = 3 * time.Second

// OpenLog opens (or creates) the bolt Raft log at path.
func OpenLog(path string) (*raftboltdb.BoltStore, error) {
	store, err := raftboltdb.New(raftboltdb.Options{Path: path, BoltOptions: &bbolt.Options{Timeout: LogOpenTimeout}})
	if errors.Is(err, bbolt.ErrTimeout) {
		return nil, fmt.Errorf("%s is locked by another process (waited %v)", path, LogOpenTimeout)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return store, nil
}
