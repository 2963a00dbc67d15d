// Package cluster runs a node of the CEP cluster: it wires the parts
// below together and runs the loops that carry out what they decide.
//
// # Where things are decided, and where they are done
//
// Decisions are pure packages, property-tested on their own; effects are
// the loops here, each with an owner and a stop path.
//
//	decided in                   done in (this package)
//	cluster/meta  what the       metagroup.go: the metadata Raft group (log,
//	  metadata is: patterns,     snapshots, proposing); every change goes
//	  sources, shard map,        through it as a meta.Command
//	  members, savepoints
//	cluster/plan  the next       membership.go: the metadata leader's loop
//	  membership change: the     (registers members, tracks who is down,
//	  metadata group's voters,   carries out plan.MetaGroupChange and
//	  a shard's configuration,   plan.ReplicaChanges); cluster/leader
//	  the shard map (placement)  (members.go): a shard leader carries out
//	                             plan.ShardChange
//	cluster/plan  whether a      cluster/leader: the session's clock loop
//	  shard runs on its sources' (clock.go: OpClockMode, the shards it
//	  clocks and over which      waits on) and the reconcile's deployments
//	  shards (plan.ClockOf)      (reconcile.go: Deploy.Clock)
//	watermark  a source's clock  cluster/leader (clock.go): the clock loop
//	  across the shards          reports this shard's partitions, hears the
//	  (Combine, Next)            others' and logs OpClock
//	cluster/plan  where          cluster/leader (handover.go): the preferred
//	  leadership goes: one rule  replica, a leader elected far behind, one
//	  (plan.HandOverTarget) for  cut off from NATS; node.go: a closing node
//	  every trigger              (handOffLeadership), the metadata group
//	                             left to Raft
//	cluster/plan  a quarantined  quarantine.go: the quarantiner moves a
//	  replica's way back: which  damaged replica's files aside, gathers the
//	  voter is demoted, when it  nodes' reports (peer.Client.Reports) and
//	  opens empty, when it       carries out plan.DemoteQuarantined,
//	  votes again, what is       plan.Rebuild, plan.MetaRebuilt and
//	  forgotten (Stranded: it    plan.ForgetQuarantined
//	  stays stopped)
//	shard  what a shard's        replicas.go: opens and closes this node's
//	  state becomes from its     replicas as the shard map says, each with
//	  log (shard.State.Apply)    its leader loop on an Env the node builds
//	                             (leader_env.go); cluster/leader: a shard
//	                             leader reads its sources, proposes batches
//	                             and ticks, publishes the outbox, reconciles
//	                             the patterns with the metadata
//	keygroup  which key group    (every reader and writer of subjects)
//	  and shard a key is in,
//	  and the subject layout
//
// # Data flow
//
// Events arrive on JetStream source streams, stored by block of key
// groups (keygroup). The leader of each shard reads its blocks
// (cluster/leader, ingest.go) and proposes them as batches to the shard's Raft
// group; every replica applies them to its shard.State, whose matchers
// (nfa) produce records into a replicated outbox; the leader publishes the
// outbox to the output stream under deterministic ids and logs what was
// published (cluster/leader, publish.go), so a new leader re-publishes only what
// is unconfirmed and JetStream de-duplicates it.
//
// # Control flow
//
// An API call (service*.go, one file per Connect service) reads this
// node's replicas, or proposes a meta.Command through the metadata leader
// (forwarded there through cluster/peer: peer.go's forwarded). Each shard
// leader watches the metadata and logs the deployments, deletions,
// restores and splits into its shard's log (cluster/leader: reconcile.go,
// split.go), so that every replica applies them at the same point. A
// deleted pattern stays in the metadata as a tombstone until every shard
// has applied the deletion (tombstones.go). A restore checks the savepoint
// whole before it proposes it (savepoint.go). Membership comes from the
// gossip (cluster/gossip) and the metadata; the Raft groups talk over one
// port (cluster/transport: the mux, mutual TLS). Node-to-node API calls go
// through cluster/peer only (peer.Client, made by peer.go's peerAt with
// the node credential): it reads the other nodes' answers into what the
// decisions take (plan.Report, peer.ReplicaReport, peer.State).
//
// A node holds its data directory exclusively from start to Close
// (datadir_lock.go: flock on <data>/LOCK, which names the holder's pid),
// and every Raft log open waits for the file's lock a bounded time
// (raftlog.OpenLog), so that a second node on a directory in use fails at
// once, saying which process has it.
//
// The node's configuration is Config (config.go): DefaultConfig holds the
// defaults, Validate the checks cepnode's flags rely on, and Testing the
// knobs only tests set.
//
// Members prove they belong with the cluster secret (cluster/secret),
// settled at start (Config.resolveSecret: given, kept in the data
// directory, or made for a new single node) and used by the Raft mux's
// challenge-response and as the gossip's key; Insecure runs without, on
// request only, and the status says so.
package cluster
