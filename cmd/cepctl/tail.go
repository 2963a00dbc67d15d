package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
)

type tailOptions struct {
	globalOptions
	Pattern string
	// Start and StartSequence come from --from: "new", "all" or a sequence.
	Start         cepv1.TailStart
	StartSequence uint64
	// DeadLetters tails the dead letters instead of a pattern, only
	// Source's when it is set.
	DeadLetters bool
	Source      string
	// Follow waits for new records; false ends at the last one stored.
	Follow bool
}

func newTailCmd(d *deps, runF func(*tailOptions) error) *cobra.Command {
	opts := &tailOptions{Follow: true}
	var from string
	cmd := &cobra.Command{
		Use:   "tail PATTERN | --dead-letters [--source SOURCE]",
		Short: "Stream a pattern's records, or the dead letters",
		Long: `Stream a pattern's output records (matches, timeouts and late events) until
interrupted or the pattern is deleted. With -o json each record is printed as
its pattern-v1 JSON on one line; with -o yaml as a YAML document; in table
mode as its sequence, type, key, id and a summary.

--from new (the default) starts with records published from now on, --from
all with every record still retained, and --from SEQ at that sequence (to
resume a tail, the last sequence printed plus one). --follow=false prints
the records stored from there and returns instead of waiting for more.

A tail outlives the node it reads from: when the stream breaks (the node
stopped, the connection was reset, the cluster answered Unavailable) it
resumes after the last record printed, none missed and none twice, on the
next server of --server's comma-separated list (or the config's server:;
the same server when there is one) after a backoff of up to 2s. It gives
up after 60s in which no server served it, saying the --from to resume
with. (A tail from new that printed nothing yet resumes from new.)

--dead-letters streams the dead letters instead: events a pattern or the
cluster refused (not JSON, no usable time, past a bound), each with its
source, the pattern that refused it and the reason, and summaries of
records too large to publish; --source keeps those of one source. In table
mode each is printed as its sequence, source, pattern, reason and the
event.`,
		Example: `  cepctl tail login-fail
  cepctl tail login-fail --from all -o json | jq .key
  cepctl tail --dead-letters --from all --follow=false
  cepctl tail --dead-letters --source bank -o json
  cepctl tail login-fail --server n1:7070,n2:7070,n3:7070`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			start, seq, err := parseTailFrom(from)
			if err != nil {
				return err
			}
			switch {
			case opts.DeadLetters && len(args) > 0:
				return fmt.Errorf("tail --dead-letters takes no pattern (got %q): dead letters are tailed by source (--source)", args[0])
			case !opts.DeadLetters && len(args) == 0:
				return errors.New("tail needs a PATTERN, or --dead-letters")
			case !opts.DeadLetters && opts.Source != "":
				return errors.New("--source goes with --dead-letters")
			}
			if len(args) > 0 {
				opts.Pattern = args[0]
			}
			g, err := resolveGlobals(d, cmd)
			if err != nil {
				return err
			}
			opts.globalOptions, opts.Start, opts.StartSequence = g, start, seq
			if runF != nil {
				return runF(opts)
			}
			return runTail(cmd.Context(), d, opts)
		},
	}
	cmd.Flags().StringVar(&from, "from", "new", "where to start: new, all or a sequence number")
	cmd.Flags().BoolVar(&opts.DeadLetters, "dead-letters", false, "stream the dead letters instead of a pattern's records")
	cmd.Flags().StringVar(&opts.Source, "source", "", "with --dead-letters: only those of this source")
	cmd.Flags().BoolVar(&opts.Follow, "follow", true, "wait for new records; --follow=false prints those stored (from --from) and returns")
	return cmd
}

func parseTailFrom(from string) (cepv1.TailStart, uint64, error) {
	switch from {
	case "new":
		return cepv1.TailStart_TAIL_START_NEW, 0, nil
	case "all":
		return cepv1.TailStart_TAIL_START_ALL, 0, nil
	}
	seq, err := strconv.ParseUint(from, 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("bad --from %q: use new, all or a sequence number", from)
	}
	return cepv1.TailStart_TAIL_START_SEQUENCE, seq, nil
}

// A tail outlives the node it reads from: when its stream breaks (the node
// stopped, the connection was reset, the server answered Unavailable), it
// opens it again, on the next server of --server's list (the same one when
// there is one), from the record after the last it printed, so that no
// record is missed or printed twice. It gives up once no server has served
// it for tailGiveUp.
var tailGiveUp = 60 * time.Second // (a variable for the tests)

const (
	// tailBackoffMin and tailBackoffMax bound the wait between attempts,
	// doubled after each failure.
	tailBackoffMin = 100 * time.Millisecond
	tailBackoffMax = 2 * time.Second
	// tailServed is how long a stream must stay open without a record to
	// count as served (a node that answers, with nothing to send yet).
	tailServed = 5 * time.Second
)

