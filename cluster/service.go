package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cepcluster/cep/api"
	"github.com/cepcluster/cep/cluster/meta"
	"github.com/cepcluster/cep/internal/raftlog"
)

// Service implements the API backends on a node. Reads are served from
// this node's replicas; changes go through the metadata leader, and a node
// that does not lead forwards them to the one that does.
type Service struct {
	n     *Node
	tails *tailLimits
	// compiling is taken while a reader's request compiles a document
	// (ValidatePattern, ExplainPattern of a spec): up to 256 KiB of
	// pattern can take a core for a second, and a reader may ask in a
	// loop, so such compilations take turns, one at a time on a node.
	compiling chan struct{}
}

// NewService returns the API backends of a node.
func NewService(n *Node) *Service {
	return &Service{n: n, tails: newTailLimits(n.cfg.TailMaxStreams, n.cfg.TailMaxStreamsPerCaller), compiling: make(chan struct{}, 1)}
}

// compileTurn waits for the turn to compile a reader's document, until
// ctx ends.
func (s *Service) compileTurn(ctx context.Context) (release func(), err error) {
	release = func() { <-s.compiling }
	select {
	case s.compiling <- struct{}{}: // free: taken whatever ctx says
		return release, nil
	default:
	}
	select {
	case s.compiling <- struct{}{}:
		return release, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: waiting for another document to compile on this node: %v", api.ErrUnavailable, ctx.Err())
	}
}

// Backends returns the service as api.Backends.
func (s *Service) Backends() api.Backends {
	return api.Backends{
		Patterns:   patternBackend{s},
		Sources:    sourceBackend{s},
		Cluster:    clusterBackend{s},
		Matches:    matchBackend{s},
		Savepoints: savepointBackend{s},
		Ready:      s.n.Ready,
	}
}

// mapErr turns cluster errors into the api sentinels. A refused metadata
// command is mapped by its kind and shown by its message, which names what
// was refused; a conflict (a race lost) keeps its kind's text too, which
// tells the client to retry, and a precondition (the state forbids it, a
// retry would not help) is shown by its message alone, which says what to
// do.
func mapErr(err error) error {
	if me := (*meta.Error)(nil); errors.As(err, &me) {
		switch me.Kind {
		case meta.ErrExists:
			return fmt.Errorf("%w: %s", api.ErrAlreadyExists, me.Msg)
		case meta.ErrNotFound:
			return fmt.Errorf("%w: %s", api.ErrNotFound, me.Msg)
		case meta.ErrConflict:
			return fmt.Errorf("%w: %s", api.ErrFailedPrecondition, me.Error())
		case meta.ErrPrecondition:
			return fmt.Errorf("%w: %s", api.ErrFailedPrecondition, me.Msg)
		case meta.ErrInvalid:
			return fmt.Errorf("%w: %s", api.ErrInvalidArgument, me.Msg)
		}
	}
	if errors.Is(err, errNotMetaLeader) {
		return fmt.Errorf("%w: no metadata leader yet (the cluster is electing one): the change was not applied; retry", api.ErrUnavailable)
	}
	return err
}

// readMeta returns the metadata for a read of what changes make
// (patterns, sources, savepoints), on the metadata leader (a node that
// does not lead forwards the read, as it does a change): linearizable, as
// etcd's reads are by default, so a read never misses a change already
// acknowledged to anyone, nor goes back in time from one node to the
// next. The leader confirms it still leads (a heartbeat round) and
// answers once it has applied everything it had logged when the read
// came, which holds every acknowledged change, a previous leader's too.
func (n *Node) readMeta(ctx context.Context) (*meta.Meta, error) {
	rf := n.meta.raft
	last := rf.LastIndex()
	if err := raftlog.Wait(ctx, rf.VerifyLeader()); err != nil {
		return nil, fmt.Errorf("%w: this node no longer leads the metadata group (%v); retry", api.ErrUnavailable, err)
	}
	for rf.AppliedIndex() < last {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: the metadata leader has not applied its log up to the read: %v", api.ErrUnavailable, ctx.Err())
		case <-time.After(time.Millisecond):
		}
	}
	return n.Meta(), nil
}
