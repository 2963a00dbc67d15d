package main

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
)

type patternApplyOptions struct {
	globalOptions
	File          string
	Name          string
	OutputSubject string
	Policy        cepv1.UpdatePolicy
	FromStart     bool
	outputFlags
}

func newPatternApplyCmd(d *deps, runF func(*patternApplyOptions) error) *cobra.Command {
	opts := &patternApplyOptions{}
	var policy string
	cmd := &cobra.Command{
		Use:   "apply FILE",
		Short: "Deploy a pattern, or update it if it differs",
		Long: `Make the cluster run the pattern in FILE: deploy it when no pattern of its
name runs, update it (with --policy) when its spec or the settings given here
differ from the running version's, and leave it alone when they are the same,
so that applying the same files again changes nothing. Settings not given
keep their current values.`,
		Example: `  cepctl pattern apply patterns/login-fail.yaml
  for f in patterns/*; do cepctl pattern apply "$f" --policy migrate; done`,
		Args: cobra.ExactArgs(1),
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
			return runPatternApply(cmd.Context(), d, opts)
		},
	}
	cmd.Flags().StringVar(&opts.Name, "name", "", "pattern name (default: the document's name, or for SQL the file name)")
	cmd.Flags().StringVar(&policy, "policy", "drain", "for an update, what happens to in-flight partial matches: drain, reset or migrate")
	cmd.Flags().StringVar(&opts.OutputSubject, "output-subject", "", "NATS subject for the pattern's records (default: the cluster's choice, or the current one)")
	cmd.Flags().BoolVar(&opts.FromStart, "from-start", false, "when it deploys, read the pattern's sources from the start of their streams (see pattern deploy)")
	opts.outputFlags.add(cmd, "the server's, or the current setting")
	return cmd
}

func runPatternApply(ctx context.Context, d *deps, opts *patternApplyOptions) error {
	f, err := readSpecFile(d, opts.File, opts.Name)
	if err != nil {
		return err
	}
	c := newClients(d, opts.globalOptions)
	v, err := c.patterns.ValidatePattern(ctx, connect.NewRequest(&cepv1.ValidatePatternRequest{Spec: f.spec, Format: f.format, Name: f.name}))
	if err != nil {
		return err
	}
	if !v.Msg.GetValid() {
		return specError(opts.File, v.Msg.GetError())
	}
	cur, err := c.patterns.GetPattern(ctx, connect.NewRequest(&cepv1.GetPatternRequest{Name: v.Msg.GetName()}))
	if connect.CodeOf(err) == connect.CodeNotFound {
		res, err := c.patterns.DeployPattern(ctx, connect.NewRequest(opts.deployRequest(f, opts.OutputSubject, opts.FromStart)))
		if err != nil {
			return err
		}
		return writeDeployed(d, opts.Output, res.Msg)
	}
	if err != nil {
		return err
	}
	p := cur.Msg.GetPattern()
	if opts.sameAs(f, p) {
		writePending(d.stderr, p, cur.Msg.GetPendingShards())
		if opts.Output != "table" {
			return writeProto(d.stdout, opts.Output, p)
		}
		_, err := fmt.Fprintf(d.stdout, "pattern %s unchanged at version %d\n", p.GetName(), p.GetVersion())
		return err
	}
	res, err := c.patterns.UpdatePattern(ctx, connect.NewRequest(opts.updateRequest(f, opts.OutputSubject, opts.Policy)))
	if connect.CodeOf(err) == connect.CodeNotFound {
		return errors.New("the pattern was deleted while being applied; apply it again")
	}
	if err != nil {
		return err
	}
	return writeUpdated(d, opts.Output, opts.Policy, res.Msg)
}

// sameAs reports whether the running pattern p already is what applying f
// with these options would make it.
func (o *patternApplyOptions) sameAs(f specFile, p *cepv1.Pattern) bool {
	wantRecords := slices.Clone(o.Records)
	slices.Sort(wantRecords)
	wantRecords = slices.Compact(wantRecords)
	return f.spec == p.GetSpec() &&
		(o.OutputSubject == "" || o.OutputSubject == p.GetOutputSubject()) &&
		(o.MaxPartialMatches == nil || *o.MaxPartialMatches == p.GetMaxPartialMatches()) &&
		(len(wantRecords) == 0 || slices.Equal(wantRecords, p.GetRecords()))
}
