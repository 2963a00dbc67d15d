package main

import (
	"context"
	"fmt"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
)

type patternUpdateOptions struct {
	globalOptions
	File          string
	Name          string
	OutputSubject string
	Policy        cepv1.UpdatePolicy
	outputFlags
}

var updatePolicies = map[string]cepv1.UpdatePolicy{
	"drain":   cepv1.UpdatePolicy_UPDATE_POLICY_DRAIN,
	"reset":   cepv1.UpdatePolicy_UPDATE_POLICY_RESET,
	"migrate": cepv1.UpdatePolicy_UPDATE_POLICY_MIGRATE,
}

// parsePolicy reads --policy.
func parsePolicy(policy string) (cepv1.UpdatePolicy, error) {
	p, ok := updatePolicies[policy]
	if !ok {
		return 0, fmt.Errorf("unknown --policy %q: use drain, reset or migrate", policy)
	}
	return p, nil
}

func newPatternUpdateCmd(d *deps, runF func(*patternUpdateOptions) error) *cobra.Command {
	opts := &patternUpdateOptions{}
	var policy string
	cmd := &cobra.Command{
		Use:   "update FILE",
		Short: "Replace a deployed pattern's spec",
		Long: `Replace a deployed pattern's spec, incrementing its version. --policy says
what happens to its in-flight partial matches:

  drain    the old version finishes them while new ones start on the new one
  reset    they are dropped
  migrate  they are kept where their stage names still exist

As with deploy, the call returns once every shard runs the new version, or
names in a warning the shards that do not yet.`,
		Example: `  cepctl pattern update login-fail.yaml --policy migrate`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := parsePolicy(policy)
			if err != nil {
				return err
			}
			g, err := resolveGlobals(d, cmd)
			if err != nil {
				return err
			}
			opts.globalOptions, opts.File, opts.Policy = g, args[0], p
			if err := opts.outputFlags.parse(cmd); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return runPatternUpdate(cmd.Context(), d, opts)
		},
	}
	cmd.Flags().StringVar(&opts.Name, "name", "", "pattern name (default: the document's name, or for SQL the file name)")
	cmd.Flags().StringVar(&policy, "policy", "drain", "what happens to in-flight partial matches: drain, reset or migrate")
	cmd.Flags().StringVar(&opts.OutputSubject, "output-subject", "", "new NATS subject for the pattern's records (default: keep the current one)")
	opts.outputFlags.add(cmd, "keep the current setting")
	return cmd
}

func runPatternUpdate(ctx context.Context, d *deps, opts *patternUpdateOptions) error {
	f, err := readSpecFile(d, opts.File, opts.Name)
	if err != nil {
		return err
	}
	c := newClients(d, opts.globalOptions)
	res, err := c.patterns.UpdatePattern(ctx, connect.NewRequest(opts.updateRequest(f, opts.OutputSubject, opts.Policy)))
	if err != nil {
		return patternRPCError(opts.File, []byte(f.spec), err)
	}
	return writeUpdated(d, opts.Output, opts.Policy, res.Msg)
}

// writeUpdated writes what an update answered.
func writeUpdated(d *deps, output string, policy cepv1.UpdatePolicy, res *cepv1.UpdatePatternResponse) error {
	p := res.GetPattern()
	writeWarnings(d.stderr, res.GetWarnings())
	writePending(d.stderr, p, res.GetPendingShards())
	if output != "table" {
		return writeProto(d.stdout, output, p)
	}
	_, err := fmt.Fprintf(d.stdout, "updated pattern %s to version %d (policy %s, state %s)\n",
		p.GetName(), p.GetVersion(), enumName(policy, "UPDATE_POLICY_"), enumName(p.GetState(), "PATTERN_STATE_"))
	return err
}
