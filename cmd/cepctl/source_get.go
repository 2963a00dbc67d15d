package main

import (
	"context"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
)

type sourceGetOptions struct {
	globalOptions
	Name string
}

func newSourceGetCmd(d *deps, runF func(*sourceGetOptions) error) *cobra.Command {
	opts := &sourceGetOptions{}
	cmd := &cobra.Command{
		Use:   "get NAME",
		Short: "Show one source",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			g, err := resolveGlobals(d, cmd)
			if err != nil {
				return err
			}
			opts.globalOptions, opts.Name = g, args[0]
			if runF != nil {
				return runF(opts)
			}
			return runSourceGet(cmd.Context(), d, opts)
		},
	}
	return cmd
}

func runSourceGet(ctx context.Context, d *deps, opts *sourceGetOptions) error {
	c := newClients(d, opts.globalOptions)
	res, err := c.sources.GetSource(ctx, connect.NewRequest(&cepv1.GetSourceRequest{Name: opts.Name}))
	if err != nil {
		return err
	}
	return writeSource(d.stdout, opts.Output, res.Msg.GetSource())
}
