package cluster

import (
	"errors"
	"fmt"

	"github.com/cepcluster/cep/api"
	"github.com/cepcluster/cep/cluster/meta"
)

// Service implements the API backends on a node. Reads are served from
// this node's replicas; changes go through the metadata leader, and a node
// that does not lead forwards them to the one that does.
type Service struct {
	n     *Node
	tails *tailLimits
}

// NewService returns the API backends of a node.
func NewService(n *Node) *Service {
	return &Service{n: n, tails: newTailLimits(n.cfg.TailMaxStreams, n.cfg.TailMaxStreamsPerCaller)}
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
// was refused; a conflict keeps its kind's text too, which tells the
// client to retry.
func mapErr(err error) error {
	if me := (*meta.Error)(nil); errors.As(err, &me) {
		switch me.Kind {
		case meta.ErrExists:
			return fmt.Errorf("%w: %s", api.ErrAlreadyExists, me.Msg)
		case meta.ErrNotFound:
			return fmt.Errorf("%w: %s", api.ErrNotFound, me.Msg)
		case meta.ErrConflict:
			return fmt.Errorf("%w: %s", api.ErrFailedPrecondition, me.Error())
		case meta.ErrInvalid:
			return fmt.Errorf("%w: %s", api.ErrInvalidArgument, me.Msg)
		}
	}
	if errors.Is(err, errNotMetaLeader) {
		return fmt.Errorf("%w: no metadata leader yet (the cluster is electing one); retry", api.ErrUnavailable)
	}
	return err
}
