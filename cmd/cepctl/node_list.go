package main

import (
	"context"
	"encoding/json"
	"fmt"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
)

type nodeListOptions struct {
	globalOptions
}

func newNodeListCmd(d *deps, runF func(*nodeListOptions) error) *cobra.Command {
	opts := &nodeListOptions{}
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the cluster's nodes",
		Long: `List the cluster's members: their state (alive, suspect, dead; removing while
cepctl node remove moves their replicas away), Raft, API and gossip
addresses, the shard replicas each holds, and which leads the metadata
group.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			g, err := resolveGlobals(d, cmd)
			if err != nil {
				return err
			}
			opts.globalOptions = g
			if runF != nil {
				return runF(opts)
			}
			return runNodeList(cmd.Context(), d, opts)
		},
	}
	return cmd
}

func runNodeList(ctx context.Context, d *deps, opts *nodeListOptions) error {
	c := newClients(d, opts.globalOptions)
	res, err := c.cluster.GetStatus(ctx, connect.NewRequest(&cepv1.GetStatusRequest{}))
	if err != nil {
		return err
	}
	nodes := res.Msg.GetNodes()
	if opts.Output != "table" {
		out := struct {
			Nodes        []json.RawMessage `json:"nodes"`
			MetaLeaderID string            `json:"metaLeaderId"`
		}{Nodes: []json.RawMessage{}, MetaLeaderID: res.Msg.GetSummary().GetMetaLeaderId()}
		for _, n := range nodes {
			b, err := marshalJSON.Marshal(n)
			if err != nil {
				return err
			}
			out.Nodes = append(out.Nodes, b)
		}
		js, err := json.Marshal(out)
		if err != nil {
			return err
		}
		return writeStructured(d.stdout, opts.Output, js)
	}
	tw := newTable(d.stdout)
	row(tw, "NODE", "STATE", "META", "REPLICAS", "RAFT", "API", "GOSSIP")
	for _, n := range nodes {
		meta := "-"
		if n.GetIsMetaLeader() {
			meta = "leader"
		}
		row(tw, n.GetId(), nodeState(n), meta, n.GetReplicas(), orDash(n.GetAddress()), orDash(n.GetApiAddress()), orDash(n.GetGossipAddress()))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	leader := res.Msg.GetSummary().GetMetaLeaderId()
	if leader == "" {
		leader = "NONE (no metadata leader: the cluster cannot change)"
	}
	_, err = fmt.Fprintf(d.stdout, "%s, meta leader %s\n", plural(uint32(len(nodes)), "node"), leader)
	return err
}

// nodeState is a node's state as status prints it: "alive",
// "suspect,removing", ...
func nodeState(n *cepv1.Node) string {
	s := enumName(n.GetState(), "NODE_STATE_")
	if n.GetRemoving() {
		s += ",removing"
	}
	return s
}
