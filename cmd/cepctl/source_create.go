package main

import (
	"context"
	"fmt"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
)

type sourceCreateOptions struct {
	globalOptions
	Name     string
	Subjects []string
	Key      string
	Stream   string
}

func newSourceCreateCmd(d *deps, runF func(*sourceCreateOptions) error) *cobra.Command {
	opts := &sourceCreateOptions{}
	cmd := &cobra.Command{
		Use:   "create NAME",
		Short: "Register a source",
		Long: `Register a source. --key is the CEL expression over the event (e) giving
its partition key, which publishers put in the subject as NAME.<key token>
(see cepctl publish). Without --stream and --subjects the cluster creates a
JetStream stream for NAME.<key token>, stored by key-group block, and patterns
keyed like the source read it directly. With --subjects the cluster creates a
stream for those subjects; with --stream the source reads that existing
stream (only the --subjects given, if any). Such sources are not stored by
block: every pattern reads them re-keyed by its own key (one shard forwards
each event into a derived source, listed by cepctl source list).`,
		Example: `  cepctl source create logins --key e.user
  cepctl source create clicks --subjects 'web.clicks.*'
  cepctl source create eu-orders --stream ORDERS --subjects 'shop.orders.eu.>' --key e.customer.id`,
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
			return runSourceCreate(cmd.Context(), d, opts)
		},
	}
	cmd.Flags().StringSliceVar(&opts.Subjects, "subjects", nil, "subjects to read, comma-separated or repeated; NATS wildcards allowed (default: the cluster's, NAME.<key token>)")
	cmd.Flags().StringVar(&opts.Key, "key", "", "CEL expression for the partition key, e.g. e.user.id (default: the publisher's subject token)")
	cmd.Flags().StringVar(&opts.Stream, "stream", "", "existing JetStream stream to read (default: the cluster creates one)")
	return cmd
}

func runSourceCreate(ctx context.Context, d *deps, opts *sourceCreateOptions) error {
	c := newClients(d, opts.globalOptions)
	res, err := c.sources.CreateSource(ctx, connect.NewRequest(&cepv1.CreateSourceRequest{
		Name: opts.Name, Subjects: opts.Subjects, Stream: opts.Stream, Key: opts.Key,
	}))
	if err != nil {
		return err
	}
	s := res.Msg.GetSource()
	if opts.Output != "table" {
		return writeProto(d.stdout, opts.Output, s)
	}
	_, err = fmt.Fprintf(d.stdout, "created source %s (stream %s, subjects %s, key %s)\n",
		s.GetName(), orDash(s.GetStream()), joinOrDash(s.GetSubjects()), orDash(s.GetKey()))
	return err
}
