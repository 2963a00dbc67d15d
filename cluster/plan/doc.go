// Package plan holds the cluster's decisions as pure functions: what the
// metadata, the Raft configurations and the replicas' reports are in, the
// decision out. How the membership should change (the metadata group's
// voters, a shard's configuration, the shard map), where a shard's
// leadership goes (HandOverTarget, one rule for every trigger), whether a
// shard runs on its sources' clocks (ClockOf), what a shard's leader
// proposes to follow the metadata (ReconcileOf) and where a read's next
// entry follows on (NextAfter), and the way of a quarantined replica back
// to a voter (quarantine.go), on what the nodes report of their replicas.
// The loops in package cluster and
// cluster/leader gather the inputs (the metadata, the gossip, the
// configurations, probes of other nodes) and carry the decision out;
// nothing here does IO, reads the clock or keeps state, so every decision
// is property-tested on its own.
//
// Every membership planner returns at most one configuration change at a
// time: a Raft group changes its configuration one server at a time, and
// the next round sees the effect of the last before it decides again.
package plan
