package nfa_test

// Scenario tests in testdata/scenarios/*.txt, run with
// github.com/cockroachdb/datadriven. Regenerate with -rewrite and review
// the diff.
//
// Commands (one matcher per file, replaced by each `pattern`):
//
//	pattern            the input is a pattern document (YAML or JSON);
//	                   prints the automaton with `describe`, else "ok" or the error
//	events [source=S]  each input line is an event or {"$watermark": T};
//	                   prints the records produced, one JSON line each; with
//	                   source=S the event comes from source S of several
//	tick t=T           logged processing time advances to T
//	watermark t=T      advances the watermark
//	finish [final=false]
//	                   ends the input
//	state              prints keys, partial matches and buffered events per key
//	stop-starting      the matcher finishes its partial matches, starts none
//	roundtrip          encodes the state, decodes it into a fresh matcher that
//	                   replaces the current one, and checks the bytes are stable

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/cepcluster/cep/nfa"
)

func TestScenarios(t *testing.T) {
	datadriven.Walk(t, "testdata/scenarios", func(t *testing.T, path string) {
		var m *nfa.Matcher
		var p *nfa.Pattern
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			if d.Cmd != "pattern" && m == nil {
				d.Fatalf(t, "no pattern yet")
			}
			records := func(recs []nfa.Record) string {
				var sb strings.Builder
				for i := range recs {
					b, _ := recs[i].AppendJSON(nil)
					sb.Write(b)
					sb.WriteByte('\n')
				}
				return sb.String()
			}
			switch d.Cmd {
			case "pattern":
				var err error
				p, err = nfa.CompileBytes([]byte(d.Input))
				if err != nil {
					m = nil
					return err.Error() + "\n"
				}
				m = nfa.NewMatcher(p)
				if d.HasArg("describe") {
					return p.Describe()
				}
				return "ok\n"
			case "events":
				var sb strings.Builder
				for _, line := range strings.Split(d.Input, "\n") {
					if strings.TrimSpace(line) == "" {
						continue
					}
					in, wm, isWM, err := nfa.ParseLine([]byte(line))
					if err != nil {
						fmt.Fprintf(&sb, "error: %v\n", err)
						continue
					}
					if isWM {
						sb.WriteString(records(m.Watermark(wm)))
						continue
					}
					var recs []nfa.Record
					if d.HasArg("source") {
						var src string
						d.ScanArgs(t, "source", &src)
						key, err1 := m.KeyOf(in)
						ts, err2 := m.TimeOf(in)
						if err1 != nil || err2 != nil {
							fmt.Fprintf(&sb, "error: %v %v\n", err1, err2)
							continue
						}
						recs = m.EventFrom(src, key, ts, in)
					} else {
						recs, err = m.Event(in)
						if err != nil {
							fmt.Fprintf(&sb, "error: %v\n", err)
							continue
						}
					}
					sb.WriteString(records(recs))
				}
				return sb.String()
			case "tick":
				var ts int64
				d.ScanArgs(t, "t", &ts)
				return records(m.Tick(ts))
			case "watermark":
				var ts int64
				d.ScanArgs(t, "t", &ts)
				return records(m.Watermark(ts))
			case "finish":
				final := true
				if d.HasArg("final") {
					d.ScanArgs(t, "final", &final)
				}
				return records(m.Finish(final))
			case "state":
				var sb strings.Builder
				pm, be := m.Totals()
				fmt.Fprintf(&sb, "keys=%d partial=%d buffered=%d watermark=%d\n", m.Keys(), pm, be, m.CurrentWatermark())
				for _, k := range m.SortedKeys() {
					pm, be := m.KeyState(k)
					fmt.Fprintf(&sb, "  %q: partial=%d buffered=%d\n", k, pm, be)
				}
				return sb.String()
			case "stats":
				st := m.Stats()
				cond, emit := m.FirstErrors()
				return fmt.Sprintf("events=%d late=%d matches=%d timeouts=%d condition-errors=%d emit-errors=%d dropped=%d\nfirst condition error: %s\nfirst emit error: %s\n",
					st.Events, st.Late, st.Matches, st.Timeouts, st.ConditionErrors, st.EmitErrors, st.Dropped, cond, emit)
			case "stop-starting":
				m.StopStarting()
				return "ok\n"
			case "roundtrip":
				b, err := m.MarshalBinary()
				if err != nil {
					d.Fatalf(t, "%v", err)
				}
				m2, err := nfa.UnmarshalMatcher(p, b)
				if err != nil {
					d.Fatalf(t, "%v", err)
				}
				b2, _ := m2.MarshalBinary()
				if !bytes.Equal(b, b2) {
					d.Fatalf(t, "state bytes changed by decode+encode")
				}
				m = m2
				return fmt.Sprintf("ok (%d bytes)\n", len(b))
			}
			d.Fatalf(t, "unknown command %s", d.Cmd)
			return ""
		})
	})
}
