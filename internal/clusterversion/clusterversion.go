// Package clusterversion names the cluster's format versions: what each
// lets a node write (shard log entries, shard state sections, metadata
// snapshots, savepoints) and the highest this release writes.
//
// A release reads every format of the versions up to its Highest; it
// writes the formats of the cluster's active version (meta.Meta's
// ClusterVersion), which the metadata leader moves up only once every
// member reports a Highest at least as high (cluster/version.go). So a
// cluster of mixed releases writes what its oldest member reads, and a
// member of the older release can come back (a rollback) until the
// version moves.
//
// A future release that changes a format adds a Version here whose
// Formats name the new one, keeps writing the older format while the
// active version is below it, and raises Highest.
package clusterversion

import "fmt"

// Version is a cluster format version. Versions only go up.
type Version uint32

const (
	// Base is what every release before cluster versions writes and
	// reads. A member that reports no version (it gossips none: a release
	// before this package) runs Base; metadata without a ClusterVersion
	// is at Base.
	Base Version = 1
	// Logged: the metadata log holds the cluster's active version
	// (meta.SetClusterVersion). A Base release rejects that command as of
	// an unknown kind and keeps no version in its metadata (nor in the
	// snapshots it takes), so it is proposed only once no member runs
	// Base. Its other formats are Base's.
	Logged Version = 2
	// Strict: a source may be strict (meta.Source.Strict), for which the
	// shard leaders log the source's declared fields (shard op kind 13)
	// that a Logged release cannot decode; so a strict source is refused
	// until the cluster is at Strict. Its formats are Logged's.
	Strict Version = 3

	// Highest is the highest version this release reads and writes.
	Highest = Strict
)

// Formats are the format versions a cluster version writes.
type Formats struct {
	// Batch is the shard log entry's batch version (shard.BatchVersion).
	Batch byte
	// Section is the version of a shard's state sections, in its Raft
	// snapshots and savepoints (shard.SectionVersion).
	Section byte
	// MetaSnapshot is the version of the metadata snapshot: 1 is the JSON
	// of meta.Meta, whose newer fields are omitted when unset (an older
	// release reads it, ignoring what it does not know).
	MetaSnapshot int
	// Savepoint is the savepoint file's major version (snapshot.Version).
	Savepoint uint16
}

var formats = map[Version]Formats{
	Base:   {Batch: 9, Section: 5, MetaSnapshot: 1, Savepoint: 1},
	Logged: {Batch: 9, Section: 5, MetaSnapshot: 1, Savepoint: 1},
	Strict: {Batch: 9, Section: 5, MetaSnapshot: 1, Savepoint: 1},
}

// Formats returns what v writes; ok is false for a version this release
// does not know (above Highest, or 0).
func (v Version) Formats() (f Formats, ok bool) {
	f, ok = formats[v]
	return f, ok
}

// Known reports whether this release reads and writes v.
func (v Version) Known() bool { _, ok := formats[v]; return ok }

func (v Version) String() string { return fmt.Sprintf("v%d", uint32(v)) }

// Reported is the version a member runs by what it reports: Base for none
// (0, a release before cluster versions).
func Reported(highest int) Version {
	if highest <= 0 {
		return Base
	}
	return Version(highest)
}

// Active is the cluster's active version as metadata records it: Base for
// none (0, metadata from before cluster versions).
func Active(recorded uint32) Version {
	if recorded == 0 {
		return Base
	}
	return Version(recorded)
}

// Unreadable is the one-line error of a node whose release cannot read
// the cluster's active version, nil when it can.
func Unreadable(active Version) error {
	if active <= Highest {
		return nil
	}
	return fmt.Errorf("the cluster's active version is %v, and this release reads versions up to %v: run a release that reads %v (the cluster version never goes back)", active, Highest, active)
}
