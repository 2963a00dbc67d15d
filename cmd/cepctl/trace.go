package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/spf13/cobra"

	"github.com/cepcluster/cep/nfa"
)

// traceOptions are run's --trace flags: the engine's decisions, for a
// person or a tool, apart from the records.
type traceOptions struct {
	on       bool
	out      string   // file; "": stderr
	format   string   // text or json
	keys     []string // only these keys (empty: all)
	patterns []string // only these patterns (empty: all)
}

func (o *traceOptions) addFlags(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&o.on, "trace", false, "write what the engine decides for each event (conditions, partial matches started, extended, completed, dropped and why) to stderr, or to --trace-out")
	cmd.Flags().StringVar(&o.out, "trace-out", "", "write the trace to this file instead of stderr (implies --trace)")
	cmd.Flags().StringVar(&o.format, "trace-format", "text", "trace format: text (one block per event) or json (one object a line)")
	cmd.Flags().StringArrayVar(&o.keys, "trace-key", nil, "trace only this key; repeatable (implies --trace)")
	cmd.Flags().StringArrayVar(&o.keys, "key", nil, "the same as --trace-key")
	cmd.Flags().StringArrayVar(&o.patterns, "trace-pattern", nil, "trace only the pattern of this name; repeatable (implies --trace)")
}

// enabled reports whether a trace is asked for, checking the flags.
func (o *traceOptions) enabled() (bool, error) {
	on := o.on || o.out != "" || len(o.keys) > 0 || len(o.patterns) > 0
	if o.format != "text" && o.format != "json" {
		return false, fmt.Errorf("--trace-format %q: use text or json", o.format)
	}
	return on, nil
}

// start sets the runner's tracer, checking --trace-pattern against the
// patterns; stop flushes and closes what it writes to.
func (o *traceOptions) start(d *deps, r *nfa.Runner) (stop func() error, err error) {
	names := map[string]bool{}
	for _, m := range r.Matchers() {
		names[m.Pattern().Name()] = true
	}
	for _, p := range o.patterns {
		if !names[p] {
			return nil, fmt.Errorf("--trace-pattern %q: no pattern of that name runs (%s)", p, joinSorted(names))
		}
	}
	var w io.Writer = d.stderr
	var f *os.File
	if o.out != "" {
		if f, err = os.Create(o.out); err != nil {
			return nil, fmt.Errorf("--trace-out: %w", err)
		}
		w = f
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	tw := nfa.NewTraceWriter(bw, o.format == "json")
	tw.ShowPattern = len(r.Matchers()) > 1
	if len(o.keys) > 0 || len(o.patterns) > 0 {
		tw.Keep = func(e *nfa.TraceEntry) bool {
			return (len(o.keys) == 0 || slices.Contains(o.keys, e.Key)) &&
				(len(o.patterns) == 0 || slices.Contains(o.patterns, e.Pattern))
		}
	}
	r.SetTracer(tw.Trace)
	return func() error {
		tw.Flush()
		err := tw.Err()
		if ferr := bw.Flush(); err == nil {
			err = ferr
		}
		if f != nil {
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			return fmt.Errorf("write trace: %w", err)
		}
		return nil
	}, nil
}

func joinSorted(names map[string]bool) string {
	var l []string
	for n := range names {
		l = append(l, n)
	}
	slices.Sort(l)
	s := ""
	for i, n := range l {
		if i > 0 {
			s += ", "
		}
		s += n
	}
	return s
}
