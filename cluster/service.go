package cluster

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"connectrpc.com/connect"

	"github.com/cepcluster/cep/api"
	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/cluster/meta"
)

// Service implements the API backends on a node. Reads are served from
// this node's replicas; changes go through the metadata leader, and a node
// that does not lead forwards them to the one that does.
type Service struct {
	n *Node
	// client is n.peerHTTP, for the callers that build their own clients
	// (shardsAt) until they use the peer client
	client *http.Client
}

// NewService returns the API backends of a node.
func NewService(n *Node) *Service { return &Service{n: n, client: n.peerHTTP} }

// clientOpts are the peer client's options (its credential), for the
// callers that build their own clients (shardsAt) until they use it.
func (s *Service) clientOpts() []connect.ClientOption { return s.n.peerAt("").opts }

// probe is peerClient.Probe, for the callers not yet moved to it.
func (s *Service) probe(ctx context.Context, addr string) cepv1.NodeState {
	return s.n.peerAt(addr).Probe(ctx)
}

// Backends returns the service as api.Backends.
func (s *Service) Backends() api.Backends {
	return api.Backends{
		Patterns:   patternBackend{s},
		Sources:    sourceBackend{s},
		Cluster:    clusterBackend{s},
		Matches:    matchBackend{s},
		Savepoints: savepointBackend{s},
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
