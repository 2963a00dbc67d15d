package snapshot

import (
	"fmt"
	"sort"
)

// ForEachKeyGroup restores the key-group range [first, last] from the
// readers of a savepoint (or of several Raft snapshots) taken under any shard
// layout: for each key group in the range that has a section, in ascending
// order, it calls fn with the payload from the one reader whose header range
// covers it. It fails before calling fn if the readers disagree on K or the
// cluster id, or if their ranges overlap inside [first, last] or leave part of
// it uncovered. Named sections are shard-level and left to the caller.
func ForEachKeyGroup(readers []*Reader, first, last int, fn func(kg int, payload []byte) error) error {
	if len(readers) == 0 {
		return fmt.Errorf("snapshot: no readers for key groups [%d, %d]", first, last)
	}
	k, cluster := readers[0].h.KeyGroups, readers[0].h.ClusterID
	if first < 0 || first > last || last >= k {
		return fmt.Errorf("%w: [%d, %d] not within [0, %d)", ErrOutOfRange, first, last, k)
	}
	var use []*Reader
	for _, r := range readers {
		if r.h.KeyGroups != k || r.h.ClusterID != cluster {
			return fmt.Errorf("snapshot: %q (cluster %q, K %d) does not match %q (cluster %q, K %d)",
				r.h.ID, r.h.ClusterID, r.h.KeyGroups, readers[0].h.ID, cluster, k)
		}
		if r.h.LastKeyGroup >= first && r.h.FirstKeyGroup <= last {
			use = append(use, r)
		}
	}
	sort.SliceStable(use, func(i, j int) bool { return use[i].h.FirstKeyGroup < use[j].h.FirstKeyGroup })
	next := first
	for _, r := range use {
		start := max(r.h.FirstKeyGroup, first)
		if start > next {
			return fmt.Errorf("snapshot: no reader covers key groups [%d, %d]", next, start-1)
		}
		if start < next {
			return fmt.Errorf("snapshot: %q overlaps another reader at key group %d", r.h.ID, start)
		}
		next = r.h.LastKeyGroup + 1
	}
	if next <= last {
		return fmt.Errorf("snapshot: no reader covers key groups [%d, %d]", next, last)
	}
	for _, r := range use {
		for _, si := range r.kgs {
			kg := r.sections[si].KeyGroup
			if kg < first || kg > last {
				continue
			}
			p, err := r.read(si)
			if err != nil {
				return err
			}
			if err := fn(kg, p); err != nil {
				return err
			}
		}
	}
	return nil
}
