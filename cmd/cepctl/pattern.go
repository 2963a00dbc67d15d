package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/nfa"
)

func newPatternCmd(d *deps) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "pattern",
		Short: "Validate, test, backtest, deploy, update, apply, diff, delete, list, show and explain patterns",
		Long: `Manage the cluster's patterns. A FILE is a pattern-v1 document (JSON or
YAML) or a MATCH_RECOGNIZE query: a file ending in .sql is read as SQL, any
other is detected from its text. A query names no pattern, so without --name
its name comes from the file name (lower-cased, runs of other characters than
[a-z0-9] turned into "-"). FILE - reads standard input.`,
		Args: cobra.ArbitraryArgs,
		RunE: runGroup,
	}
	cmd.AddCommand(
		newPatternValidateCmd(d, nil),
		newPatternDeployCmd(d, nil),
		newPatternApplyCmd(d, nil),
		newPatternDiffCmd(d, nil),
		newPatternUpdateCmd(d, nil),
		newPatternDeleteCmd(d, nil),
		newPatternListCmd(d, nil),
		newPatternGetCmd(d, nil),
		newPatternExplainCmd(d, nil),
		newPatternTestCmd(d, nil),
		newPatternBacktestCmd(d, nil),
		newPatternInspectCmd(d, nil),
		newPatternTraceCmd(d, nil),
	)
	return cmd
}

// specFile is a pattern as read from a file, ready for a request.
type specFile struct {
	spec   string
	format cepv1.SpecFormat
	// name is --name, else for SQL the name derived from the file name,
	// else empty (a document names itself).
	name string
}

// readSpecFile reads path ("-" for stdin) and works out its format and name.
func readSpecFile(d *deps, path, name string) (specFile, error) {
	var b []byte
	var err error
	if path == "-" {
		b, err = io.ReadAll(d.stdin)
	} else {
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return specFile{}, fmt.Errorf("read pattern: %w", err)
	}
	f := specFile{spec: string(b), format: cepv1.SpecFormat_SPEC_FORMAT_UNSPECIFIED, name: name}
	isSQL := strings.EqualFold(filepath.Ext(path), ".sql")
	if isSQL {
		f.format = cepv1.SpecFormat_SPEC_FORMAT_SQL
	}
	if f.name == "" && (isSQL || nfa.IsSQL(b)) {
		f.name = patternNameFromFile(path)
	}
	return f, nil
}

// patternNameFromFile derives a pattern name from a file name, the way
// `cepctl run --sql` names queries: "Fraud Check.sql" → "fraud-check".
func patternNameFromFile(path string) string {
	if path == "-" {
		return nfa.SanitizeName("")
	}
	base := filepath.Base(path)
	return nfa.SanitizeName(strings.TrimSuffix(base, filepath.Ext(base)))
}

// writePattern prints one pattern: in table mode its fields and spec, else
// the Pattern message.
func writePattern(w io.Writer, format string, p *cepv1.Pattern) error {
	if format != "table" {
		return writeProto(w, format, p)
	}
	tw := newTable(w)
	row(tw, "Name:", p.GetName())
	row(tw, "Version:", p.GetVersion())
	row(tw, "State:", enumName(p.GetState(), "PATTERN_STATE_"))
	row(tw, "Format:", enumName(p.GetFormat(), "SPEC_FORMAT_"))
	row(tw, "Sources:", joinOrDash(p.GetSources()))
	row(tw, "Output subject:", orDash(p.GetOutputSubject()))
	row(tw, "Records:", recordList(p.GetRecords()))
	bound := "none"
	if b := p.GetMaxPartialMatches(); b > 0 {
		bound = fmt.Sprintf("%d per key", b)
	}
	row(tw, "Partial match bound:", bound)
	row(tw, "Created index:", p.GetCreatedIndex())
	row(tw, "Updated index:", p.GetUpdatedIndex())
	if err := tw.Flush(); err != nil {
		return err
	}
	spec := strings.TrimRight(p.GetSpec(), "\n")
	_, err := fmt.Fprintf(w, "\n%s\n", spec)
	return err
}

// recordList names record types as "match, timeout, late".
func recordList(types []cepv1.RecordType) string {
	names := make([]string, 0, len(types))
	for _, rt := range types {
		names = append(names, strings.ToLower(strings.TrimPrefix(rt.String(), "RECORD_TYPE_")))
	}
	return orDash(strings.Join(names, ", "))
}
