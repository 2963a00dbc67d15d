package cluster

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"connectrpc.com/connect"

	"github.com/cepcluster/cep/api"
	"github.com/cepcluster/cep/cluster/meta"
)

// Service implements the API backends on a node. Reads are served from
// this node's replicas; changes go through the metadata leader, and a node
// that does not lead forwards them to the one that does.
type Service struct {
	n      *Node
	client *http.Client
}

// clientOpts are the options of the clients that forward changes to the
// metadata leader: they present this cluster's token.
func (s *Service) clientOpts() []connect.ClientOption {
	if s.n.cfg.APIToken == "" {
		return nil
	}
	return []connect.ClientOption{api.WithClientToken(s.n.cfg.APIToken)}
}

// NewService returns the API backends of a node.
func NewService(n *Node) *Service { return &Service{n: n, client: n.peerHTTP} }

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

// leaderClient returns an HTTP base URL of the metadata leader's API, or ""
// when this node leads.
func (s *Service) leaderURL() (string, error) {
	if s.n.IsMetaLeader() {
		return "", nil
	}
	if p, ok := s.n.peer(s.n.MetaLeader()); ok && p.APIAddr != "" {
		return s.n.apiURL(p.APIAddr), nil
	}
	return "", fmt.Errorf("%w: no metadata leader yet; retry", api.ErrUnavailable)
}

// forwarded sends a change to the metadata leader when this node does not
// lead; done reports whether it was forwarded (or failed to be).
func forwarded[Req, Res any](s *Service, ctx context.Context, r *Req, method func(base string) func(context.Context, *connect.Request[Req]) (*connect.Response[Res], error)) (res *Res, done bool, err error) {
	u, err := s.leaderURL()
	if err != nil {
		return nil, true, err
	}
	if u == "" {
		return nil, false, nil
	}
	out, err := method(u)(ctx, connect.NewRequest(r))
	if err != nil {
		return nil, true, err
	}
	return out.Msg, true, nil
}
