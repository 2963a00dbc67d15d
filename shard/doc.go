// Package shard is one shard of the cluster: a contiguous range of key
// groups, its replicated state machine and its Raft group.
//
// State is the state machine. It applies Batches — the payload of one Raft
// log entry: events read from a source with their stream positions,
// watermarks, processing-time ticks, pattern deployments and deletions,
// and acknowledgements of published output — to one nfa.Matcher per
// deployed pattern (plus the old versions still draining after an update).
// Every key group remembers the last source position it applied, so an
// event read twice (after a failover, or replayed) is skipped. Records the
// matchers produce go to an outbox with deterministic ids (RecordID); the
// leader publishes them with the id as the JetStream message id and logs an
// acknowledgement that truncates the outbox. Apply is deterministic: it
// reads no clock and iterates in sorted order. The one goroutine it
// starts decodes half of a large batch's events (decodeAll), a pure
// function of their bytes that it waits for before applying any, so
// timing cannot change what it does.
//
//	s := shard.NewState(first, last, groups)
//	s.Apply(batch)            // what every replica does with each log entry
//	s.Outbox()                // records waiting to be published
//	s.WriteSnapshot(w, hdr)   // the snapshot package's format, by key group
//	st, err := shard.RestoreState(readers, first, last) // any layout
//
// FSM adapts State to hashicorp/raft (Apply, Snapshot and Restore are
// called from raft's FSM goroutine; View gives other goroutines a read-locked
// look), and Shard runs one replica: raft-boltdb for the log and stable store,
// file snapshots, and Propose/ProposeAsync for the leader. The leader loops
// that feed a shard (reading sources, publishing, ticking) live in package
// cluster. See DESIGN.md for why it is built this way.
package shard
