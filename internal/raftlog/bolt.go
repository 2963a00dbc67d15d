package raftlog

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

// ErrLogLocked is wrapped by OpenLog's error when another process holds
// the file.
var ErrLogLocked = errors.New("locked by another process")

// IsLocked reports whether err is OpenLog's for a file another process
// holds (any other failure to open a log is the file's own).
func IsLocked(err error) bool { return errors.Is(err, ErrLogLocked) }

// OpenLog opens (or creates) the bolt Raft log at path. A file bolt
// panics on (a damaged meta page) fails the open.
func OpenLog(path string) (store *raftboltdb.BoltStore, err error) {
	defer func() {
		if r := recover(); r != nil {
			store, err = nil, fmt.Errorf("%s: unreadable: %v", path, r)
		}
	}()
	store, err = raftboltdb.New(raftboltdb.Options{Path: path, BoltOptions: &bbolt.Options{Timeout: LogOpenTimeout}})
	if errors.Is(err, bbolt.ErrTimeout) {
		return nil, fmt.Errorf("%s is %w (waited %v)", path, ErrLogLocked, LogOpenTimeout)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return store, nil
}
