// Package plan decides how the cluster's membership should change, as
// pure functions: what the metadata and the Raft configurations are in,
// the next change out; and the way of a quarantined replica back to a
// voter (quarantine.go), on what the nodes report of their replicas. The loops in package cluster gather the inputs
// (the metadata, the gossip, the configurations, probes of other nodes)
// and carry the change out; nothing here does IO, reads the clock or
// keeps state, so every decision is property-tested on its own.
//
// Every planner returns at most one configuration change at a time: a
// Raft group changes its configuration one server at a time, and the
// next round sees the effect of the last before it decides again.
package plan
