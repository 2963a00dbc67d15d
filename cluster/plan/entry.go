package plan

import "github.com/cepcluster/cep/keygroup"

// The entries a shard's reader proposes. A reader reads a stream's
// subjects of the shard's blocks (ReadsBlock; the server filters them) and
// proposes what it has read as entries of up to a batch of events, each
// following on from where the previous one took the shard's positions
// (shard.Op.After): the state refuses an entry that follows on from a
// position it never reached, so an entry refused by Raft is never built
// upon. The next entry follows on from NextAfter.

// ReadsBlock reports whether a shard owning key groups [first, last] of k
// reads the stream's subjects of block b: the blocks it owns a part of
// (keygroup.BlockFilters' subjects).
func ReadsBlock(b, first, last, k int) bool {
	bf, bl := keygroup.BlockKeyGroups(b, k)
	return bf <= last && bl >= first
}

// NextAfter is where the entry after one holding evs follows on, that one
// following on from after: the state moves its positions past the events
// of its blocks, and not for an event whose subject is not partitioned as
// expected (block -1: counted as misrouted), or past every event for a
// forward (the origin's position). at gives an event's position and block.
func NextAfter[E any](after uint64, forward bool, evs []E, at func(E) (pos uint64, block int)) uint64 {
	for _, e := range evs {
		if pos, block := at(e); forward || block >= 0 {
			after = max(after, pos)
		}
	}
	return after
}
