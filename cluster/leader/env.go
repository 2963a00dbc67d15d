package leader

import (
	"context"
	"log/slog"
	"time"

	"github.com/hashicorp/raft"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/cepcluster/cep/cluster/meta"
	"github.com/cepcluster/cep/cluster/plan"
	"github.com/cepcluster/cep/shard"
	"github.com/cepcluster/cep/snapshot"
)

// Env is everything a shard's leader uses of the node it runs on: the
// node builds it (cluster.Node.leaderEnv), a test builds one of fakes.
// Nothing in the leader reaches past it.
type Env struct {
	NodeID string
	Config Config
	Log    *slog.Logger

	// Meta is this node's replica of the metadata.
	Meta Meta
	// JetStream and NATS are the node's connection of the moment;
	// NATSRedialed is closed when it is replaced (a session then ends,
	// its reads and subscriptions hanging on the old one), and
	// NATSUnreachableFor says how long NATS has not answered the node's
	// probes (0 while it does).
	JetStream          func() jetstream.JetStream
	NATS               func() *nats.Conn
	NATSRedialed       func() <-chan struct{}
	NATSUnreachableFor func(now time.Time) time.Duration
	// KeyGroups is the cluster's number of key groups.
	KeyGroups func() int

	Peers      Peers
	Quarantine Quarantine
	Metrics    Metrics
	Status     Status

	// OpenSavepoint opens this shard's part of the savepoint a restore
	// names; closeAll closes the readers.
	OpenSavepoint func(ctx context.Context, rm *meta.Restore) (readers []*snapshot.Reader, closeAll func(), err error)
	// ReadSplit returns the first state a split stored on this node for
	// shard id; ok is false when there is none.
	ReadSplit func(id uint64) (state []byte, ok bool)
	// PatternLimits are a pattern's bounds on keys and state bytes, its
	// document's or the cluster's.
	PatternLimits func(spec, format string) (maxKeys int, maxStateBytes int64)

	// ProposeRead proposes a batch of events read from stream (positions
	// first to last). Nil: the shard's ProposeAsync. Tests refuse entries
	// here, as Raft refuses one during a leadership transfer.
	ProposeRead func(sh *shard.Shard, stream string, b *shard.Batch, first, last uint64) raft.ApplyFuture
	// BeforeReconcile runs before a reconcile looks at the metadata m and
	// returns the metadata to reconcile. Nil: m as it is. Tests delay
	// reconciles here, so that changes made meanwhile come together.
	BeforeReconcile func(ctx context.Context, m *meta.Meta) (*meta.Meta, error)
}

// Config is the part of the node's configuration the leader reads (see
// cluster.Config for each).
type Config struct {
	Now               func() time.Time
	IngestBatch       int
	IngestLinger      time.Duration
	OutboxLimit       int
	TickEvery         time.Duration
	ClockEvery        time.Duration
	IdleTimeout       time.Duration
	StreamCheckEvery  time.Duration
	HandOverAfter     time.Duration
	NATSHandOverAfter time.Duration
	// NATSProbeEvery is how often the node probes its NATS connection: a
	// leader cut off from NATS looks for a replica to take over as often.
	NATSProbeEvery time.Duration
}

// Meta is a replica of the metadata: View returns a copy of it and a
// channel closed when it next changes.
type Meta interface {
	View() (*meta.Meta, <-chan struct{})
}

// Peers is what the leader asks of the other nodes.
type Peers interface {
	// RaftAddr is the Raft address of node id, if known.
	RaftAddr(id string) (string, bool)
	// Replica asks node id about its replica of shard sh.
	Replica(ctx context.Context, id string, sh uint64) (plan.Replica, error)
	// Replicas asks the nodes of sh's other replicas about theirs; a node
	// that does not answer is left out.
	Replicas(ctx context.Context, sh *shard.Shard) []plan.Replica
	// Applied asks node id how far its replica of shard sh has applied.
	Applied(ctx context.Context, id string, sh uint64) (uint64, error)
}

// Quarantine is what the leader asks of the node's quarantined replicas.
type Quarantine interface {
	// StoppedHere: the shard is quarantined on this node with no other
	// replica to rebuild it from: it reads nothing until a restore.
	StoppedHere(info meta.ShardInfo) bool
	// Demote makes a voter of sh whose node reports its replica
	// quarantined a non-voter, and reports whether it changed anything.
	Demote(ctx context.Context, sh *shard.Shard, cfg raft.Configuration) (bool, error)
}

// Refusal is why NATS did not take an output record.
type Refusal int

const (
	RefusedSubject Refusal = iota // its subject is past keygroup's bounds
	RefusedPayload                // it exceeds the server's max payload
	RefusedServer                 // NATS or JetStream refused it
)

// Metrics are the node's metrics the leader sets.
type Metrics struct {
	ApplyLatency  prometheus.Observer
	ReadPaused    *prometheus.GaugeVec // shard, stream, reason
	StreamMissing *prometheus.GaugeVec // shard, stream
	Refused       func(Refusal)
}

// Status is where the leader tells the node's status what it sees.
type Status interface {
	// SetClock records shard's clocks; nil forgets them (the session
	// ended).
	SetClock(shard uint64, st []ClockStatus)
	// SetUnread and ClearUnread: a stream the shard does not read, and why.
	SetUnread(shard uint64, stream, reason string)
	ClearUnread(shard uint64, stream string)
}

// New returns the leader loop of replica sh, which runs until ctx ends.
func New(ctx context.Context, env Env, sh *shard.Shard) *Leader {
	if env.ProposeRead == nil {
		env.ProposeRead = func(sh *shard.Shard, _ string, b *shard.Batch, _, _ uint64) raft.ApplyFuture {
			return sh.ProposeAsync(b)
		}
	}
	if env.BeforeReconcile == nil {
		env.BeforeReconcile = func(_ context.Context, m *meta.Meta) (*meta.Meta, error) { return m, nil }
	}
	return &Leader{env: env, sh: sh, ctx: ctx}
}

// Run is the loop (New, then Run): it returns once the context New was
// given ends.
func (r *Leader) Run() { r.run() }
