// Package raftlog holds what the shards' and the metadata group's Raft
// logs share: opening a bolt log (bounded, refusing a file another process
// holds), checking it entry by entry and its snapshots before raft reads
// them, starting raft without its panics, and waiting on a raft future
// without outliving a shutdown. A damaged file is a *CorruptError, so that
// the replica is quarantined rather than the node stopped.
package raftlog
