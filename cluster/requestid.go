package cluster

import (
	"context"
	"fmt"

	"github.com/cepcluster/cep/api"
	"github.com/cepcluster/cep/cluster/meta"
)

// protoRequestID is the protocol of a release that applies
// meta.Requested: a change is proposed with its request id only while no
// member is known to run an older release, which would reject the entry
// (and so differ from the others). A member the gossip has not heard of
// is taken for one of this release.
const protoRequestID = 4

// requestIDsApplied reports whether every member known applies
// meta.Requested.
func (n *Node) requestIDsApplied() bool {
	if n.gossip == nil {
		return true
	}
	var ids []string
	n.meta.fsm.Read(func(m *meta.Meta) {
		for _, nd := range m.Nodes {
			ids = append(ids, nd.ID)
		}
	})
	for _, id := range ids {
		if id == n.cfg.NodeID {
			continue
		}
		if mb, ok := n.gossip.Member(id); ok && mb.Proto < protoRequestID {
			return false
		}
	}
	return true
}

// checkRequestID refuses a request id the metadata would refuse, before
// anything is done for the request.
func checkRequestID(id string) error {
	if len(id) > meta.MaxRequestID {
		return fmt.Errorf("%w: request_id: %d bytes, at most %d", api.ErrInvalidArgument, len(id), meta.MaxRequestID)
	}
	return nil
}

// requestDone returns what request id's change returned when the
// metadata applied it, and whether it did: a retry is answered so
// without doing again what precedes the change (creating streams,
// writing a savepoint's files). The metadata leader's own view may lag
// its log; the metadata applies an id once all the same.
func (n *Node) requestDone(id string) (obj any, done bool, err error) {
	if id == "" {
		return nil, false, nil
	}
	n.meta.fsm.Read(func(m *meta.Meta) {
		if r := m.Request(id); r != nil {
			done = true
			obj, err = m.RequestResult(r)
		}
	})
	if err != nil {
		err = mapErr(err)
	}
	return obj, done, err
}

// proposeRequest proposes c with request id id (none: c as it is).
func (n *Node) proposeRequest(ctx context.Context, id string, c meta.Command) (any, error) {
	if err := checkRequestID(id); err != nil {
		return nil, err
	}
	if id == "" || !n.requestIDsApplied() {
		return n.Propose(ctx, c)
	}
	rc, err := meta.NewRequested(id, c)
	if err != nil {
		return nil, err
	}
	return n.Propose(ctx, rc)
}
