package watermark

// Scenario tests driven by the files in testdata/ (github.com/cockroachdb/datadriven).
// Regenerate expected output with: go test ./watermark/ -run TestDataDriven -rewrite
//
// Each file holds one scenario; the commands below act on the file's current
// Generator, Queue[string] and Aligner. Times (<t>) are integers or the
// symbols min / max, optionally with an offset (min+3, max-1); outputs print
// times the same way (offsets for values within 1e9 of the extremes).
//
// Generator:
//
//	gen ooo=<n>                   new Generator; prints its watermark
//	observe ts=<t> | ts=(<t>, …)  for each ts: lateness before observing, then
//	                              Observe's watermark and advanced flag
//	advance wm=<t>                explicit watermark: new watermark, advanced flag
//	late ts=(<t>, …)              IsLate for each ts
//	gen-roundtrip                 MarshalBinary → UnmarshalBinary into a fresh
//	                              Generator (which replaces the current one);
//	                              checks the bytes re-encode identically and
//	                              prints them in hex
//
// Queue (of string values):
//
//	queue                         new empty Queue
//	push ts=<t> v=<s>             push one item; or, without args, one item
//	                              per input line "<t> <s>"; prints len and min
//	pop wm=<t>                    PopUpTo: one line per popped item, then len/min
//	items                         Items: one line per queued item
//	push-in-pop wm=<t>            PopUpTo whose callback Pushes; prints the panic
//
// Aligner:
//
//	aligner sources=(a, b) idle=<n> drift=<n>
//	                              new Aligner (idle, drift default to 0)
//	observe-src src=<s> wm=<t> now=<n>
//	                              Aligner.Observe; prints the source's watermark
//	watermark now=<n>             Aligner.Watermark (records the value)
//	status now=<n>                Peek (no state change), then per source: its
//	                              watermark, idle and paused flags
//	aligner-roundtrip             as gen-roundtrip, for the Aligner
//
// Any command that panics prints "panic: <value>" instead of its output.

import (
	"encoding/hex"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

const nearExtreme = 1_000_000_000

func fmtTime(t int64) string {
	switch {
	case t == MinTime:
		return "min"
	case t == MaxTime:
		return "max"
	case t < MinTime+nearExtreme:
		return "min+" + strconv.FormatInt(t-MinTime, 10)
	case t > MaxTime-nearExtreme:
		return "max-" + strconv.FormatInt(MaxTime-t, 10)
	}
	return strconv.FormatInt(t, 10)
}

func parseTime(s string) (int64, error) {
	s = strings.TrimSpace(s)
	base, rest := int64(0), s
	switch {
	case strings.HasPrefix(s, "min"):
		base, rest = MinTime, s[3:]
	case strings.HasPrefix(s, "max"):
		base, rest = MaxTime, s[3:]
	}
	if rest == s {
		return strconv.ParseInt(s, 10, 64)
	}
	if rest == "" {
		return base, nil
	}
	off, err := strconv.ParseInt(rest, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("bad time %q: %w", s, err)
	}
	if (base == MinTime && off < 0) || (base == MaxTime && off > 0) {
		return 0, fmt.Errorf("time %q out of range", s)
	}
	return base + off, nil
}

type ddState struct {
	gen *Generator
	q   *Queue[string]
	al  *Aligner
}

func TestDataDriven(t *testing.T) {
	// Glob rather than datadriven.Walk so that testdata/fuzz (Go's fuzz
	// corpus directory) is not mistaken for scenarios.
	paths, err := filepath.Glob(filepath.Join("testdata", "*.txt"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no scenario files: %v", err)
	}
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			st := &ddState{}
			datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) (out string) {
				defer func() {
					if r := recover(); r != nil {
						out = fmt.Sprintf("panic: %v\n", r)
					}
				}()
				return st.run(t, td)
			})
		})
	}
}

func times(t *testing.T, td *datadriven.TestData, key string) []int64 {
	t.Helper()
	arg, ok := td.Arg(key)
	if !ok || len(arg.Vals) == 0 {
		td.Fatalf(t, "missing argument %s", key)
	}
	out := make([]int64, len(arg.Vals))
	for i, v := range arg.Vals {
		ts, err := parseTime(v)
		if err != nil {
			td.Fatalf(t, "%s: %v", key, err)
		}
		out[i] = ts
	}
	return out
}

func oneTime(t *testing.T, td *datadriven.TestData, key string) int64 {
	t.Helper()
	ts := times(t, td, key)
	if len(ts) != 1 {
		td.Fatalf(t, "%s: want one value", key)
	}
	return ts[0]
}

func optTime(t *testing.T, td *datadriven.TestData, key string) int64 {
	t.Helper()
	if !td.HasArg(key) {
		return 0
	}
	return oneTime(t, td, key)
}

func (st *ddState) queueSummary(b *strings.Builder) {
	fmt.Fprintf(b, "len=%d", st.q.Len())
	if m, ok := st.q.MinTime(); ok {
		fmt.Fprintf(b, " min=%s", fmtTime(m))
	}
	b.WriteString("\n")
}

