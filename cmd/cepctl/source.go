package main

import (
	"io"
	"strings"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/internal/size"
)

func newSourceCmd(d *deps) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "source",
		Short: "Register, show and delete event sources",
		Long: `Manage the sources patterns read: JetStream streams and the subjects read
from them. Events of source S are published to "S.<key token>" (see cepctl
publish).`,
		Args: cobra.ArbitraryArgs,
		RunE: runGroup,
	}
	cmd.AddCommand(
		newSourceCreateCmd(d, nil),
		newSourceListCmd(d, nil),
		newSourceGetCmd(d, nil),
		newSourceDeleteCmd(d, nil),
		newSourceInferSchemaCmd(d, nil),
	)
	return cmd
}

// writeSource prints one source: in table mode its fields, else the Source
// message.
func writeSource(w io.Writer, format string, s *cepv1.Source) error {
	if format != "table" {
		return writeProto(w, format, s)
	}
	tw := newTable(w)
	row(tw, "Name:", s.GetName())
	row(tw, "Stream:", orDash(s.GetStream()))
	row(tw, "Subjects:", orDash(strings.Join(s.GetSubjects(), " ")))
	row(tw, "Key:", orDash(s.GetKey()))
	if o := s.GetOrigin(); o != "" {
		row(tw, "Re-keys:", o)
	}
	row(tw, "Key groups:", s.GetKeyGroups())
	row(tw, "Managed:", s.GetManaged())
	row(tw, "Retention:", retention(s.GetLimits()))
	if fs := s.GetFields(); len(fs) > 0 {
		fields := plural(len(fs), "field")
		if s.GetStrict() {
			fields += " (strict: events that do not fit are dead-lettered)"
		}
		row(tw, "Fields:", fields)
		for _, line := range strings.Split(strings.TrimSuffix(fromSchemaFields(fs).Format(), "\n"), "\n") {
			row(tw, "", "  "+line)
		}
	}
	row(tw, "Created index:", s.GetCreatedIndex())
	return tw.Flush()
}

// retention describes a source's limits, "-" without any.
func retention(l *cepv1.SourceLimits) string {
	var parts []string
	if d := l.GetMaxAge(); d != nil {
		parts = append(parts, "max age "+d.AsDuration().String())
	}
	if n := l.GetMaxBytes(); n > 0 {
		parts = append(parts, "max bytes "+size.Format(n))
	}
	if n := l.GetMaxMsgs(); n > 0 {
		parts = append(parts, "max msgs "+humanize.Comma(n))
	}
	return orDash(strings.Join(parts, ", "))
}
