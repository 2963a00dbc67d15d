package main

import (
	"context"
	"fmt"
	"strings"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
)

type savepointRestoreOptions struct {
	globalOptions
	// Exactly one of ID and Location is set: an argument with "://" is a
	// location.
	ID       string
	Location string
	// Shards is the number of shards to restore into; 0 keeps the
	// savepoint's.
	Shards uint32
}

func newSavepointRestoreCmd(d *deps, runF func(*savepointRestoreOptions) error) *cobra.Command {
	opts := &savepointRestoreOptions{}
	cmd := &cobra.Command{
		Use:   "restore ID|LOCATION",
		Short: "Replace the cluster's state with a savepoint's",
		Long: `Replace the cluster's patterns, source positions and state with a
savepoint's: one the cluster recorded (by ID) or any written LOCATION
(dir://path#ID or nats://bucket#ID; without #ID the newest there).
--shards re-shards the state into that many shards; by default the
savepoint's shard count is kept.

Before anything changes, the node reads every part of the savepoint and
checks its checksums and that its patterns and sources pass the checks a
deploy makes: a damaged part fails the restore (DataLoss, naming the part
and section), metadata a deploy would refuse fails it too (InvalidArgument),
and the cluster stays as it was. A dir:// path must lie in the node's
savepoint directory (cepnode --savepoint-dir).`,
		Example: `  cepctl savepoint restore sp-0042
  cepctl savepoint restore 'dir://nightly#sp-0042' --shards 8`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			g, err := resolveGlobals(d, cmd)
			if err != nil {
				return err
			}
			opts.globalOptions = g
			if strings.Contains(args[0], "://") {
				opts.Location = args[0]
			} else {
				opts.ID = args[0]
			}
			if runF != nil {
				return runF(opts)
			}
			return runSavepointRestore(cmd.Context(), d, opts)
		},
	}
	cmd.Flags().Uint32Var(&opts.Shards, "shards", 0, "number of shards to restore into (default: the savepoint's)")
	return cmd
}

func runSavepointRestore(ctx context.Context, d *deps, opts *savepointRestoreOptions) error {
	req := &cepv1.RestoreSavepointRequest{ShardCount: opts.Shards}
	if opts.Location != "" {
		req.Savepoint = &cepv1.RestoreSavepointRequest_Location{Location: opts.Location}
	} else {
		req.Savepoint = &cepv1.RestoreSavepointRequest_Id{Id: opts.ID}
	}
	c := newClients(d, opts.globalOptions)
	res, err := c.savepoints.RestoreSavepoint(ctx, connect.NewRequest(req))
	if err != nil {
		return err
	}
	if pending := res.Msg.GetPendingShards(); len(pending) > 0 {
		fmt.Fprintf(d.stderr, "cepctl: warning: shard(s) %s have not restored their part yet; each does once it has a leader, and publishes nothing of the savepoint's until then\n", joinIDs(pending))
	}
	if opts.Output != "table" {
		return writeProto(d.stdout, opts.Output, res.Msg)
	}
	sp := res.Msg.GetSavepoint()
	_, err = fmt.Fprintf(d.stdout, "restored savepoint %s (%s) into %s at index %d\n",
		sp.GetId(), sp.GetLocation(), plural(res.Msg.GetShardCount(), "shard"), res.Msg.GetRestoredIndex())
	return err
}