func runTail(ctx context.Context, d *deps, opts *tailOptions) error {
	servers := opts.Servers
	if len(servers) == 0 {
		servers = []string{opts.Server}
	}
	req := &cepv1.TailRequest{
		Pattern: opts.Pattern, Start: opts.Start, StartSequence: opts.StartSequence,
		DeadLetters: opts.DeadLetters, DeadLetterSource: opts.Source, StopAtEnd: !opts.Follow,
	}
	var (
		printed   bool   // whether a record was printed
		last      uint64 // the sequence of the last record printed
		buf       []byte
		failing   time.Time // when the stream first broke since it was last served
		backoff   = tailBackoffMin
		serverIdx int
	)
	for {
		g := opts.globalOptions
		g.Server = servers[serverIdx]
		if printed {
			req.Start, req.StartSequence = cepv1.TailStart_TAIL_START_SEQUENCE, last+1
		}
		opened := time.Now()
		served := false
		err := func() error {
			stream, err := newClients(d, g).matches.Tail(ctx, connect.NewRequest(req))
			if err != nil {
				return err
			}
			defer stream.Close()
			for stream.Receive() {
				r := stream.Msg()
				if printed && r.GetSequence() <= last {
					continue // already printed (a server that started before it was asked to)
				}
				// Each record is written at once (stdout is not
				// buffered), so that a reader of a pipe sees it
				// without delay.
				buf = appendRecord(buf[:0], opts.Output, r)
				if _, err := d.stdout.Write(buf); err != nil {
					return &stdoutError{err}
				}
				printed, last, served = true, r.GetSequence(), true
			}
			return stream.Err()
		}()
		if err == nil && ctx.Err() == nil {
			err = tailEnded(ctx, d, g, opts)
		}
		if err == nil {
			break
		}
		if se := (*stdoutError)(nil); errors.As(err, &se) {
			return se.err
		}
		if ctx.Err() != nil || !errors.Is(err, errStoppedEarly) && !tailResumable(err) {
			return interrupted(ctx, err)
		}
		if served || time.Since(opened) >= tailServed || failing.IsZero() {
			failing, backoff = time.Now(), tailBackoffMin
		}
		if time.Since(failing) >= tailGiveUp {
			return fmt.Errorf("tail: no server served the stream for %s, giving up (resume with --from %d): %w", tailGiveUp, resumeFrom(printed, last, opts), err)
		}
		fmt.Fprintf(d.stderr, "tail: %v; resuming in %s on %s\n", err, backoff, servers[(serverIdx+1)%len(servers)])
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, tailBackoffMax)
		serverIdx = (serverIdx + 1) % len(servers)
	}
	if !opts.Follow {
		return nil // the end of what is stored
	}
	fmt.Fprintf(d.stderr, "tail: the stream of pattern %s ended (the pattern was deleted)\n", opts.Pattern)
	return nil
}

// errStoppedEarly is a stream the server ended without error that had
// not ended: a node shutting down ends its tails so.
var errStoppedEarly = errors.New("the server ended the stream")

// tailEnded checks a stream the server ended without error: nil when it
// has ended (at the end of what is stored with --follow=false; its
// pattern deleted), else errStoppedEarly: a dead-letter stream never ends,
// and a pattern's ends only once the pattern is deleted.
func tailEnded(ctx context.Context, d *deps, g globalOptions, opts *tailOptions) error {
	switch {
	case !opts.Follow:
		return nil
	case opts.DeadLetters:
		return errStoppedEarly
	}
	_, err := newClients(d, g).patterns.GetPattern(ctx, connect.NewRequest(&cepv1.GetPatternRequest{Name: opts.Pattern}))
	if connect.CodeOf(err) == connect.CodeNotFound {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%w; is pattern %s deleted? %w", errStoppedEarly, opts.Pattern, err)
	}
	return errStoppedEarly
}

// stdoutError is a failed write of a record: the tail ends with it.
type stdoutError struct{ err error }

func (e *stdoutError) Error() string { return e.err.Error() }

// tailResumable reports whether a tail broken by err may go on on a
// server: the node went away (the connection failed or broke, so no
// answer of the server's) or said it is unavailable. What a server
// answered otherwise (NotFound, InvalidArgument, a refused token, too
// many tails) holds on any node.
func tailResumable(err error) bool {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return false
	}
	if !connect.IsWireError(ce) {
		return ce.Code() != connect.CodeUnimplemented // (a URL that is not a cep node's)
	}
	return ce.Code() == connect.CodeUnavailable
}

// resumeFrom is the --from that resumes a tail after what it printed.
func resumeFrom(printed bool, last uint64, opts *tailOptions) uint64 {
	switch {
	case printed:
		return last + 1
	case opts.Start == cepv1.TailStart_TAIL_START_SEQUENCE:
		return opts.StartSequence
	}
	return 1
}

