package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	"github.com/cepcluster/cep/api"
	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/internal/schema"
	"github.com/cepcluster/cep/nfa"
	"github.com/cepcluster/cep/nfa/sql"
)

type patternValidateOptions struct {
	globalOptions
	File string
	Name string
	// Tests are test files run first (--test); a failing case refuses.
	Tests []string
	// online: a server was given (serverGiven), so the server checks it
	online bool
	// Schema and Sample check the fields the pattern reads against a
	// declared schema or the fields sample events have
	Schema string
	Sample string
}

func newPatternValidateCmd(d *deps, runF func(*patternValidateOptions) error) *cobra.Command {
	opts := &patternValidateOptions{}
	cmd := &cobra.Command{
		Use:   "validate FILE",
		Short: "Check a pattern without deploying it",
		Long: `Parse and check a pattern, offline with this cepctl's engine, or by the
server when one is given (--server, CEPCTL_SERVER or the config file's
server:), which checks it with the engine a deploy would use. Prints
"ok: NAME (N stages, event time|processing time)"; an invalid pattern is
reported with its stage and field, or its SQL line:column, and the command
exits non-zero. A pattern over one of the limits on its cost (document
size, quantifiers, stages, emit fields, expression cost, maxKeys) is
refused with the limit's name and value: docs/limits.md lists them all.
Every reference to a stage (events("x"), a skip target, a query's pattern
variables) must name one. Warnings (what is valid but likely to hurt once
deployed) go to stderr. The server checks the fields the pattern reads
(e.amount, a query's columns) against those its sources declare (cepctl
source create --schema); --schema FILE checks them against that schema,
--sample FILE against the fields the JSON events of FILE (one a line)
have, for a source that declares none: a misspelt field is named with
the closest one.`,
		Example: `  cepctl pattern validate login-fail.yaml
  cepctl pattern validate --name fraud queries/fraud.sql
  cepctl pattern validate --sample examples/events.jsonl examples/login-fail-logout.yaml`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			g, err := resolveGlobals(d, cmd)
			if err != nil {
				return err
			}
			opts.globalOptions, opts.File = g, args[0]
			opts.online = serverGiven(d, cmd, g)
			if runF != nil {
				return runF(opts)
			}
			return runPatternValidate(cmd.Context(), d, opts)
		},
	}
	cmd.Flags().StringVar(&opts.Schema, "schema", "", "check the fields the pattern reads against this schema file (see cepctl source create --schema)")
	cmd.Flags().StringVar(&opts.Sample, "sample", "", "check the fields the pattern reads against those of these JSON events, one a line")
	cmd.MarkFlagsMutuallyExclusive("schema", "sample")
	cmd.Flags().StringVar(&opts.Name, "name", "", "pattern name (default: the document's name, or for SQL the file name)")
	cmd.Flags().StringArrayVar(&opts.Tests, "test", nil, "run this test file first (see cepctl pattern test) and fail if a case fails; repeatable")
	return cmd
}

func runPatternValidate(ctx context.Context, d *deps, opts *patternValidateOptions) error {
	if err := checkTests(d, opts.Tests); err != nil {
		return err
	}
	f, err := readSpecFile(d, opts.File, opts.Name)
	if err != nil {
		return err
	}
	var v *cepv1.ValidatePatternResponse
	if opts.online {
		c := newClients(d, opts.globalOptions)
		res, err := c.patterns.ValidatePattern(ctx, connect.NewRequest(&cepv1.ValidatePatternRequest{
			Spec: f.spec, Format: f.format, Name: f.name,
		}))
		if err != nil {
			return err
		}
		v = res.Msg
	} else {
		v = validateOffline(f)
	}
	if opts.Output != "table" {
		if err := writeProto(d.stdout, opts.Output, v); err != nil {
			return err
		}
	}
	if !v.GetValid() {
		return specError(opts.File, v.GetError())
	}
	if opts.Schema != "" || opts.Sample != "" {
		var s schema.Schema
		if opts.Schema != "" {
			s, err = readSchemaFile(d, opts.Schema)
		} else {
			var events []map[string]any
			if events, err = readSampleEvents(d, opts.Sample); err == nil {
				s = schema.Infer(events)
			}
		}
		if err != nil {
			return err
		}
		if err := checkAgainstSchema(f, s); err != nil {
			return specError(opts.File, toSpecError(err, v.GetFormat()).GetError())
		}
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
		// a query's message starts with its position, said once here
		msg = strings.TrimPrefix(msg, fmt.Sprintf("line %d:%d: ", e.GetLine(), e.GetColumn()))
		return fmt.Errorf("%s:%d:%d: %s", file, e.GetLine(), e.GetColumn(), msg)
	}
	return fmt.Errorf("%s: %s", file, msg)
}

