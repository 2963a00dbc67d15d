package cluster

import (
	"context"
	"fmt"
	"time"

	"connectrpc.com/connect"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/api/gen/cep/v1/cepv1connect"
)

// shardsAt asks the node serving the API at apiAddr about its shard
// replicas (ListShards), waiting a second at most.
func (n *Node) shardsAt(ctx context.Context, apiAddr string) ([]*cepv1.Shard, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	s := NewService(n)
	res, err := cepv1connect.NewClusterServiceClient(s.client, n.apiURL(apiAddr), s.clientOpts()...).ListShards(ctx, connect.NewRequest(&cepv1.ListShardsRequest{}))
	if err != nil {
		return nil, err
	}
	return res.Msg.Shards, nil
}

// appliedAt asks the node serving the API at apiAddr how far its replica
// of shard id has applied the log.
func (n *Node) appliedAt(ctx context.Context, apiAddr string, id uint64) (uint64, error) {
	shards, err := n.shardsAt(ctx, apiAddr)
	if err != nil {
		return 0, err
	}
	for _, sh := range shards {
		if uint64(sh.Id) == id {
			return sh.LastAppliedIndex, nil
		}
	}
	return 0, fmt.Errorf("node at %s has no replica of shard %d", apiAddr, id)
}
