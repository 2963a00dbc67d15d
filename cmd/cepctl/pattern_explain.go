package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/nfa/explain"
)

type patternExplainOptions struct {
	globalOptions
	Arg    string
	Name   string
	Format string // text, dot, svg, json or yaml
}

func newPatternExplainCmd(d *deps, runF func(*patternExplainOptions) error) *cobra.Command {
	opts := &patternExplainOptions{}
	cmd := &cobra.Command{
		Use:   "explain FILE|NAME",
		Short: "Draw a pattern's compiled automaton",
		Long: `Draw the automaton a pattern compiles to: its states (one or more per
stage, Flink's naming: stage, stage:0, ..., $endState$), the transitions
between them in the order the engine tries them — take (the event joins
the partial match), ignore (it is skipped), proceed (move on without
consuming it) — with their conditions, the windows and the after-match
skip strategy.

FILE (an existing file, or - for standard input) is compiled here,
offline, its stage references checked as validate checks them; NAME
asks the server for the deployed version of that pattern.

-o text (the default) prints it for a terminal, -o dot as a Graphviz
digraph, -o svg as an SVG image drawn by cepctl itself (no Graphviz
needed), -o json or yaml every form in one message.`,
		Example: `  cepctl pattern explain examples/login-fail-logout.yaml
  cepctl pattern explain -o svg login-fail-logout > login-fail-logout.svg
  cepctl pattern explain -o dot fraud.yaml | dot -Tpng > fraud.png`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			g, err := resolveGlobals(d, cmd)
			if err != nil {
				return err
			}
			opts.globalOptions, opts.Arg = g, args[0]
			switch opts.Format {
			case "text", "dot", "svg", "json", "yaml":
			default:
				return fmt.Errorf("unknown output format %q: use text, dot, svg, json or yaml", opts.Format)
			}
			if runF != nil {
				return runF(opts)
			}
			return runPatternExplain(cmd.Context(), d, opts)
		},
	}
	// its own -o: the pictures are not tables
	cmd.Flags().StringVarP(&opts.Format, "output", "o", "text", "output format: text, dot, svg, json or yaml")
	cmd.Flags().StringVar(&opts.Name, "name", "", "pattern name of a FILE (default: the document's name, or for SQL the file name)")
	return cmd
}

// patternName is what a deployed pattern may be called.
var patternName = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

func runPatternExplain(ctx context.Context, d *deps, opts *patternExplainOptions) error {
	var x *cepv1.ExplainPatternResponse
	_, statErr := os.Stat(opts.Arg)
	switch {
	case opts.Arg == "-" || statErr == nil || !errors.Is(statErr, fs.ErrNotExist) || !patternName.MatchString(opts.Arg):
		f, err := readSpecFile(d, opts.Arg, opts.Name)
		if err != nil {
			return err
		}
		p, format, err := compileSpecFile(f, false) // a picture needs no source
		if err != nil {
			return specError(opts.Arg, toSpecError(err, format).GetError())
		}
		e := explain.Pattern(p)
		x = &cepv1.ExplainPatternResponse{Name: p.Name(), Text: e.Text, Dot: e.Dot, Svg: e.SVG, Warnings: p.Warnings()}
	default:
		res, err := newClients(d, opts.globalOptions).patterns.ExplainPattern(ctx, connect.NewRequest(&cepv1.ExplainPatternRequest{Name: opts.Arg}))
		if err != nil {
			return err
		}
		x = res.Msg
	}
	writeWarnings(d.stderr, x.GetWarnings())
	var err error
	switch opts.Format {
	case "text":
		_, err = fmt.Fprint(d.stdout, x.GetText())
	case "dot":
		_, err = fmt.Fprint(d.stdout, x.GetDot())
	case "svg":
		_, err = fmt.Fprint(d.stdout, x.GetSvg())
	default:
		err = writeProto(d.stdout, opts.Format, x)
	}
	return err
}
