package shard

import (
	"fmt"
	"sync/atomic"
)

// BatchVersion is the batch version this release writes (it reads every
// one from 3 on): what internal/clusterversion's newest formats name.
const BatchVersion = batchVersion

// SectionVersion is the version of the state sections this release
// writes (it reads every one before).
const SectionVersion = sectionVersion

// CanWrite says why this release cannot write log entries of batch
// version v, nil when it can. It writes only its own: a cluster version
// that names an older one needs the release that added it to keep an
// encoder for it (see internal/clusterversion).
func CanWrite(v byte) error {
	if v != batchVersion {
		return fmt.Errorf("shard: this release writes batch version %d, not %d", batchVersion, v)
	}
	return nil
}

// writeVersion is the batch version a Shard writes (0: BatchVersion).
type writeVersion struct{ v atomic.Uint32 }

// SetBatchVersion makes the replica write entries of batch version v from
// its next proposal on (the cluster's active version's); a version it
// cannot write is refused and changes nothing.
func (s *Shard) SetBatchVersion(v byte) error {
	if err := CanWrite(v); err != nil {
		return err
	}
	s.write.v.Store(uint32(v))
	return nil
}

// encode is b's log entry in the replica's batch version.
func (s *Shard) encode(b *Batch) []byte {
	if v := s.write.v.Load(); v != 0 && v != batchVersion {
		// SetBatchVersion stores only versions CanWrite accepts
		panic(fmt.Sprintf("shard: batch version %d set but not writable", v))
	}
	return b.Encode(nil)
}
