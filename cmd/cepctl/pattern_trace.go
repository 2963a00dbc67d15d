package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/nfa"
)

type patternTraceOptions struct {
	globalOptions
	Name string
	Key  string
	From string
	Last int
	// FinalWatermark: at the end of the history time goes to +infinity.
	FinalWatermark bool
	MaxEvents      int
}

func newPatternTraceCmd(d *deps, runF func(*patternTraceOptions) error) *cobra.Command {
	opts := &patternTraceOptions{MaxEvents: 1_000_000}
	cmd := &cobra.Command{
		Use:   "trace NAME --key K",
		Short: "Trace a key's stored events through a deployed pattern",
		Long: `Read the events of one key that the deployed pattern NAME reads, as its
sources' streams store them now (--from bounds the time they were stored,
--last keeps the last N), and trace them through the deployed version
offline, with cepctl's engine, as ` + "`cepctl run --trace`" + ` does: for each
event what each partial match of the key did (the conditions tested and
their values, the partial matches started, extended, completed with the
match, dropped and why). Nothing in the cluster changes; a reader may run
it. -o json writes the trace as JSON lines.

Each event's ingest time is the time it was stored. Time does not go to
+infinity at the end (--final-watermark to have it): what waits then is
what the pattern still waits for. The trace starts from an empty state at
the first event read, not from the deployment's state.`,
		Example: `  cepctl pattern trace login-fail-logout --key acc-3
  cepctl pattern trace fraud --key 42 --from 1h -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			g, err := resolveGlobals(d, cmd)
			if err != nil {
				return err
			}
			opts.globalOptions, opts.Name = g, args[0]
			if !cmd.Flags().Changed("key") {
				return errors.New("trace: name the key to trace: --key K")
			}
			if opts.Last < 0 {
				return fmt.Errorf("--last %d: want a count of events", opts.Last)
			}
			if runF != nil {
				return runF(opts)
			}
			return runPatternTrace(cmd.Context(), d, opts)
		},
	}
	cmd.Flags().StringVar(&opts.Key, "key", "", "the key to trace, as the pattern's key expression gives it (required)")
	cmd.Flags().StringVar(&opts.From, "from", "", "only events stored at or after this time: RFC 3339, Unix milliseconds, or a duration before now such as 1h")
	cmd.Flags().IntVar(&opts.Last, "last", 0, "only the key's last N stored events")
	cmd.Flags().BoolVar(&opts.FinalWatermark, "final-watermark", false, "advance time to +infinity at the end of the history, so windows time out")
	cmd.Flags().IntVar(&opts.MaxEvents, "max-events", 1_000_000, "the most events of the key read from a source, all held in memory")
	return cmd
}

func runPatternTrace(ctx context.Context, d *deps, opts *patternTraceOptions) error {
	from, err := parseHistoryTime("from", opts.From, time.Now())
	if err != nil {
		return err
	}
	c := newClients(d, opts.globalOptions)
	res, err := c.patterns.GetPattern(ctx, connect.NewRequest(&cepv1.GetPatternRequest{Name: opts.Name}))
	if err != nil {
		return err
	}
	dp := res.Msg.GetPattern()
	p, _, err := compileSpecFile(specFile{spec: dp.GetSpec(), format: dp.GetFormat(), name: dp.GetName()}, false)
	if err != nil {
		return fmt.Errorf("deployed pattern %s: this cepctl cannot compile it: %w", opts.Name, err)
	}
	var evs []storedEvent
	for _, src := range p.Sources() {
		q := historyQuery{Source: src, From: from, Last: opts.Last, Keep: keepKey(p, opts.Key), Max: opts.MaxEvents}
		// a source keyed as the pattern is stored by key: only the part of
		// its stream that holds this key is read
		if s, err := c.sources.GetSource(ctx, connect.NewRequest(&cepv1.GetSourceRequest{Name: src})); err == nil && sameKey(s.Msg.GetSource().GetKey(), p.KeyExpr()) {
			q.Key = opts.Key
		}
		got, err := readSourceHistory(ctx, c, q)
		if err != nil {
			return err
		}
		evs = append(evs, got...)
	}
	sortByStored(evs)
	if opts.Last > 0 && len(evs) > opts.Last {
		evs = evs[len(evs)-opts.Last:]
	}

	bw := bufio.NewWriterSize(d.stdout, 64<<10)
	tw := nfa.NewTraceWriter(bw, opts.Output == "json")
	tw.Keep = func(e *nfa.TraceEntry) bool { return e.Key == opts.Key || e.Key == "" }
	r := nfa.NewRunner(p)
	r.SetTracer(tw.Trace)
	unreadable, err := replayHistory(r, evs, opts.FinalWatermark, nil)
	if err != nil {
		return err
	}
	tw.Flush()
	if err := tw.Err(); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	if len(evs) == 0 {
		fmt.Fprintf(d.stderr, "cepctl: no stored event of key %q for pattern %s (its sources %s)\n", opts.Key, opts.Name, strings.Join(p.Sources(), ", "))
	}
	if unreadable > 0 {
		fmt.Fprintf(d.stderr, "cepctl: %d stored events of the key were not readable events (the cluster dead-letters them)\n", unreadable)
	}
	return nil
}

// sameKey: a source's key expression and a pattern's are the same, as
// written or with the event's "e." left out.
func sameKey(a, b string) bool {
	norm := func(s string) string { return strings.TrimPrefix(strings.TrimSpace(s), "e.") }
	return a != "" && norm(a) == norm(b)
}
