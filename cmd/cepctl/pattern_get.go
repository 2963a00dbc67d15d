package main

import (
	"context"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
)

type patternGetOptions struct {
	globalOptions
	Name string
}

func newPatternGetCmd(d *deps, runF func(*patternGetOptions) error) *cobra.Command {
	opts := &patternGetOptions{}
	cmd := &cobra.Command{
		Use:   "get NAME",
		Short: "Show one pattern and its spec",
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
			return runPatternGet(cmd.Context(), d, opts)
		},
	}
	return cmd
}

func runPatternGet(ctx context.Context, d *deps, opts *patternGetOptions) error {
	c := newClients(d, opts.globalOptions)
	res, err := c.patterns.GetPattern(ctx, connect.NewRequest(&cepv1.GetPatternRequest{Name: opts.Name}))
	if err != nil {
		return err
	}
	writePending(d.stderr, res.Msg.GetPattern(), res.Msg.GetPendingShards())
	return writePattern(d.stdout, opts.Output, res.Msg.GetPattern())
}
