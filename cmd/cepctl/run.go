package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cepcluster/cep/nfa"
)

type runOptions struct {
	patterns       []string
	sql            []string
	input          string
	finalWatermark bool
	maxPartial     int
	stats          bool         // run only: each pattern's counts on stderr at the end
	records        []string     // run only: the record types printed (empty: all)
	now            string       // run only: the ingest time of every line (--now); empty: the wall clock
	trace          traceOptions // run only: --trace and its filters
}

func newRunCmd(d *deps, runF func(*runOptions) error) *cobra.Command {
	opts := &runOptions{}
	cmd := &cobra.Command{
		Use:   "run (-p PATTERN | --sql QUERY)... [-i FILE|-]",
		Short: "Evaluate patterns offline over a file of JSON events",
		Long: `Evaluate one or more patterns (pattern-v1 JSON or YAML documents, or
MATCH_RECOGNIZE queries with --sql) over JSON events, one per line, and print the output records (matches, timeouts, late
events) as JSON lines. A line {"$watermark": T} advances event time to T.
At the end of the input every buffered event is processed and, unless
--final-watermark=false, time advances to +infinity so windows time out.
An event whose time a pattern refuses (more than maxFutureSkew, default
24h, ahead of the time its line is read at or of the source's event time,
or at the ends of the int64 range; see docs/time.md) is written to stderr
as "cepctl: dead letter: {...}", the record a cluster publishes on
cep.deadletter.<source>, and the run goes on. A cluster measures the first
bound from the wall time its shard leader read the event at; run from the
wall clock as it reads each line, or from --now for a run that gives the
same output whenever it is repeated.

--trace writes why each event did or did not move each partial match
(the conditions tested and their values, partial matches started,
extended, matched and dropped with the reason) to stderr, or to
--trace-out; the records on stdout are the same. --key K (or --trace-key)
traces one key, -o json (or --trace-format json) writes JSON lines. See
docs/debugging.md.`,
		Example: `  cepctl run -p examples/login-fail-logout.yaml -i examples/events.jsonl
  cepctl run -p examples/login-fail-logout.yaml -i examples/events.jsonl --trace --trace-key acc-3 >/dev/null`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(opts.patterns) == 0 && len(opts.sql) == 0 {
				return errors.New("run: give at least one pattern with -p FILE or a query with --sql FILE")
			}
			for _, r := range opts.records {
				if _, ok := recordTypes[r]; !ok {
					return fmt.Errorf("--records: unknown record type %q: use match, timeout or late", r)
				}
			}
			// -o json asks for the trace as JSON lines (the records are
			// JSON lines whatever -o says)
			if o := cmd.Flag("output"); o != nil && cmd.Flags().Changed("output") && !cmd.Flags().Changed("trace-format") && o.Value.String() == "json" {
				opts.trace.format = "json"
			}
			if _, err := opts.trace.enabled(); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return runRun(d, opts)
		},
	}
	opts.addFlags(cmd)
	cmd.Flags().BoolVar(&opts.stats, "stats", false, "at the end, write each pattern's counts to stderr (events, late events, matches, timeouts, and the state left)")
	cmd.Flags().StringVar(&opts.now, "now", "", "the time every line is read at, against which maxFutureSkew bounds event times: Unix milliseconds or RFC 3339 (default: the wall clock as each line is read)")
	opts.trace.addFlags(cmd)
	cmd.Flags().StringSliceVar(&opts.records, "records", nil, "print only these record types, of match, timeout and late, as a deployment with --records publishes them (default: all)")
	return cmd
}

// addFlags defines the flags run and bench share.
func (o *runOptions) addFlags(cmd *cobra.Command) {
	cmd.Flags().StringArrayVarP(&o.patterns, "pattern", "p", nil, "pattern file (JSON or YAML); repeat to run several side by side")
	cmd.Flags().StringArrayVar(&o.sql, "sql", nil, "MATCH_RECOGNIZE query file; repeatable")
	cmd.Flags().StringVarP(&o.input, "input", "i", "-", "input file of JSON lines, - for standard input")
	cmd.Flags().BoolVar(&o.finalWatermark, "final-watermark", true, "advance time to +infinity at the end of the input")
	cmd.Flags().IntVar(&o.maxPartial, "max-partial-matches", nfa.DefaultMaxPartialMatches,
		"partial matches one key of a pattern may hold; past it the latest-starting are dropped (0: no bound, as in Flink)")
}

