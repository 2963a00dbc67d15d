package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/internal/schema"
	"github.com/cepcluster/cep/nfa"
	"github.com/cepcluster/cep/nfa/expr"
)

// readSchemaFile reads a schema in either form package schema reads.
func readSchemaFile(d *deps, path string) (schema.Schema, error) {
	b, err := readFileOrStdin(d, path)
	if err != nil {
		return nil, fmt.Errorf("read schema: %w", err)
	}
	s, err := schema.Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	return s, nil
}

func readFileOrStdin(d *deps, path string) ([]byte, error) {
	if path == "-" {
		return io.ReadAll(d.stdin)
	}
	return os.ReadFile(path)
}

// readSampleEvents reads JSON events, one a line (blank lines skipped),
// as the engine decodes them; a line that is not an object is an error
// naming the line.
func readSampleEvents(d *deps, path string) ([]map[string]any, error) {
	b, err := readFileOrStdin(d, path)
	if err != nil {
		return nil, fmt.Errorf("read events: %w", err)
	}
	var out []map[string]any
	for i, line := range strings.Split(string(b), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		e, err := expr.DecodeEvent([]byte(line))
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %v", path, i+1, err)
		}
		out = append(out, e)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no events", path)
	}
	return out, nil
}

func toSchemaFields(s schema.Schema) []*cepv1.SourceField {
	var out []*cepv1.SourceField
	for _, f := range s {
		out = append(out, &cepv1.SourceField{Path: f.Path, Type: f.Type, Optional: f.Optional})
	}
	return out
}

func fromSchemaFields(fs []*cepv1.SourceField) schema.Schema {
	var out schema.Schema
	for _, f := range fs {
		out = append(out, schema.Field{Path: f.GetPath(), Type: f.GetType(), Optional: f.GetOptional()})
	}
	return out
}

// checkAgainstSchema checks the fields a pattern file reads against s,
// declared for every source the pattern names.
func checkAgainstSchema(f specFile, s schema.Schema) error {
	p, _, err := compileSpecFile(f, false)
	if err != nil {
		return err
	}
	decl := map[string]nfa.SourceFields{}
	for _, n := range p.Sources() {
		decl[n] = s
	}
	return nfa.CheckSourceFields(p, f.spec, decl)
}

type sourceInferOptions struct {
	globalOptions
	Name     string
	FromFile string
	Limit    uint32
}

func newSourceInferSchemaCmd(d *deps, runF func(*sourceInferOptions) error) *cobra.Command {
	opts := &sourceInferOptions{}
	cmd := &cobra.Command{
		Use:   "infer-schema [NAME]",
		Short: "Write the fields a source's events have, as a schema",
		Long: `Read a sample of events and write the fields they have as a schema that
cepctl source create --schema reads: a field: type line per field, nested
objects indented, a type ending in ? for a field some events lack, any
where they disagree. The sample is the last --limit events the source's
stream stores (role operator), or with --from-file a file of JSON events,
one a line ("-": stdin). Review it before use: a sample may lack a field
rare events have.`,
		Example: `  cepctl source infer-schema bank > bank.schema.yaml
  cepctl source infer-schema --from-file examples/events.jsonl`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			g, err := resolveGlobals(d, cmd)
			if err != nil {
				return err
			}
			opts.globalOptions = g
			if len(args) == 1 {
				opts.Name = args[0]
			}
			if (opts.Name == "") == (opts.FromFile == "") {
				return fmt.Errorf("give a source NAME or --from-file FILE, not both")
			}
			if runF != nil {
				return runF(opts)
			}
			return runSourceInferSchema(cmd.Context(), d, opts)
		},
	}
	cmd.Flags().StringVar(&opts.FromFile, "from-file", "", "read the events from this file of JSON lines instead (-: stdin)")
	cmd.Flags().Uint32Var(&opts.Limit, "limit", 100, "events to sample from the source's stream (at most 1000)")
	return cmd
}

func runSourceInferSchema(ctx context.Context, d *deps, opts *sourceInferOptions) error {
	var events []map[string]any
	if opts.FromFile != "" {
		var err error
		if events, err = readSampleEvents(d, opts.FromFile); err != nil {
			return err
		}
	} else {
		c := newClients(d, opts.globalOptions)
		res, err := c.sources.SampleSource(ctx, connect.NewRequest(&cepv1.SampleSourceRequest{Name: opts.Name, Limit: opts.Limit}))
		if err != nil {
			return err
		}
		for i, b := range res.Msg.GetEvents() {
			e, err := expr.DecodeEvent(b)
			if err != nil {
				fmt.Fprintf(d.stderr, "cepctl: warning: event %d of the sample skipped: %v\n", i+1, err)
				continue
			}
			events = append(events, e)
		}
		if len(events) == 0 {
			return fmt.Errorf("source %s: its stream holds no event to infer fields from", opts.Name)
		}
	}
	_, err := io.WriteString(d.stdout, schema.Infer(events).Format())
	return err
}
