package main

import (
	"context"
	"fmt"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
)

type patternDeleteOptions struct {
	globalOptions
	Name string
}

func newPatternDeleteCmd(d *deps, runF func(*patternDeleteOptions) error) *cobra.Command {
	opts := &patternDeleteOptions{}
	cmd := &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a pattern and drop its partial matches",
		Long: `Delete a pattern. Each shard drops its partial matches at one point of its
log; the call returns once every shard has, so the pattern makes no record of
the events published after it returned (records it made before are still
published). Shards that have not within the server's deploy wait are named in
a warning.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			g, err := resolveGlobals(d, cmd)
			if err != nil {
				return err
			}
			opts.globalOptions, opts.Name = g, args[0]
			if runF != nil {
				return runF(opts)
			}
			return runPatternDelete(cmd.Context(), d, opts)
		},
	}
	return cmd
}

func runPatternDelete(ctx context.Context, d *deps, opts *patternDeleteOptions) error {
	c := newClients(d, opts.globalOptions)
	res, err := c.patterns.DeletePattern(ctx, connect.NewRequest(&cepv1.DeletePatternRequest{Name: opts.Name}))
	if err != nil {
		return err
	}
	p := res.Msg.GetPattern()
	if pending := res.Msg.GetPendingShards(); len(pending) > 0 {
		fmt.Fprintf(d.stderr, "cepctl: warning: pattern %s still runs on shard(s) %s; each stops it once it has a leader\n", p.GetName(), joinIDs(pending))
	}
	if opts.Output != "table" {
		return writeProto(d.stdout, opts.Output, p)
	}
	_, err = fmt.Fprintf(d.stdout, "deleted pattern %s (version %d)\n", p.GetName(), p.GetVersion())
	return err
}
