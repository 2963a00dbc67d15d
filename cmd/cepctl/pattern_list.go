package main

import (
	"context"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
)

type patternListOptions struct {
	globalOptions
}

func newPatternListCmd(d *deps, runF func(*patternListOptions) error) *cobra.Command {
	opts := &patternListOptions{}
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the deployed patterns",
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
			return runPatternList(cmd.Context(), d, opts)
		},
	}
	return cmd
}

func runPatternList(ctx context.Context, d *deps, opts *patternListOptions) error {
	c := newClients(d, opts.globalOptions)
	res, err := c.patterns.ListPatterns(ctx, connect.NewRequest(&cepv1.ListPatternsRequest{}))
	if err != nil {
		return err
	}
	if opts.Output != "table" {
		return writeProto(d.stdout, opts.Output, res.Msg)
	}
	tw := newTable(d.stdout)
	row(tw, "NAME", "VERSION", "STATE", "FORMAT", "SOURCES", "OUTPUT SUBJECT", "UPDATED INDEX")
	for _, p := range res.Msg.GetPatterns() {
		row(tw, p.GetName(), p.GetVersion(), enumName(p.GetState(), "PATTERN_STATE_"), enumName(p.GetFormat(), "SPEC_FORMAT_"),
			joinOrDash(p.GetSources()), orDash(p.GetOutputSubject()), p.GetUpdatedIndex())
	}
	return tw.Flush()
}
