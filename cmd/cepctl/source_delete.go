package main

import (
	"context"
	"fmt"
	"strings"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
)

type sourceDeleteOptions struct {
	globalOptions
	Name         string
	DeleteStream bool
}

func newSourceDeleteCmd(d *deps, runF func(*sourceDeleteOptions) error) *cobra.Command {
	opts := &sourceDeleteOptions{}
	cmd := &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a source no pattern reads",
		Long: `Delete a source that no pattern reads, with the derived sources that
re-keyed it for patterns deleted since. Its events stay in their stream
unless --delete-stream is given, which deletes the streams the cluster created
for them (a stream the source was created on is never deleted). A source
created again is read from where its first pattern is deployed.`,
		Example: `  cepctl source delete bank
  cepctl source delete test-events --delete-stream`,
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
			return runSourceDelete(cmd.Context(), d, opts)
		},
	}
	cmd.Flags().BoolVar(&opts.DeleteStream, "delete-stream", false, "also delete the streams the cluster created for the source and its derived sources, with their events")
	return cmd
}

func runSourceDelete(ctx context.Context, d *deps, opts *sourceDeleteOptions) error {
	c := newClients(d, opts.globalOptions)
	res, err := c.sources.DeleteSource(ctx, connect.NewRequest(&cepv1.DeleteSourceRequest{Name: opts.Name, DeleteStream: opts.DeleteStream}))
	if err != nil {
		return err
	}
	if opts.Output != "table" {
		return writeProto(d.stdout, opts.Output, res.Msg)
	}
	var names []string
	for _, s := range res.Msg.GetSources() {
		names = append(names, s.GetName())
	}
	streams := "kept"
	if opts.DeleteStream {
		streams = "deleted: " + orDash(strings.Join(res.Msg.GetDeletedStreams(), ", "))
	}
	_, err = fmt.Fprintf(d.stdout, "deleted source(s) %s (streams %s)\n", strings.Join(names, ", "), streams)
	return err
}
