package main

import (
	"io"
	"strings"

	"github.com/spf13/cobra"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
)

func newSavepointCmd(d *deps) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "savepoint",
		Short: "Write, list, restore and delete savepoints",
		Long: `Manage savepoints: consistent copies of every pattern's state and every
source's position, sectioned by key group so that they restore into any
number of shards.`,
		Args: cobra.ArbitraryArgs,
		RunE: runGroup,
	}
	cmd.AddCommand(
		newSavepointCreateCmd(d, nil),
		newSavepointListCmd(d, nil),
		newSavepointRestoreCmd(d, nil),
		newSavepointDeleteCmd(d, nil),
	)
	return cmd
}

// writeSavepoint prints one savepoint: in table mode its fields, else the
// Savepoint message.
func writeSavepoint(w io.Writer, format string, s *cepv1.Savepoint) error {
	if format != "table" {
		return writeProto(w, format, s)
	}
	tw := newTable(w)
	row(tw, "ID:", s.GetId())
	row(tw, "Location:", s.GetLocation())
	row(tw, "Created:", formatTime(s.GetCreatedTime()))
	row(tw, "Created index:", s.GetCreatedIndex())
	row(tw, "Shards:", s.GetShardCount())
	row(tw, "Key groups:", s.GetKeyGroups())
	row(tw, "Patterns:", patternVersions(s.GetPatternVersions()))
	row(tw, "Positions:", sourcePositions(s.GetSourcePositions()))
	return tw.Flush()
}

// patternVersions is "login-fail@3,fraud@1".
func patternVersions(pvs []*cepv1.PatternVersion) string {
	parts := make([]string, len(pvs))
	for i, pv := range pvs {
		parts[i] = pv.GetName() + "@" + uitoa(pv.GetVersion())
	}
	return joinOrDash(parts)
}

// sourcePositions is "logins(LOGINS)@1042 orders(ORDERS)@7".
func sourcePositions(sps []*cepv1.SourcePosition) string {
	parts := make([]string, len(sps))
	for i, sp := range sps {
		parts[i] = sp.GetSource() + "(" + sp.GetStream() + ")@" + uitoa(sp.GetSequence())
	}
	return orDash(strings.Join(parts, " "))
}