// patternRPCError names the file in the server's refusal of a pattern
// (InvalidArgument) as validate does: "FILE: message", or for a query
// "FILE:LINE:COL: message", the position said once.
func patternRPCError(file string, doc []byte, err error) error {
	var ce *connect.Error
	if connect.CodeOf(err) != connect.CodeInvalidArgument || !errors.As(err, &ce) {
		return err
	}
	if file == "-" {
		file = "stdin"
	}
	msg := strings.TrimPrefix(ce.Message(), api.ErrInvalidArgument.Error()+": ")
	var line, col int
	if n, _ := fmt.Sscanf(msg, "line %d:%d: ", &line, &col); n == 2 {
		return &rpcError{fmt.Sprintf("%s:%d:%d: %s", file, line, col, strings.TrimPrefix(msg, fmt.Sprintf("line %d:%d: ", line, col))), err}
	}
	// a document's refusal names the stage and field: where it writes them
	if m := namedField.FindStringSubmatch(msg); m != nil {
		if line, col := nfa.SpecPosition(doc, m[1], m[2]); line > 0 {
			return &rpcError{fmt.Sprintf("%s:%d:%d: %s", file, line, col, msg), err}
		}
	}
	return &rpcError{file + ": " + msg, err}
}

// namedField is how a document's refusal names what it points at:
// `pattern "P": stage "S": field "F": ...` (the stage may be absent).
var namedField = regexp.MustCompile(`^pattern "[^"]*": (?:stage "([^"]*)": )?field "([^"]*)":`)

// serverGiven reports whether the user named a server (--server,
// CEPCTL_SERVER or server: in the config file) rather than leaving the
// default: commands that work offline then ask that server.
func serverGiven(d *deps, cmd *cobra.Command, g globalOptions) bool {
	if flagChanged(cmd, "server") || (d.getenv != nil && d.getenv("CEPCTL_SERVER") != "") {
		return true
	}
	if g.ConfigFile != "" {
		if cfg, err := readConfig(g.ConfigFile); err == nil && cfg.Server != "" {
			return true
		}
	}
	return false
}

// compileSpecFile compiles a pattern read by readSpecFile as a deploy
// does: the format given or detected, a query under its name, a
// document under --name if given, every stage reference checked, and
// with needSource a source named.
func compileSpecFile(f specFile, needSource bool) (*nfa.Pattern, cepv1.SpecFormat, error) {
	var p *nfa.Pattern
	var err error
	format := cepv1.SpecFormat_SPEC_FORMAT_SPEC
	if f.format == cepv1.SpecFormat_SPEC_FORMAT_SQL || (f.format == cepv1.SpecFormat_SPEC_FORMAT_UNSPECIFIED && nfa.IsSQL([]byte(f.spec))) {
		format = cepv1.SpecFormat_SPEC_FORMAT_SQL
		p, err = nfa.CompileSQL(f.spec, f.name)
	} else {
		p, err = nfa.CompileNamed([]byte(f.spec), f.name)
	}
	if err == nil {
		err = p.CheckStageRefs()
	}
	if err == nil {
		err = nfa.CheckYAMLKeys([]byte(f.spec))
	}
	if err != nil {
		return nil, format, err
	}
	if needSource && len(p.Sources()) == 0 {
		// as the server refuses it: a deployed pattern must read something
		return nil, format, fmt.Errorf("pattern %q names no source (set source: NAME)", p.Name())
	}
	return p, format, nil
}

// validateOffline checks a pattern with this cepctl's engine and answers
// as the server's ValidatePattern does.
func validateOffline(f specFile) *cepv1.ValidatePatternResponse {
	p, format, err := compileSpecFile(f, true)
	if err != nil {
		return toSpecError(err, format)
	}
	var stages []string
	for _, st := range p.Spec().Stages {
		stages = append(stages, st.Name)
	}
	return &cepv1.ValidatePatternResponse{Valid: true, Format: format, Name: p.Name(), Stages: stages,
		EventTime: p.EventTime(), Sources: p.Sources(), Warnings: p.Warnings()}
}

// toSpecError is the answer of ValidatePattern for a refused pattern.
func toSpecError(err error, format cepv1.SpecFormat) *cepv1.ValidatePatternResponse {
	se := &cepv1.SpecError{Message: err.Error()}
	var pe *nfa.PatternError
	if errors.As(err, &pe) {
		se.Stage, se.Field = pe.Stage, pe.Field
	}
	var qe *sql.Error
	if errors.As(err, &qe) {
		se.Line, se.Column = uint32(qe.Pos.Line), uint32(qe.Pos.Col)
	}
	return &cepv1.ValidatePatternResponse{Format: format, Error: se}
}
