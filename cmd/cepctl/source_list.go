package main

import (
	"context"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
)

type sourceListOptions struct {
	globalOptions
}

func newSourceListCmd(d *deps, runF func(*sourceListOptions) error) *cobra.Command {
	opts := &sourceListOptions{}
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the sources",
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
			return runSourceList(cmd.Context(), d, opts)
		},
	}
	return cmd
}

func runSourceList(ctx context.Context, d *deps, opts *sourceListOptions) error {
	c := newClients(d, opts.globalOptions)
	res, err := c.sources.ListSources(ctx, connect.NewRequest(&cepv1.ListSourcesRequest{}))
	if err != nil {
		return err
	}
	if opts.Output != "table" {
		return writeProto(d.stdout, opts.Output, res.Msg)
	}
	tw := newTable(d.stdout)
	row(tw, "NAME", "STREAM", "SUBJECTS", "KEY", "RE-KEYS", "MANAGED", "KEY GROUPS")
	for _, s := range res.Msg.GetSources() {
		row(tw, s.GetName(), orDash(s.GetStream()), joinOrDash(s.GetSubjects()), orDash(s.GetKey()), orDash(s.GetOrigin()), s.GetManaged(), s.GetKeyGroups())
	}
	return tw.Flush()
}
