package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"connectrpc.com/connect"
	"github.com/pmezard/go-difflib/difflib"
	"github.com/spf13/cobra"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
)

type patternDiffOptions struct {
	globalOptions
	// File is the positional FILE; Paths are the -f files and directories.
	File          string
	Paths         []string
	Recursive     bool
	Prune         bool
	Name          string
	OutputSubject string
	outputFlags
}

// Exit statuses of pattern diff, as diff(1) and kubectl diff have them.
const (
	diffExitDifferent = 1
	diffExitError     = 2
)

func newPatternDiffCmd(d *deps, runF func(*patternDiffOptions) error) *cobra.Command {
	opts := &patternDiffOptions{}
	failed := func(err error) error {
		if err == nil {
			return nil
		}
		return &exitError{code: diffExitError, err: err}
	}
	cmd := &cobra.Command{
		Use:   "diff FILE | -f PATH... [-R] [--prune]",
		Short: "Show what pattern apply would change",
		Long: `Show, as a unified diff, what pattern apply with the same files and flags
would change: for each pattern that would be updated, the running
version's spec and settings against the file's (settings not given keep
the running ones, as in apply); a pattern that would be deployed against
nothing (/dev/null), and with --prune a pattern that would be deleted. The
settings follow the spec as "# output-subject: ...", "# max-partial-matches:
..." and "# records: ..." lines. The files are taken and validated as apply
takes them, and nothing changes.

The exit status is 0 when there are no differences, 1 when there are, and
2 on an error, as for diff(1) and kubectl diff.`,
		Example: `  cepctl pattern diff -f patterns/ -R --prune
  cepctl pattern diff patterns/login-fail.yaml --records match`,
		Args: func(cmd *cobra.Command, args []string) error {
			return failed(cobra.MaximumNArgs(1)(cmd, args))
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 && len(opts.Paths) == 0 {
				return failed(fmt.Errorf("no pattern files: give FILE, or -f FILE|DIR"))
			}
			g, err := resolveGlobals(d, cmd)
			if err != nil {
				return failed(err)
			}
			opts.globalOptions = g
			if len(args) == 1 {
				opts.File = args[0]
			}
			if err := opts.outputFlags.parse(cmd); err != nil {
				return failed(err)
			}
			if runF != nil {
				return runF(opts)
			}
			different, err := runPatternDiff(cmd.Context(), d, opts)
			if err != nil {
				return failed(err)
			}
			if different {
				return &exitError{code: diffExitDifferent}
			}
			return nil
		},
	}
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return failed(err) })
	cmd.Flags().StringArrayVarP(&opts.Paths, "filename", "f", nil, "a pattern file, or a directory of them (repeatable; - reads standard input)")
	cmd.Flags().BoolVarP(&opts.Recursive, "recursive", "R", false, "take the pattern files of the directories' subdirectories too")
	cmd.Flags().BoolVar(&opts.Prune, "prune", false, "show the running patterns that no file names as deleted")
	cmd.Flags().StringVar(&opts.Name, "name", "", "pattern name, with a single file (default: the document's name, or for SQL the file name)")
	cmd.Flags().StringVar(&opts.OutputSubject, "output-subject", "", "NATS subject apply would be given (default: the current one)")
	opts.outputFlags.add(cmd, "the server's, or the current setting")
	return cmd
}

// runPatternDiff prints the differences and reports whether there are
// any.
func runPatternDiff(ctx context.Context, d *deps, opts *patternDiffOptions) (bool, error) {
	c := newClients(d, opts.globalOptions)
	paths := opts.Paths
	if opts.File != "" {
		paths = append([]string{opts.File}, paths...)
	}
	files, err := loadPatternFiles(ctx, d, c, paths, opts.Recursive, opts.Name)
	if err != nil {
		return false, err
	}
	different := false
	for _, f := range files {
		cur, err := c.patterns.GetPattern(ctx, connect.NewRequest(&cepv1.GetPatternRequest{Name: f.name}))
		var from []string
		fromName := "/dev/null"
		given := opts.given(nil)
		switch {
		case connect.CodeOf(err) == connect.CodeNotFound:
		case err != nil:
			return different, err
		default:
			p := cur.Msg.GetPattern()
			if sameSettings(f.spec, p, opts.OutputSubject, opts.outputFlags) {
				continue
			}
			from, fromName = patternLines(p.GetSpec(), runningSettings(p)), runningName(p)
			given = opts.given(p)
		}
		different = true
		if err := writeDiff(d, from, fromName, patternLines(f.spec.spec, given), displayName(f.path)); err != nil {
			return different, err
		}
	}
	if !opts.Prune {
		return different, nil
	}
	stale, err := stalePatterns(ctx, c, files)
	if err != nil {
		return different, err
	}
	for _, p := range stale {
		different = true
		if err := writeDiff(d, patternLines(p.GetSpec(), runningSettings(p)), runningName(p), nil, "/dev/null"); err != nil {
			return different, err
		}
	}
	return different, nil
}

// runningName heads the running version's side of a diff.
func runningName(p *cepv1.Pattern) string {
	return fmt.Sprintf("running/%s (version %d)", p.GetName(), p.GetVersion())
}

// writeDiff writes the unified diff of from and to.
func writeDiff(d *deps, from []string, fromName string, to []string, toName string) error {
	return difflib.WriteUnifiedDiff(d.stdout, difflib.UnifiedDiff{A: from, FromFile: fromName, B: to, ToFile: toName, Context: 3})
}

// patternSettings are the settings of a pattern that pattern diff shows,
// each "" when not shown.
type patternSettings struct {
	subject, bound, records string
}

// runningSettings are the settings p runs with.
func runningSettings(p *cepv1.Pattern) patternSettings {
	return patternSettings{
		subject: p.GetOutputSubject(),
		bound:   strconv.FormatUint(p.GetMaxPartialMatches(), 10),
		records: recordList(p.GetRecords()),
	}
}

// given are the settings an apply would leave the running pattern p with
// (nil: one that does not run, whose settings not given are the
// server's choice).
func (o *patternDiffOptions) given(p *cepv1.Pattern) patternSettings {
	var s patternSettings
	if p != nil {
		s = runningSettings(p)
	}
	if o.OutputSubject != "" {
		s.subject = o.OutputSubject
	}
	if o.MaxPartialMatches != nil {
		s.bound = strconv.FormatUint(*o.MaxPartialMatches, 10)
	}
	if len(o.Records) > 0 {
		s.records = recordList(normalRecords(o.Records))
	}
	return s
}

// patternLines are the lines pattern diff compares of a pattern: its spec,
// then its settings.
func patternLines(spec string, s patternSettings) []string {
	var lines []string
	if spec != "" {
		lines = strings.SplitAfter(spec, "\n")
		if last := lines[len(lines)-1]; last == "" {
			lines = lines[:len(lines)-1]
		} else {
			// else a spec differing only in its last newline would show
			// no difference
			lines[len(lines)-1] += "\n"
			lines = append(lines, "\\ No newline at end of the spec\n")
		}
	}
	for _, kv := range [][2]string{{"output-subject", s.subject}, {"max-partial-matches", s.bound}, {"records", s.records}} {
		if kv[1] != "" {
			lines = append(lines, fmt.Sprintf("# %s: %s\n", kv[0], kv[1]))
		}
	}
	return lines
}
