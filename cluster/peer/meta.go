package peer

import (
	"context"
	"time"

	"connectrpc.com/connect"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
)

// MetaProgress asks the node how far its copy of the metadata group has
// come: the group's commit index as it knows it, and the leader it hears
// from (empty: none), waiting a second at most (the node answers once it
// has probed its peers' health, half a second at most).
func (c Client) MetaProgress(ctx context.Context) (commit uint64, leader string, err error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	res, err := c.Cluster().GetStatus(ctx, connect.NewRequest(&cepv1.GetStatusRequest{}))
	if err != nil {
		return 0, "", err
	}
	s := res.Msg.GetSummary()
	return s.GetMetaCommitIndex(), s.GetMetaLeaderId(), nil
}
