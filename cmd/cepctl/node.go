package main

import (
	"context"
	"fmt"
	"time"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
)

func newNodeCmd(d *deps) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "node",
		Short: "List the cluster's nodes, remove nodes",
		Long: `Manage the cluster's members. A node joins by starting it with --join (see
cepnode --help); cepctl node list lists the members.`,
		Args: cobra.ArbitraryArgs,
		RunE: runGroup,
	}
	cmd.AddCommand(newNodeRemoveCmd(d, nil), newNodeListCmd(d, nil))
	return cmd
}

type nodeRemoveOptions struct {
	globalOptions
	ID    string
	Wait  time.Duration
	Fewer bool
}

func newNodeRemoveCmd(d *deps, runF func(*nodeRemoveOptions) error) *cobra.Command {
	opts := &nodeRemoveOptions{}
	cmd := &cobra.Command{
		Use:   "remove ID",
		Short: "Remove a node from the cluster (decommission it)",
		Long: `Remove a node from the cluster: its shard replicas move to the other nodes
(each new replica is caught up before the node's is removed, so no shard has
fewer replicas meanwhile), then the node leaves the cluster for good: stop
its process afterwards. A process under its id joins again only started
with an empty data directory. A node that is down can be removed too; one that
stays down longer than cepnode --dead-after has its replicas moved anyway.
When the other nodes cannot hold as many replicas of each shard (three
nodes, three replicas each), the removal is refused unless
--allow-fewer-replicas lets the shards keep fewer: add a node first.

The command returns once the removal has started, or with --wait once the
node has left (cepctl status shows it as removing until then).`,
		Example: `  cepctl node remove n3
  cepctl node remove n3 --wait 5m`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			g, err := resolveGlobals(d, cmd)
			if err != nil {
				return err
			}
			opts.globalOptions, opts.ID = g, args[0]
			if runF != nil {
				return runF(opts)
			}
			return runNodeRemove(cmd.Context(), d, opts)
		},
	}
	cmd.Flags().DurationVar(&opts.Wait, "wait", 0, "wait this long for the node to leave the cluster (0: do not wait)")
	cmd.Flags().BoolVar(&opts.Fewer, "allow-fewer-replicas", false, "remove it even though the other nodes cannot hold as many replicas of each shard (three nodes, three replicas): the shards keep fewer")
	return cmd
}

func runNodeRemove(ctx context.Context, d *deps, opts *nodeRemoveOptions) error {
	c := newClients(d, opts.globalOptions)
	res, err := c.cluster.RemoveNode(ctx, connect.NewRequest(&cepv1.RemoveNodeRequest{NodeId: opts.ID, AllowFewerReplicas: opts.Fewer}))
	if err != nil {
		return err
	}
	if opts.Wait <= 0 {
		if opts.Output != "table" {
			return writeProto(d.stdout, opts.Output, res.Msg)
		}
		_, err = fmt.Fprintf(d.stdout, "removing node %s: its %s move to other nodes (cepctl status shows the progress)\n",
			opts.ID, plural(res.Msg.GetNode().GetReplicas(), "replica"))
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, opts.Wait)
	defer cancel()
	held := res.Msg.GetNode().GetReplicas()
	for {
		st, err := c.cluster.GetStatus(ctx, connect.NewRequest(&cepv1.GetStatusRequest{}))
		if err == nil {
			gone := true
			for _, n := range st.Msg.GetNodes() {
				if n.GetId() == opts.ID {
					gone, held = false, n.GetReplicas()
				}
			}
			if gone {
				_, err = fmt.Fprintf(d.stdout, "node %s removed from the cluster; stop its process\n", opts.ID)
				return err
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("node %s still holds %s after %v; the removal goes on (cepctl status shows it)", opts.ID, plural(held, "replica"), opts.Wait)
		case <-time.After(500 * time.Millisecond):
		}
	}
}