// newRunner returns a runner for the patterns with the options' bound on
// partial matches.
func (o *runOptions) newRunner(patterns []*nfa.Pattern) *nfa.Runner {
	cfg := nfa.DefaultConfig()
	cfg.MaxPartialMatches = o.maxPartial
	// timeouts not printed are not built (--stats still counts them)
	cfg.ReportTimeouts = len(o.records) == 0 || slices.Contains(o.records, "timeout")
	return nfa.NewRunnerWith(cfg, patterns...)
}

// ingestClock is the time each line is read at (nfa.Runner.IngestTime):
// --now's, or the wall clock's.
func ingestClock(now string) (func() int64, error) {
	if now == "" {
		return func() int64 { return time.Now().UnixMilli() }, nil
	}
	ms, err := strconv.ParseInt(now, 10, 64)
	if err != nil {
		t, perr := time.Parse(time.RFC3339Nano, now)
		if perr != nil {
			return nil, fmt.Errorf("--now %q: want Unix milliseconds or an RFC 3339 time such as 2025-12-02T10:00:00Z", now)
		}
		ms = t.UnixMilli()
	}
	if ms == nfa.NoIngestTime {
		return nil, fmt.Errorf("--now %q: out of range", now)
	}
	return func() int64 { return ms }, nil
}

// writeStats writes a line of counts per pattern to w.
func writeStats(w io.Writer, r *nfa.Runner) {
	for _, m := range r.Matchers() {
		st := m.Stats()
		partial, buffered := m.Totals()
		fmt.Fprintf(w, "cepctl: pattern %s: events %s, late %s, matches %s, timeouts %s; left: %s partial matches and %s buffered events on %s keys\n",
			m.Pattern().Name(), group(st.Events), group(st.Late), group(st.Matches), group(st.Timeouts), group(uint64(partial)), group(uint64(buffered)), group(uint64(m.Keys())))
	}
}

// warn writes a line to w for each pattern whose output is not the whole
// story: partial matches dropped at the bound (records missing), conditions
// that failed and counted as false, emitted fields that failed and are
// null, each with the first error.
func (o *runOptions) warn(w io.Writer, r *nfa.Runner) {
	for _, m := range r.Matchers() {
		st, name := m.Stats(), m.Pattern().Name()
		cond, emit := m.FirstErrors()
		if st.ConditionErrors > 0 {
			fmt.Fprintf(w, "cepctl: warning: pattern %s: %s condition evaluations failed and counted as false; the first: %s\n",
				name, group(st.ConditionErrors), cond)
		}
		if st.EmitErrors > 0 {
			fmt.Fprintf(w, "cepctl: warning: pattern %s: %s emitted fields failed and are null; the first: %s\n",
				name, group(st.EmitErrors), emit)
		}
		switch {
		case st.Dropped > 0 && st.StepCapped > 0:
			fmt.Fprintf(w, "cepctl: warning: pattern %s: %s partial matches dropped because a key held more than %s (--max-partial-matches) or %s events' steps reached %s (nfa.MaxStepsPerEvent); records they would have produced are missing\n",
				name, group(st.Dropped), group(uint64(o.maxPartial)), group(st.StepCapped), group(uint64(nfa.DefaultMaxStepsPerEvent)))
		case st.Dropped > 0:
			fmt.Fprintf(w, "cepctl: warning: pattern %s: %s partial matches dropped because a key held more than %s (--max-partial-matches); records they would have produced are missing\n",
				name, group(st.Dropped), group(uint64(o.maxPartial)))
		}
	}
}

