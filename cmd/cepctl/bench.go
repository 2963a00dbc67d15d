package main

import (
	"bufio"
	"cmp"
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"

	"github.com/cepcluster/cep/nfa"
)

type benchOptions struct {
	runOptions
	repeat     int
	cpuProfile string
}

func newBenchCmd(d *deps, runF func(*benchOptions) error) *cobra.Command {
	opts := &benchOptions{}
	cmd := &cobra.Command{
		Use:   "bench (-p PATTERN | --sql QUERY)... [-i FILE|-] [--repeat N]",
		Short: "Measure how fast patterns run offline over a file of JSON events",
		Long: `Run patterns over JSON events as cepctl run does — each line parsed, its
key and time computed, matched, and every output record encoded as JSON —
but discard the records and report the time it took: lines per second,
microseconds and allocations per line, records produced. The input is read
into memory before anything is timed; each of the --repeat runs starts from
fresh state, and the median and best runs are printed last. --cpuprofile
writes a profile of the runs for go tool pprof.`,
		Example: `  cepctl bench -p examples/login-fail-logout.yaml -i examples/events.jsonl --repeat 5`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(opts.patterns) == 0 && len(opts.sql) == 0 {
				return errors.New("bench: give at least one pattern with -p FILE or a query with --sql FILE")
			}
			if opts.repeat < 1 {
				return fmt.Errorf("bench: --repeat must be at least 1, got %d", opts.repeat)
			}
			if runF != nil {
				return runF(opts)
			}
			return runBench(d, opts)
		},
	}
	opts.addFlags(cmd)
	cmd.Flags().IntVar(&opts.repeat, "repeat", 3, "number of timed runs over the input")
	cmd.Flags().StringVar(&opts.cpuProfile, "cpuprofile", "", "write a CPU profile of the timed runs to this file (go tool pprof)")
	return cmd
}

// benchRun is what one timed run over the input measured.
type benchRun struct {
	elapsed time.Duration
	records int
	bytes   int // of the records' JSON, a newline each
	allocs  uint64
}

func runBench(d *deps, opts *benchOptions) error {
	patterns, queries, err := opts.readPatterns()
	if err != nil {
		return err
	}
	lines, size, err := readLines(d, opts.input)
	if err != nil {
		return err
	}
	next := 0
	patterns, err = addQueries(patterns, opts.sql, queries, func() ([]byte, bool) {
		if next == len(lines) {
			return nil, false
		}
		next++
		return lines[next-1], true
	})
	if err != nil {
		return err
	}
	w := d.stdout
	fmt.Fprintf(w, "input:   %s: %s lines, %s bytes; %d pattern(s)\n", inputName(opts.input), group(uint64(len(lines))), group(uint64(size)), len(patterns))
	if opts.cpuProfile != "" {
		f, err := os.Create(opts.cpuProfile)
		if err != nil {
			return fmt.Errorf("cpu profile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("cpu profile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	var runs []benchRun
	for i := range opts.repeat {
		runner := opts.newRunner(patterns)
		r, err := benchOnce(runner, lines, opts.finalWatermark)
		if err != nil {
			return fmt.Errorf("%s: %w", inputName(opts.input), err)
		}
		runs = append(runs, r)
		fmt.Fprintf(w, "run %d:   %s\n", i+1, r.describe(len(lines)))
		if i == 0 {
			opts.warn(d.stderr, runner)
		}
	}
	slices.SortFunc(runs, func(a, b benchRun) int { return cmp.Compare(a.elapsed, b.elapsed) })
	fmt.Fprintf(w, "median:  %s\n", runs[len(runs)/2].describe(len(lines)))
	fmt.Fprintf(w, "best:    %s\n", runs[0].describe(len(lines)))
	return nil
}

// readLines reads the whole input, a line each (blank ones included: the
// runner skips them, as cepctl run does).
func readLines(d *deps, input string) (lines [][]byte, size int, err error) {
	in, _, err := openInput(d, input)
	if err != nil {
		return nil, 0, err
	}
	defer in.Close()
	sc := lineScanner(in)
	for sc.Scan() {
		lines = append(lines, append([]byte(nil), sc.Bytes()...))
		size += len(sc.Bytes()) + 1
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, 0, fmt.Errorf("%s: a line is longer than 16 MiB", inputName(input))
		}
		return nil, 0, fmt.Errorf("read input: %w", err)
	}
	return lines, size, nil
}

// benchOnce runs a fresh runner over the lines, encoding every record as
// cepctl run would print it.
func benchOnce(r *nfa.Runner, lines [][]byte, final bool) (benchRun, error) {
	var res benchRun
	var buf []byte
	encode := func(recs []nfa.Record) {
		for i := range recs {
			buf, _ = recs[i].AppendJSON(buf[:0])
			res.bytes += len(buf) + 1
		}
		res.records += len(recs)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	for _, l := range lines {
		recs, err := r.Line(l)
		if err != nil {
			return res, err
		}
		encode(recs)
	}
	encode(r.Finish(final))
	res.elapsed = time.Since(start)
	runtime.ReadMemStats(&after)
	res.allocs = after.Mallocs - before.Mallocs
	return res, nil
}

func (r benchRun) describe(lines int) string {
	secs := r.elapsed.Seconds()
	perSec, perLine, allocs := 0.0, 0.0, 0.0
	if secs > 0 {
		perSec = float64(lines) / secs
	}
	if lines > 0 {
		perLine = secs * 1e6 / float64(lines)
		allocs = float64(r.allocs) / float64(lines)
	}
	return fmt.Sprintf("%s, %s lines/s, %.2f µs/line, %.1f allocations/line; %s records (%s bytes of JSON)",
		r.elapsed.Round(time.Microsecond), group(uint64(perSec)), perLine, allocs, group(uint64(r.records)), group(uint64(r.bytes)))
}

// group writes n with thousands separators.
func group(n uint64) string { return humanize.Comma(int64(n)) }
