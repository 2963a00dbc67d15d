package main

import (
	"context"
	"fmt"
	"strconv"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
)

func newShardCmd(d *deps) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "shard",
		Short: "Split shards",
		Long: `Manage the cluster's shards: the key-group ranges each processed by one Raft
group (cepctl status lists them).`,
		Args: cobra.ArbitraryArgs,
		RunE: runGroup,
	}
	cmd.AddCommand(newShardSplitCmd(d, nil))
	return cmd
}

type shardSplitOptions struct {
	globalOptions
	ID uint32
	At uint32
}

func newShardSplitCmd(d *deps, runF func(*shardSplitOptions) error) *cobra.Command {
	opts := &shardSplitOptions{}
	cmd := &cobra.Command{
		Use:   "split ID",
		Short: "Split a shard in two",
		Long: `Split a shard in two at a key-group boundary: the key groups from --at on go
to a new shard, which starts on the same nodes from the shard's state at a
point of its log; the cluster then places its replicas like any other's. A
shard is processed by one leader at a time, so splitting a busy shard lets
two nodes share its work. Events keep being processed, each once, while it
splits. The split point is a multiple of the key groups per block (8 with
the default 256 key groups) inside the shard; by default the one nearest its
middle.`,
		Example: `  cepctl shard split 1
  cepctl shard split 2 --at 160`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			g, err := resolveGlobals(d, cmd)
			if err != nil {
				return err
			}
			id, err := strconv.ParseUint(args[0], 10, 32)
			if err != nil || id == 0 {
				return fmt.Errorf("shard id %q: want a shard number (cepctl status lists them)", args[0])
			}
			opts.globalOptions, opts.ID = g, uint32(id)
			if runF != nil {
				return runF(opts)
			}
			return runShardSplit(cmd.Context(), d, opts)
		},
	}
	cmd.Flags().Uint32Var(&opts.At, "at", 0, "first key group of the new shard (default: the block boundary nearest the shard's middle)")
	return cmd
}

func runShardSplit(ctx context.Context, d *deps, opts *shardSplitOptions) error {
	c := newClients(d, opts.globalOptions)
	res, err := c.cluster.SplitShard(ctx, connect.NewRequest(&cepv1.SplitShardRequest{ShardId: opts.ID, AtKeyGroup: opts.At}))
	if err != nil {
		return err
	}
	m := res.Msg
	if opts.Output != "table" {
		return writeProto(d.stdout, opts.Output, m)
	}
	state := "split"
	if m.GetPending() {
		state = "splitting (not done yet: cepctl status shows when it is)"
	}
	_, err = fmt.Fprintf(d.stdout, "shard %d %s: it keeps key groups %d-%d, new shard %d takes %d-%d\n", m.GetShardId(), state,
		m.GetKeyGroups().GetFirst(), m.GetKeyGroups().GetLast(), m.GetNewShardId(), m.GetNewKeyGroups().GetFirst(), m.GetNewKeyGroups().GetLast())
	return err
}
