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

type patternValidateOptions struct {
	globalOptions
	File string
	Name string
}

func newPatternValidateCmd(d *deps, runF func(*patternValidateOptions) error) *cobra.Command {
	opts := &patternValidateOptions{}
	cmd := &cobra.Command{
		Use:   "validate FILE",
		Short: "Check a pattern without deploying it",
		Long: `Ask the server to parse and check a pattern. Prints
"ok: NAME (N stages, event time|processing time)"; an invalid pattern is
reported with its stage and field, or its SQL line:column, and the command
exits non-zero. A pattern over one of the limits on its cost (document
size, quantifiers, stages, emit fields, expression cost, maxKeys) is
refused with the limit's name and value: docs/limits.md lists them all.
Sources the pattern names are not checked.`,
		Example: `  cepctl pattern validate login-fail.yaml
  cepctl pattern validate --name fraud queries/fraud.sql`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			g, err := resolveGlobals(d, cmd)
			if err != nil {
				return err
			}
			opts.globalOptions, opts.File = g, args[0]
			if runF != nil {
				return runF(opts)
			}
			return runPatternValidate(cmd.Context(), d, opts)
		},
	}
	cmd.Flags().StringVar(&opts.Name, "name", "", "pattern name (default: the document's name, or for SQL the file name)")
	return cmd
}

func runPatternValidate(ctx context.Context, d *deps, opts *patternValidateOptions) error {
	f, err := readSpecFile(d, opts.File, opts.Name)
	if err != nil {
		return err
	}
	c := newClients(d, opts.globalOptions)
	res, err := c.patterns.ValidatePattern(ctx, connect.NewRequest(&cepv1.ValidatePatternRequest{
		Spec: f.spec, Format: f.format, Name: f.name,
	}))
	if err != nil {
		return err
	}
	v := res.Msg
	if opts.Output != "table" {
		if err := writeProto(d.stdout, opts.Output, v); err != nil {
			return err
		}
	}
	if !v.GetValid() {
		return specError(opts.File, v.GetError())
	}
	writeWarnings(d.stderr, v.GetWarnings())
	if opts.Output == "table" {
		timing := "processing time"
		if v.GetEventTime() {
			timing = "event time"
		}
		_, err = fmt.Fprintf(d.stdout, "ok: %s (%s, %s)\n", v.GetName(), plural(len(v.GetStages()), "stage"), timing)
	}
	return err
}

// writeWarnings writes a pattern's warnings (what is valid but likely to
// hurt once deployed) to w, a line each.
func writeWarnings(w io.Writer, warnings []string) {
	for _, m := range warnings {
		fmt.Fprintf(w, "cepctl: warning: %s\n", m)
	}
}

// specError formats a SpecError as "FILE:LINE:COL: message" (SQL) or
// "FILE: message", the message naming the stage and field.
func specError(file string, e *cepv1.SpecError) error {
	if file == "-" {
		file = "stdin"
	}
	msg := e.GetMessage()
	if msg == "" {
		var parts []string
		if e.GetStage() != "" {
			parts = append(parts, fmt.Sprintf("stage %q", e.GetStage()))
		}
		if e.GetField() != "" {
			parts = append(parts, fmt.Sprintf("field %q", e.GetField()))
		}
		parts = append(parts, "invalid")
		msg = strings.Join(parts, ": ")
	}
	if e.GetLine() > 0 {
		return fmt.Errorf("%s:%d:%d: %s", file, e.GetLine(), e.GetColumn(), msg)
	}
	return fmt.Errorf("%s: %s", file, msg)
}
