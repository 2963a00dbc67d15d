package cluster

import (
	"context"
	"time"

	"github.com/hashicorp/raft"

	"github.com/cepcluster/cep/cluster/leader"
	"github.com/cepcluster/cep/cluster/meta"
	"github.com/cepcluster/cep/cluster/plan"
	"github.com/cepcluster/cep/shard"
	"github.com/cepcluster/cep/snapshot"
)

// DefaultIdleTimeout is a pattern's idleTimeout when its document sets
// none (leader.DefaultIdleTimeout).
const DefaultIdleTimeout = leader.DefaultIdleTimeout

// ClockSubjectRoot prefixes the subjects shard leaders report their
// sources' event time on (leader.ClockSubjectRoot). Only the node's NATS
// user may publish there (publisherPermissions).
const ClockSubjectRoot = leader.ClockSubjectRoot

var (
	sourcesOf   = leader.SourcesOf
	forwarderOf = leader.ForwarderOf
)

// refusedCause is the node's count (cep_outbox_refused_total) of each
// leader.Refusal.
var refusedCause = [...]int{leader.RefusedSubject: refusedSubject, leader.RefusedPayload: refusedPayload, leader.RefusedServer: refusedServer}

// leaderEnv is what the leader of each of this node's shard replicas uses
// of the node.
func (n *Node) leaderEnv() leader.Env {
	env := leader.Env{
		NodeID: n.cfg.NodeID,
		Config: leader.Config{
			Now:               n.cfg.Now,
			IngestBatch:       n.cfg.IngestBatch,
			IngestLinger:      n.cfg.IngestLinger,
			OutboxLimit:       n.cfg.OutboxLimit,
			TickEvery:         n.cfg.TickEvery,
			ClockEvery:        n.cfg.ClockEvery,
			IdleTimeout:       n.cfg.IdleTimeout,
			StreamCheckEvery:  n.cfg.StreamCheckEvery,
			HandOverAfter:     n.cfg.HandOverAfter,
			NATSHandOverAfter: n.cfg.NATSHandOverAfter,
			NATSProbeEvery:    natsProbeEvery,
		},
		Log:                n.log,
		Meta:               nodeMeta{n},
		JetStream:          n.JetStream,
		NATS:               n.natsConn,
		NATSRedialed:       n.natsRedialed,
		NATSUnreachableFor: n.natsLink.unreachableFor,
		KeyGroups:          n.keyGroups,
		Peers:              leaderPeers{n},
		Quarantine:         leaderQuarantine{n},
		Metrics: leader.Metrics{
			ApplyLatency:  n.applyLatency,
			ReadPaused:    n.readPaused,
			StreamMissing: n.streamMissing,
			Refused:       func(r leader.Refusal) { n.natsLink.count(refusedCause[r]) },
		},
		Status:        leaderStatus{n},
		OpenSavepoint: n.openRestore,
		ReadSplit: func(id uint64) ([]byte, bool) {
			state, _, ok := n.readSplit(id)
			return state, ok
		},
		PatternLimits: func(spec, format string) (int, int64) {
			return patternMaxKeys(spec, format, n.cfg.MaxKeys), patternMaxStateBytes(spec, format, n.cfg.MaxStateBytes)
		},
	}
	// the test knobs, as fakes of what the leader calls
	k := n.cfg.knobs()
	if refuse := k.RefuseProposal; refuse != nil {
		env.ProposeRead = func(sh *shard.Shard, stream string, b *shard.Batch, first, last uint64) raft.ApplyFuture {
			if refuse(sh.ID(), stream, b.Ops[0].Kind(), first, last) {
				return refusedFuture{raft.ErrLeadershipTransferInProgress}
			}
			return sh.ProposeAsync(b)
		}
	}
	if d := k.ReconcileDelay; d > 0 {
		env.BeforeReconcile = func(ctx context.Context, _ *meta.Meta) (*meta.Meta, error) {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(d):
			}
			return n.Meta(), nil // with what changed meanwhile
		}
	}
	return env
}

// refusedFuture is an entry Raft refused (Testing.RefuseProposal).
type refusedFuture struct{ err error }

func (f refusedFuture) Error() error  { return f.err }
func (f refusedFuture) Index() uint64 { return 0 }
func (f refusedFuture) Response() any { return nil }

// openRestore opens this node's part of the savepoint a restore names.
func (n *Node) openRestore(ctx context.Context, rm *meta.Restore) ([]*snapshot.Reader, func(), error) {
	store, err := n.openStore(ctx, rm.Location)
	if err != nil {
		return nil, nil, err
	}
	key := n.cfg.savepointKey()
	if rm.Unsealed {
		key = nil
	}
	return openSavepoint(ctx, store, rm.Savepoint, key)
}

// nodeMeta is the node's metadata replica of the moment.
type nodeMeta struct{ n *Node }

func (m nodeMeta) View() (*meta.Meta, <-chan struct{}) { return m.n.meta.fsm.View() }

// leaderPeers asks the other nodes for a leader.
type leaderPeers struct{ n *Node }

func (p leaderPeers) RaftAddr(id string) (string, bool) {
	member, ok := p.n.peer(id)
	return member.RaftAddr, ok
}

func (p leaderPeers) Replica(ctx context.Context, id string, sh uint64) (plan.Replica, error) {
	member, ok := p.n.peer(id)
	if !ok {
		return plan.Replica{}, errUnknownPeer(id)
	}
	rep, err := p.n.peerAt(member.APIAddr).Replica(ctx, sh)
	rep.ID = id
	return rep.Plan(), err
}

func (p leaderPeers) Replicas(ctx context.Context, sh *shard.Shard) []plan.Replica {
	return p.n.replicaReports(ctx, sh)
}

func (p leaderPeers) Applied(ctx context.Context, id string, sh uint64) (uint64, error) {
	member, ok := p.n.peer(id)
	if !ok {
		return 0, errUnknownPeer(id)
	}
	return p.n.peerAt(member.APIAddr).Applied(ctx, sh)
}

type errUnknownPeer string

func (e errUnknownPeer) Error() string { return "node " + string(e) + " is not known" }

// leaderQuarantine answers for the node's quarantined replicas.
type leaderQuarantine struct{ n *Node }

func (q leaderQuarantine) StoppedHere(info meta.ShardInfo) bool {
	return q.n.quarantine.stoppedHere(info)
}

func (q leaderQuarantine) Demote(ctx context.Context, sh *shard.Shard, cfg raft.Configuration) (bool, error) {
	return q.n.quarantine.demote(ctx, sh, cfg)
}

// leaderStatus is where leaders record what the node's status shows.
type leaderStatus struct{ n *Node }

func (s leaderStatus) SetClock(shardID uint64, st []leader.ClockStatus) {
	s.n.setClockStatus(shardID, st)
}
func (s leaderStatus) SetUnread(shardID uint64, stream, reason string) {
	s.n.unread.set(shardID, stream, reason)
}
func (s leaderStatus) ClearUnread(shardID uint64, stream string) { s.n.unread.clear(shardID, stream) }
