package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"time"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/internal/patterntest"
	"github.com/cepcluster/cep/nfa"
)

type patternBacktestOptions struct {
	globalOptions
	File    string
	Name    string // --name, as for deploy
	Against string
	From    string
	To      string
	// FinalWatermark: at the end of the history time goes to +infinity.
	FinalWatermark bool
	// MaxEvents bounds the events read from each source (held in memory).
	MaxEvents int
}

func newPatternBacktestCmd(d *deps, runF func(*patternBacktestOptions) error) *cobra.Command {
	opts := &patternBacktestOptions{FinalWatermark: true, MaxEvents: 1_000_000}
	cmd := &cobra.Command{
		Use:   "backtest FILE --against NAME",
		Short: "Compare a pattern with a deployed one over the stored events",
		Long: `Run a new version of a pattern (FILE) and the deployed pattern NAME (its
document as the cluster holds it) offline, with cepctl's engine, over the
same events: those each reads, as its sources' streams store them now
(--from and --to bound the time they were stored). Nothing in the cluster
changes; a reader may run it. Prints the records only the new version
produces, those only the deployed one produces, and those both produce
for the same key and events with other values (times, emitted fields),
then a summary with the counts; -o json prints it all as one object.

Each event's ingest time, against which maxFutureSkew bounds event times,
is the time it was stored. At the end of the history time goes to
+infinity so windows time out, unless --final-watermark=false. The output
is what each version would have produced over that history from an empty
state, not what the deployed version did produce: it started at its
deployment, and the stream may have dropped older events.`,
		Example: `  cepctl pattern backtest login-fail-logout.yaml --against login-fail-logout
  cepctl pattern backtest v2.yaml --against fraud --from 2025-12-01T00:00:00Z -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			g, err := resolveGlobals(d, cmd)
			if err != nil {
				return err
			}
			opts.globalOptions, opts.File = g, args[0]
			if opts.Against == "" {
				return fmt.Errorf("backtest: name the deployed pattern to compare with: --against NAME")
			}
			if runF != nil {
				return runF(opts)
			}
			return runPatternBacktest(cmd.Context(), d, opts)
		},
	}
	cmd.Flags().StringVar(&opts.Against, "against", "", "the deployed pattern to compare with (required)")
	cmd.Flags().StringVar(&opts.Name, "name", "", "the new version's name (default: the document's name, or for SQL the file name)")
	cmd.Flags().StringVar(&opts.From, "from", "", "only events stored at or after this time: RFC 3339, Unix milliseconds, or a duration before now such as 1h")
	cmd.Flags().StringVar(&opts.To, "to", "", "only events stored before this time (same forms as --from)")
	cmd.Flags().BoolVar(&opts.FinalWatermark, "final-watermark", true, "advance time to +infinity at the end of the history")
	cmd.Flags().IntVar(&opts.MaxEvents, "max-events", 1_000_000, "the most events read from a source, all held in memory: past it the backtest stops, to be narrowed by --from and --to")
	return cmd
}

// parseHistoryTime reads --from or --to: RFC 3339, Unix milliseconds, or
// a duration before now.
func parseHistoryTime(flag, s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil && ms > 0 {
		return time.UnixMilli(ms), nil
	}
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("--%s %q: want an RFC 3339 time such as 2025-12-02T10:00:00Z, Unix milliseconds, or a duration before now such as 1h", flag, s)
}

func runPatternBacktest(ctx context.Context, d *deps, opts *patternBacktestOptions) error {
	now := time.Now()
	from, err := parseHistoryTime("from", opts.From, now)
	if err != nil {
		return err
	}
	to, err := parseHistoryTime("to", opts.To, now)
	if err != nil {
		return err
	}
	if !from.IsZero() && !to.IsZero() && !from.Before(to) {
		return fmt.Errorf("--from %s is not before --to %s", opts.From, opts.To)
	}
	f, err := readSpecFile(d, opts.File, opts.Name)
	if err != nil {
		return err
	}
	newP, _, err := compileSpecFile(f, true)
	if err != nil {
		return fmt.Errorf("%s: %w", opts.File, err)
	}
	c := newClients(d, opts.globalOptions)
	res, err := c.patterns.GetPattern(ctx, connect.NewRequest(&cepv1.GetPatternRequest{Name: opts.Against}))
	if err != nil {
		return err
	}
	dp := res.Msg.GetPattern()
	oldP, _, err := compileSpecFile(specFile{spec: dp.GetSpec(), format: dp.GetFormat(), name: dp.GetName()}, false)
	if err != nil {
		return fmt.Errorf("deployed pattern %s: this cepctl cannot compile it: %w", opts.Against, err)
	}
	// each source is read once, for whichever version reads it
	history := map[string][]storedEvent{}
	for _, src := range append(oldP.Sources(), newP.Sources()...) {
		if _, done := history[src]; done {
			continue
		}
		evs, err := readSourceHistory(ctx, c, historyQuery{Source: src, From: from, To: to, Max: opts.MaxEvents})
		if err != nil {
			return err
		}
		history[src] = evs
	}
	oldRecs, err := backtestRun(oldP, history, opts.FinalWatermark)
	if err != nil {
		return fmt.Errorf("deployed pattern %s: %w", opts.Against, err)
	}
	newRecs, err := backtestRun(newP, history, opts.FinalWatermark)
	if err != nil {
		return fmt.Errorf("%s: %w", opts.File, err)
	}
	diff, err := patterntest.DiffRecords(oldRecs, newRecs)
	if err != nil {
		return err
	}
	events := 0
	for _, evs := range history {
		events += len(evs)
	}
	return writeBacktest(d.stdout, opts.Output, diff, events)
}

// backtestRun runs p over its sources' stored events, merged in the order
// they were stored (a source's own in stream order), from an empty state;
// it returns the records as JSON lines.
func backtestRun(p *nfa.Pattern, history map[string][]storedEvent, final bool) ([]string, error) {
	var evs []storedEvent
	for _, src := range p.Sources() {
		evs = append(evs, history[src]...)
	}
	sortByStored(evs)
	var out []string
	var buf []byte
	_, err := replayHistory(nfa.NewRunner(p), evs, final, func(recs []nfa.Record) {
		for i := range recs {
			buf, _ = recs[i].AppendJSON(buf[:0])
			out = append(out, string(buf))
		}
	})
	return out, err
}

// sortByStored orders events of several sources as they were stored,
// each source's own keeping its stream order.
func sortByStored(evs []storedEvent) {
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].StoredAt < evs[j].StoredAt })
}

// replayHistory runs stored events through r, each at the time it was
// stored as its ingest time, handing the records to add (nil: not
// wanted), then finishes (to +infinity when final). A stored event the
// engine cannot read is left out and counted, as the cluster
// dead-letters it.
func replayHistory(r *nfa.Runner, evs []storedEvent, final bool, add func([]nfa.Record)) (unreadable int, err error) {
	var ingest int64
	r.IngestTime = func() int64 { return ingest }
	if add == nil {
		add = func([]nfa.Record) {}
	}
	for _, e := range evs {
		ingest = e.StoredAt
		recs, err := r.Line(e.JSON)
		if err != nil {
			var ie *nfa.InputError
			if errors.As(err, &ie) {
				unreadable++
				continue
			}
			return unreadable, fmt.Errorf("source %s sequence %d: %w", e.Source, e.Sequence, err)
		}
		add(recs)
	}
	add(r.Finish(final))
	return unreadable, nil
}

func writeBacktest(w io.Writer, format string, diff *patterntest.RecordDiff, events int) error {
	if format != "table" {
		js, err := json.Marshal(struct {
			Events int `json:"events"`
			*patterntest.RecordDiff
		}{events, diff})
		if err != nil {
			return err
		}
		return writeStructured(w, format, js)
	}
	section := func(title string, recs []json.RawMessage) {
		if len(recs) == 0 {
			return
		}
		fmt.Fprintf(w, "%s (%d):\n", title, len(recs))
		for _, r := range recs {
			fmt.Fprintf(w, "  %s\n", r)
		}
	}
	section("only the new version", diff.OnlyNew)
	section("only the deployed version", diff.OnlyOld)
	if len(diff.Changed) > 0 {
		fmt.Fprintf(w, "changed (%d):\n", len(diff.Changed))
		for _, c := range diff.Changed {
			fmt.Fprintf(w, "  %s\n", c.Old)
			for _, f := range c.Fields {
				fmt.Fprintf(w, "    %s\n", f)
			}
		}
	}
	verdict := "the versions differ"
	if diff.Empty() {
		verdict = "no difference"
	}
	_, err := fmt.Fprintf(w, "%s over %s: %s\n", verdict, plural(events, "stored event"), diff.Summary())
	return err
}
