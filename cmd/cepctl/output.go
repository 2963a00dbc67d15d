package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
	"sigs.k8s.io/yaml"
)

func indentJSON(b []byte) ([]byte, error) {
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		return nil, err
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

// writeStructured writes the JSON js to w as format "json" (indented) or
// "yaml".
func writeStructured(w io.Writer, format string, js []byte) error {
	var out []byte
	var err error
	if format == "yaml" {
		out, err = yaml.JSONToYAML(js)
	} else {
		out, err = indentJSON(js)
	}
	if err != nil {
		return err
	}
	_, err = w.Write(out)
	return err
}

// writeProto writes m as JSON or YAML; format must not be "table".
func writeProto(w io.Writer, format string, m proto.Message) error {
	b, err := marshalJSON.Marshal(m)
	if err != nil {
		return err
	}
	return writeStructured(w, format, b)
}

// newTable returns a tabwriter for aligned columns; the caller flushes it.
func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
}

// row writes one table row.
func row(tw io.Writer, cells ...any) {
	for i, c := range cells {
		if i > 0 {
			io.WriteString(tw, "\t")
		}
		fmt.Fprint(tw, c)
	}
	io.WriteString(tw, "\n")
}

// enumName turns FOO_STATE_DRAINING into "draining" given prefix FOO_STATE_.
func enumName(s fmt.Stringer, prefix string) string {
	n := strings.TrimPrefix(s.String(), prefix)
	if n == "UNSPECIFIED" {
		return "-"
	}
	return strings.ToLower(n)
}

// orDash returns s, or "-" when s is empty.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func joinOrDash(ss []string) string { return orDash(strings.Join(ss, ",")) }

func formatTime(ts *timestamppb.Timestamp) string {
	if ts == nil {
		return "-"
	}
	return ts.AsTime().UTC().Format(time.RFC3339)
}

// plural returns "1 shard" or "3 shards".
func plural[N ~int | ~uint32 | ~uint64 | ~int64](n N, word string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", word)
	}
	return fmt.Sprintf("%d %ss", n, word)
}

func uitoa[N ~uint32 | ~uint64](n N) string { return strconv.FormatUint(uint64(n), 10) }
