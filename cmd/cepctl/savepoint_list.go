package main

import (
	"context"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
)

type savepointListOptions struct {
	globalOptions
}

func newSavepointListCmd(d *deps, runF func(*savepointListOptions) error) *cobra.Command {
	opts := &savepointListOptions{}
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the recorded savepoints, newest first",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			g, err := resolveGlobals(d, cmd)
			if err != nil {
				return err
			}
			opts.globalOptions = g
			if runF != nil {
				return runF(opts)
			}
			return runSavepointList(cmd.Context(), d, opts)
		},
	}
	return cmd
}

func runSavepointList(ctx context.Context, d *deps, opts *savepointListOptions) error {
	c := newClients(d, opts.globalOptions)
	res, err := c.savepoints.ListSavepoints(ctx, connect.NewRequest(&cepv1.ListSavepointsRequest{}))
	if err != nil {
		return err
	}
	if opts.Output != "table" {
		return writeProto(d.stdout, opts.Output, res.Msg)
	}
	tw := newTable(d.stdout)
	row(tw, "ID", "LOCATION", "CREATED", "INDEX", "SHARDS", "KEY GROUPS", "PATTERNS")
	for _, s := range res.Msg.GetSavepoints() {
		row(tw, s.GetId(), s.GetLocation(), formatTime(s.GetCreatedTime()), s.GetCreatedIndex(), s.GetShardCount(), s.GetKeyGroups(), patternVersions(s.GetPatternVersions()))
	}
	return tw.Flush()
}