func (st *ddState) run(t *testing.T, td *datadriven.TestData) string {
	var b strings.Builder
	switch td.Cmd {
	case "gen":
		st.gen = NewGenerator(oneTime(t, td, "ooo"))
		fmt.Fprintf(&b, "wm=%s\n", fmtTime(st.gen.Current()))

	case "observe":
		for _, ts := range times(t, td, "ts") {
			late := st.gen.IsLate(ts)
			wm, adv := st.gen.Observe(ts)
			fmt.Fprintf(&b, "ts=%s late=%t -> wm=%s advanced=%t\n", fmtTime(ts), late, fmtTime(wm), adv)
		}

	case "advance":
		adv := st.gen.Advance(oneTime(t, td, "wm"))
		fmt.Fprintf(&b, "wm=%s advanced=%t\n", fmtTime(st.gen.Current()), adv)

	case "late":
		for _, ts := range times(t, td, "ts") {
			fmt.Fprintf(&b, "ts=%s late=%t\n", fmtTime(ts), st.gen.IsLate(ts))
		}

	case "gen-roundtrip":
		data, err := st.gen.MarshalBinary()
		if err != nil {
			td.Fatalf(t, "marshal: %v", err)
		}
		var g Generator
		if err := g.UnmarshalBinary(data); err != nil {
			td.Fatalf(t, "unmarshal: %v", err)
		}
		again, _ := g.MarshalBinary()
		if string(again) != string(data) {
			td.Fatalf(t, "re-encoding differs: %x vs %x", again, data)
		}
		if g != *st.gen {
			td.Fatalf(t, "decoded %+v, want %+v", g, *st.gen)
		}
		st.gen = &g
		fmt.Fprintf(&b, "%s\n", hex.EncodeToString(data))

	case "queue":
		st.q = &Queue[string]{}
		st.queueSummary(&b)

	case "push":
		if td.HasArg("ts") {
			var v string
			td.ScanArgs(t, "v", &v)
			st.q.Push(oneTime(t, td, "ts"), v)
		} else {
			for _, line := range strings.Split(strings.TrimSpace(td.Input), "\n") {
				f := strings.Fields(line)
				if len(f) != 2 {
					td.Fatalf(t, "bad push line %q", line)
				}
				ts, err := parseTime(f[0])
				if err != nil {
					td.Fatalf(t, "%v", err)
				}
				st.q.Push(ts, f[1])
			}
		}
		st.queueSummary(&b)

	case "pop":
		st.q.PopUpTo(oneTime(t, td, "wm"), func(ts int64, v string) {
			fmt.Fprintf(&b, "%s %s\n", fmtTime(ts), v)
		})
		st.queueSummary(&b)

	case "items":
		st.q.Items(func(ts int64, v string) {
			fmt.Fprintf(&b, "%s %s\n", fmtTime(ts), v)
		})
		st.queueSummary(&b)

	case "push-in-pop":
		st.q.PopUpTo(oneTime(t, td, "wm"), func(ts int64, v string) {
			st.q.Push(ts, v+"'")
		})
		st.queueSummary(&b)

	case "aligner":
		arg, ok := td.Arg("sources")
		if !ok {
			td.Fatalf(t, "missing sources")
		}
		st.al = NewAligner(arg.Vals, optTime(t, td, "idle"), optTime(t, td, "drift"))
		fmt.Fprintf(&b, "sources=%s wm=%s\n", strings.Join(st.al.Sources(), ","), fmtTime(st.al.Peek(0)))

	case "observe-src":
		var src string
		td.ScanArgs(t, "src", &src)
		st.al.Observe(src, oneTime(t, td, "wm"), oneTime(t, td, "now"))
		fmt.Fprintf(&b, "%s: wm=%s\n", src, fmtTime(st.al.SourceWatermark(src)))

	case "watermark":
		fmt.Fprintf(&b, "wm=%s\n", fmtTime(st.al.Watermark(oneTime(t, td, "now"))))

	case "status":
		now := oneTime(t, td, "now")
		fmt.Fprintf(&b, "peek=%s\n", fmtTime(st.al.Peek(now)))
		for _, s := range st.al.Sources() {
			fmt.Fprintf(&b, "%s: wm=%s idle=%t paused=%t\n", s,
				fmtTime(st.al.SourceWatermark(s)), st.al.Idle(s, now), st.al.Paused(s, now))
		}

	case "aligner-roundtrip":
		data, err := st.al.MarshalBinary()
		if err != nil {
			td.Fatalf(t, "marshal: %v", err)
		}
		var a Aligner
		if err := a.UnmarshalBinary(data); err != nil {
			td.Fatalf(t, "unmarshal: %v", err)
		}
		again, _ := a.MarshalBinary()
		if string(again) != string(data) {
			td.Fatalf(t, "re-encoding differs: %x vs %x", again, data)
		}
		st.al = &a
		fmt.Fprintf(&b, "%s\n", hex.EncodeToString(data))

	default:
		td.Fatalf(t, "unknown command %q", td.Cmd)
	}
	return b.String()
}
