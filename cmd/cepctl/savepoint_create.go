package main

import (
	"context"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
)

type savepointCreateOptions struct {
	globalOptions
	Target string
}

func newSavepointCreateCmd(d *deps, runF func(*savepointCreateOptions) error) *cobra.Command {
	opts := &savepointCreateOptions{}
	cmd := &cobra.Command{
		Use:   "create TARGET",
		Short: "Write a savepoint",
		Long: `Write a savepoint to TARGET, dir://path (a directory on every node's file
system) or nats://bucket (a JetStream object store bucket), and wait until
every shard has written its part.

A dir:// path must lie in each node's savepoint directory (cepnode
--savepoint-dir, default <data>/savepoints); a relative one (dir://nightly)
is taken inside it. A path outside it, by "..", an absolute path elsewhere
or a symbolic link, is refused.`,
		Example: `  cepctl savepoint create dir://nightly
  cepctl savepoint create dir:///var/lib/cep/savepoints   # with --savepoint-dir /var/lib/cep/savepoints
  cepctl savepoint create nats://cep-savepoints`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			g, err := resolveGlobals(d, cmd)
			if err != nil {
				return err
			}
			opts.globalOptions, opts.Target = g, args[0]
			if runF != nil {
				return runF(opts)
			}
			return runSavepointCreate(cmd.Context(), d, opts)
		},
	}
	return cmd
}

func runSavepointCreate(ctx context.Context, d *deps, opts *savepointCreateOptions) error {
	c := newClients(d, opts.globalOptions)
	res, err := c.savepoints.CreateSavepoint(ctx, connect.NewRequest(&cepv1.CreateSavepointRequest{Target: opts.Target}))
	if err != nil {
		return err
	}
	return writeSavepoint(d.stdout, opts.Output, res.Msg.GetSavepoint())
}