// interrupted turns the error of a call cut short by ctx (Ctrl-C) into a
// clean exit.
func interrupted(ctx context.Context, err error) error {
	if ctx.Err() != nil && (errors.Is(err, context.Canceled) || connect.CodeOf(err) == connect.CodeCanceled) {
		return nil
	}
	return err
}

// appendRecord appends one record in format.
func appendRecord(b []byte, format string, r *cepv1.Record) []byte {
	js := bytes.TrimSpace(r.GetJson())
	switch format {
	case "json":
		b = append(b, js...)
		return append(b, '\n')
	case "yaml":
		y, err := yaml.JSONToYAML(js)
		if err != nil {
			y = []byte(fmt.Sprintf("# unreadable record %s: %v\n", r.GetId(), err))
		}
		b = append(b, "---\n"...)
		return append(b, y...)
	}
	if r.GetType() == "deadletter" {
		return appendDeadLetter(b, r.GetSequence(), js)
	}
	return fmt.Appendf(b, "%-6d %-7s %-16s %s %s\n", r.GetSequence(), r.GetType(), keyCell(r.GetKey()), orDash(r.GetId()), recordSummary(r.GetType(), js))
}

// appendDeadLetter is a dead letter's table line:
//
//	SEQ deadletter SOURCE PATTERN "REASON" EVENT
//
// with "-" for no pattern, the event as JSON (or quoted, when it was not
// JSON) and, for a record too large to publish, its subject.
func appendDeadLetter(b []byte, seq uint64, js []byte) []byte {
	var dl struct {
		Source, Pattern, Reason, Text, Subject string
		Data                                   json.RawMessage
	}
	if err := json.Unmarshal(js, &dl); err != nil {
		return fmt.Appendf(b, "%-6d deadletter (unreadable record)\n", seq)
	}
	what := truncate(compact(dl.Data), 120)
	switch {
	case dl.Text != "":
		what = truncate([]byte(strconv.Quote(dl.Text)), 120)
	case dl.Subject != "":
		what = dl.Subject // an oversized record: where it was to go
	}
	src := dl.Source
	if src == "" {
		src = "-"
	}
	return fmt.Appendf(b, "%-6d deadletter %-12s %-16s %s %s\n", seq, src, orDash(dl.Pattern), strconv.Quote(dl.Reason), what)
}

// keyCell quotes a key that would be ambiguous in a column.
func keyCell(k string) string {
	if k == "" || strings.ContainsAny(k, " \t\n\"") {
		return strconv.Quote(k)
	}
	return k
}

// recordSummary is a compact description of a pattern-v1 record:
//
//	match    start..end login×1 failed×2 logout×1 {fields}
//	timeout  start→timeoutAt login×1
//	late     {the event}
func recordSummary(typ string, js []byte) string {
	var r struct {
		Start     *int64                     `json:"start"`
		End       *int64                     `json:"end"`
		TimeoutAt *int64                     `json:"timeoutAt"`
		Events    json.RawMessage            `json:"events"`
		Fields    map[string]json.RawMessage `json:"fields"`
		Event     json.RawMessage            `json:"event"`
	}
	if err := json.Unmarshal(js, &r); err != nil {
		return "(unreadable record)"
	}
	var parts []string
	switch {
	case typ == "late":
		return truncate(compact(r.Event), 120)
	case r.TimeoutAt != nil && r.Start != nil:
		parts = append(parts, fmt.Sprintf("%d→%d", *r.Start, *r.TimeoutAt))
	case r.Start != nil && r.End != nil:
		parts = append(parts, fmt.Sprintf("%d..%d", *r.Start, *r.End))
	}
	parts = append(parts, stageCounts(r.Events)...)
	if len(r.Fields) > 0 {
		names := make([]string, 0, len(r.Fields))
		for n := range r.Fields {
			names = append(names, n)
		}
		sort.Strings(names)
		fs := make([]string, len(names))
		for i, n := range names {
			fs[i] = n + "=" + string(compact(r.Fields[n]))
		}
		parts = append(parts, truncate([]byte("{"+strings.Join(fs, " ")+"}"), 120))
	}
	return strings.Join(parts, " ")
}

// stageCounts reads {"stage": [events], ...} keeping the stage order.
func stageCounts(events json.RawMessage) []string {
	if len(events) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(events))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	var out []string
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return out
		}
		name, _ := t.(string)
		var evs []json.RawMessage
		if err := dec.Decode(&evs); err != nil {
			return out
		}
		out = append(out, fmt.Sprintf("%s×%d", name, len(evs)))
	}
	return out
}

func compact(raw []byte) []byte {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return raw
	}
	return b.Bytes()
}

func truncate(b []byte, n int) string {
	s := []rune(string(b))
	if len(s) <= n {
		return string(s)
	}
	return string(s[:n-1]) + "…"
}
