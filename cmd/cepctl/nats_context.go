package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
)

type natsContextOptions struct {
	globalOptions
}

func newNATSContextCmd(d *deps, runF func(*natsContextOptions) error) *cobra.Command {
	opts := &natsContextOptions{}
	cmd := &cobra.Command{
		Use:   "nats-context",
		Short: "Print a nats CLI context that reads the output and dead letters",
		Long: `Print a context for the nats CLI (github.com/nats-io/natscli) that reaches
the cluster's embedded NATS server as its subscriber user: it may subscribe
to the patterns' output (cep.out.<pattern>) and the dead letters
(cep.deadletter.<source>) as they are published, and nothing else (no
publish, no source events, no JetStream API). Save it in the nats CLI's
context directory and select it with --context. An insecure cluster's
context has no user; a cluster on an external NATS server has none to
give (ask its operator).`,
		Example: `  cepctl nats-context > ~/.config/nats/context/cep.json
  nats --context cep sub 'cep.out.>'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			g, err := resolveGlobals(d, cmd)
			if err != nil {
				return err
			}
			opts.globalOptions = g
			if runF != nil {
				return runF(opts)
			}
			return runNATSContext(cmd.Context(), d, opts)
		},
	}
	return cmd
}

// natsCLIContext is the nats CLI's context file, the fields used here.
type natsCLIContext struct {
	Description string `json:"description"`
	URL         string `json:"url"`
	User        string `json:"user,omitempty"`
	Password    string `json:"password,omitempty"`
}

func runNATSContext(ctx context.Context, d *deps, opts *natsContextOptions) error {
	c := newClients(d, opts.globalOptions)
	res, err := c.cluster.GetSubscribeAccess(ctx, connect.NewRequest(&cepv1.GetSubscribeAccessRequest{}))
	if err != nil {
		return err
	}
	if len(res.Msg.GetNatsUrls()) == 0 {
		return fmt.Errorf("the cluster reports no NATS URL")
	}
	b, err := json.MarshalIndent(natsCLIContext{
		Description: "CEP cluster output, read-only: " + strings.Join(res.Msg.GetSubjects(), " "),
		URL:         strings.Join(res.Msg.GetNatsUrls(), ","),
		User:        res.Msg.GetUser(),
		Password:    res.Msg.GetPassword(),
	}, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(d.stdout, "%s\n", b)
	return err
}