func runRun(d *deps, opts *runOptions) error {
	patterns, queries, err := opts.readPatterns()
	if err != nil {
		return err
	}
	in, _, err := openInput(d, opts.input)
	if err != nil {
		return err
	}
	defer in.Close()
	sc := lineScanner(in)
	// A query's columns are checked against the input's (a misspelt column
	// gets "did you mean"), taken from the first event.
	var peeked [][]byte
	patterns, err = addQueries(patterns, opts.sql, queries, func() ([]byte, bool) {
		if !sc.Scan() {
			return nil, false
		}
		line := append([]byte(nil), sc.Bytes()...)
		peeked = append(peeked, line)
		return line, true
	})
	if err != nil {
		return err
	}
	r := opts.newRunner(patterns)
	if r.IngestTime, err = ingestClock(opts.now); err != nil {
		return err
	}
	stopTrace := func() error { return nil }
	if on, _ := opts.trace.enabled(); on {
		if stopTrace, err = opts.trace.start(d, r); err != nil {
			return err
		}
	}
	defer func() { stopTrace() }() // on an error; the run's end reports the trace's own
	out := bufio.NewWriterSize(d.stdout, 64<<10)
	var buf []byte
	// events a pattern refused go to stderr, one JSON object a line, as a
	// cluster publishes them on cep.deadletter.<source>
	dead := func() {
		for _, dl := range r.DeadLetters() {
			b, _ := json.Marshal(dl)
			fmt.Fprintf(d.stderr, "cepctl: dead letter: %s\n", b)
		}
	}
	write := func(recs []nfa.Record) error {
		for i := range recs {
			if len(opts.records) > 0 && !slices.Contains(opts.records, recs[i].Type) {
				continue
			}
			buf = buf[:0]
			buf, _ = recs[i].AppendJSON(buf)
			buf = append(buf, '\n')
			if _, err := out.Write(buf); err != nil {
				return err
			}
		}
		return nil
	}
	for _, line := range peeked {
		recs, err := r.Line(line)
		if err != nil {
			out.Flush()
			return fmt.Errorf("%s: %w", inputName(opts.input), err)
		}
		dead()
		if err := write(recs); err != nil {
			return err
		}
	}
	for sc.Scan() {
		recs, err := r.Line(sc.Bytes())
		if err != nil {
			out.Flush()
			return fmt.Errorf("%s: %w", inputName(opts.input), err)
		}
		dead()
		if err := write(recs); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		out.Flush()
		if errors.Is(err, bufio.ErrTooLong) {
			return fmt.Errorf("%s: a line is longer than 16 MiB", inputName(opts.input))
		}
		return fmt.Errorf("read input: %w", err)
	}
	if err := write(r.Finish(opts.finalWatermark)); err != nil {
		return err
	}
	if err := out.Flush(); err != nil {
		return err
	}
	if err := stopTrace(); err != nil {
		return err
	}
	stopTrace = func() error { return nil }
	opts.warn(d.stderr, r)
	if opts.stats {
		writeStats(d.stderr, r)
	}
	return nil
}

func inputName(p string) string {
	if p == "-" {
		return "stdin"
	}
	return p
}

// readPatterns compiles the pattern files and reads the query files (they
// are compiled once the input's columns are known: compileQueries).
func (o *runOptions) readPatterns() ([]*nfa.Pattern, [][]byte, error) {
	patterns, err := compilePatternFiles(o.patterns)
	if err != nil {
		return nil, nil, err
	}
	queries, err := readQueryFiles(o.sql)
	if err != nil {
		return nil, nil, err
	}
	return patterns, queries, nil
}

// compilePatternFiles compiles pattern documents (JSON or YAML); an error
// names the file.
func compilePatternFiles(files []string) ([]*nfa.Pattern, error) {
	var patterns []*nfa.Pattern
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("read pattern: %w", err)
		}
		p, err := nfa.CompileBytes(b)
		if err == nil {
			err = p.CheckStageRefs()
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		patterns = append(patterns, p)
	}
	return patterns, nil
}

func readQueryFiles(files []string) ([][]byte, error) {
	queries := make([][]byte, len(files))
	for i, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("read query: %w", err)
		}
		queries[i] = b
	}
	return queries, nil
}

// addQueries compiles the queries read from files against the columns of
// the first event among the lines next yields (read only when there are
// queries) and appends them to patterns.
func addQueries(patterns []*nfa.Pattern, files []string, queries [][]byte, next func() ([]byte, bool)) ([]*nfa.Pattern, error) {
	var columns []string
	if len(queries) > 0 {
		for line, more := next(); more; line, more = next() {
			if cols, ok := columnsOf(line); ok {
				columns = cols
				break
			}
		}
	}
	qs, err := compileQueries(files, queries, columns)
	if err != nil {
		return nil, err
	}
	return append(patterns, qs...), nil
}

// columnsOf returns the sorted field names of an input line that is an
// event (not a watermark, not bad).
func columnsOf(line []byte) ([]string, bool) {
	in, _, isWM, err := nfa.ParseLine(line)
	if err != nil || isWM {
		return nil, false
	}
	var columns []string
	for k := range in.Data {
		columns = append(columns, k)
	}
	sort.Strings(columns)
	return columns, true
}

// compileQueries compiles MATCH_RECOGNIZE queries read from files, named
// after the files, checking their columns against the input's.
func compileQueries(files []string, queries [][]byte, columns []string) ([]*nfa.Pattern, error) {
	var patterns []*nfa.Pattern
	for i, f := range files {
		name := nfa.SanitizeName(strings.TrimSuffix(filepath.Base(f), filepath.Ext(f)))
		p, err := nfa.CompileSQLColumns(string(queries[i]), name, columns)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		patterns = append(patterns, p)
	}
	return patterns, nil
}

// lineScanner reads lines of up to 16 MiB.
func lineScanner(r io.Reader) *bufio.Scanner {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	return sc
}
