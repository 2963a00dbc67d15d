package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/cepcluster/cep/internal/patterntest"
)

type patternTestOptions struct {
	Files []string
	JUnit string
}

func newPatternTestCmd(d *deps, runF func(*patternTestOptions) error) *cobra.Command {
	opts := &patternTestOptions{}
	cmd := &cobra.Command{
		Use:   "test FILE...",
		Short: "Run a pattern's test cases offline",
		Long: `Run test files offline with the engine cepctl run uses. A test file (YAML)
names the pattern under test (pattern: FILE, or sql: FILE for a
MATCH_RECOGNIZE query; a path relative to the test file) and its cases,
each with events in arrival order ({"$watermark": T} allowed) and every
record the case must produce (only the fields given are compared; objects
partially, lists element by element; records in any order). At the end of
a case time goes to +infinity so windows time out, unless the case says
finalWatermark: false. docs/debugging.md describes the format.

Prints each case as ok or FAIL; a failing case lists the expected records
not produced, each with the closest record produced and the fields that
differ, and the records produced that no expectation took. Exits non-zero
when a case fails. --junit FILE also writes the results as JUnit XML.`,
		Example: `  cepctl pattern test examples/login-fail-logout.test.yaml
  cepctl pattern test patterns/*.test.yaml --junit report.xml`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Files = args
			if runF != nil {
				return runF(opts)
			}
			return runPatternTests(d, opts.Files, opts.JUnit, false)
		},
	}
	cmd.Flags().StringVar(&opts.JUnit, "junit", "", "also write the results to FILE as JUnit XML")
	return cmd
}

// runPatternTests runs test files and prints their cases; it fails when a
// case fails or a file cannot run. quiet (validate and deploy --test)
// prints only the failing cases and a summary line.
func runPatternTests(d *deps, files []string, junit string, quiet bool) error {
	out := d.stdout
	if quiet {
		out = d.stderr // the command's own output stays on stdout
	}
	var suites []patterntest.Suite
	var cases, failed, broken int
	for _, file := range files {
		s := patterntest.Suite{File: file}
		f, err := patterntest.Load(file)
		if err == nil {
			s.Results, err = f.Run()
		}
		if err != nil {
			s.Err = err
			broken++
			fmt.Fprintf(out, "ERROR %s\n", err)
		}
		for _, r := range s.Results {
			cases++
			if !r.Passed() {
				failed++
			}
			writeCaseResult(out, file, &r, quiet)
		}
		suites = append(suites, s)
	}
	if junit != "" {
		if err := writeJUnitFile(junit, suites); err != nil {
			return err
		}
	}
	if failed == 0 {
		fmt.Fprintf(out, "%s passed", plural(cases, "case"))
	} else {
		fmt.Fprintf(out, "%s, %d failed", plural(cases, "case"), failed)
	}
	if broken > 0 {
		fmt.Fprintf(out, ", %s that could not run", plural(broken, "file"))
	}
	fmt.Fprintln(out)
	switch {
	case broken > 0 && failed == 0:
		return fmt.Errorf("pattern tests: %s could not run", plural(broken, "file"))
	case failed > 0 || broken > 0:
		return fmt.Errorf("pattern tests: %d of %s failed", failed, plural(cases, "case"))
	}
	return nil
}

func writeCaseResult(w io.Writer, file string, r *patterntest.Result, quiet bool) {
	switch {
	case r.Err != nil:
		fmt.Fprintf(w, "FAIL %s:%d: %s: %v\n", file, r.Line, r.Case, r.Err)
	case len(r.Problems) > 0:
		fmt.Fprintf(w, "FAIL %s:%d: %s\n", file, r.Line, r.Case)
		for _, p := range r.Problems {
			fmt.Fprintf(w, "    %s\n", p)
		}
	case !quiet:
		fmt.Fprintf(w, "ok   %s:%d: %s\n", file, r.Line, r.Case)
	}
}

func writeJUnitFile(path string, suites []patterntest.Suite) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("--junit: %w", err)
	}
	err = patterntest.WriteJUnit(f, suites)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("--junit %s: %w", path, err)
	}
	return nil
}

// checkTests runs the --test files of validate and deploy first: a
// failing case refuses the command.
func checkTests(d *deps, files []string) error {
	if len(files) == 0 {
		return nil
	}
	if err := runPatternTests(d, files, "", true); err != nil {
		return errors.New(err.Error() + ": not going on (--test)")
	}
	return nil
}
