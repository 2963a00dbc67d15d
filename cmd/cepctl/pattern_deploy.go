package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
)

type patternDeployOptions struct {
	globalOptions
	File          string
	Name          string
	OutputSubject string
	FromStart     bool
	// Tests are test files run first (--test); a failing case refuses.
	Tests []string
	outputFlags
}

func newPatternDeployCmd(d *deps, runF func(*patternDeployOptions) error) *cobra.Command {
	opts := &patternDeployOptions{}
	cmd := &cobra.Command{
		Use:   "deploy FILE",
		Short: "Deploy a new pattern",
		Long: `Deploy a new pattern. Each shard starts running it at one point of its
log; the call returns once every shard does, so the pattern sees every event
published after it returned, and none published before it was deployed —
unless --from-start has it read its sources from the start of their streams.
Shards that do not run it within the server's deploy wait (10 s by default:
a shard without a leader, say) are named in a warning.`,
		Example: `  cepctl pattern deploy login-fail.yaml
  cepctl pattern deploy queries/fraud.sql --output-subject alerts.fraud`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			g, err := resolveGlobals(d, cmd)
			if err != nil {
				return err
			}
			opts.globalOptions, opts.File = g, args[0]
			if err := opts.outputFlags.parse(cmd); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return runPatternDeploy(cmd.Context(), d, opts)
		},
	}
	cmd.Flags().StringVar(&opts.Name, "name", "", "pattern name (default: the document's name, or for SQL the file name)")
	cmd.Flags().StringVar(&opts.OutputSubject, "output-subject", "", "NATS subject for the pattern's records (default: the cluster's choice)")
	cmd.Flags().BoolVar(&opts.FromStart, "from-start", false, "read the pattern's sources from the start of their streams (a backfill), not from the deployment; refused when another pattern reads one of them")
	cmd.Flags().StringArrayVar(&opts.Tests, "test", nil, "run this test file first (see cepctl pattern test) and deploy nothing if a case fails; repeatable")
	opts.outputFlags.add(cmd, "100000; every type")
	return cmd
}

func runPatternDeploy(ctx context.Context, d *deps, opts *patternDeployOptions) error {
	if err := checkTests(d, opts.Tests); err != nil {
		return err
	}
	f, err := readSpecFile(d, opts.File, opts.Name)
	if err != nil {
		return err
	}
	c := newClients(d, opts.globalOptions)
	res, err := c.patterns.DeployPattern(ctx, connect.NewRequest(opts.deployRequest(f, opts.OutputSubject, opts.FromStart)))
	if err != nil {
		return patternRPCError(opts.File, []byte(f.spec), err)
	}
	return writeDeployed(d, opts.Output, res.Msg)
}

// writeDeployed writes what a deploy answered.
func writeDeployed(d *deps, output string, res *cepv1.DeployPatternResponse) error {
	p := res.GetPattern()
	writeWarnings(d.stderr, res.GetWarnings())
	writePending(d.stderr, p, res.GetPendingShards())
	if output != "table" {
		return writeProto(d.stdout, output, p)
	}
	_, err := fmt.Fprintf(d.stdout, "deployed pattern %s version %d (sources %s, output subject %s)\n",
		p.GetName(), p.GetVersion(), joinOrDash(p.GetSources()), orDash(p.GetOutputSubject()))
	if err == nil {
		err = writeRekeyed(d.stdout, p)
	}
	return err
}

// writePending warns of the shards that did not run the deployed version
// yet when the call returned.
func writePending(w io.Writer, p *cepv1.Pattern, shards []uint32) {
	if len(shards) == 0 {
		return
	}
	fmt.Fprintf(w, "cepctl: warning: pattern %s version %d does not run yet on shard(s) %s; each starts it once it has a leader, and events of its keys logged before then are not matched by this version\n",
		p.GetName(), p.GetVersion(), joinIDs(shards))
}

// joinIDs lists shard ids as "2, 5".
func joinIDs(ids []uint32) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = fmt.Sprint(id)
	}
	return strings.Join(s, ", ")
}

// writeRekeyed says which sources a pattern reads re-keyed, and through
// which derived source.
func writeRekeyed(w io.Writer, p *cepv1.Pattern) error {
	reads := p.GetReads()
	for i, src := range p.GetSources() {
		if i < len(reads) && reads[i] != src {
			if _, err := fmt.Fprintf(w, "  %s is keyed otherwise: the pattern reads it re-keyed by its own key through %s\n", src, reads[i]); err != nil {
				return err
			}
		}
	}
	return nil
}
