package nfa_test

// The trace's text and JSON forms, in testdata/trace/*.txt, run with
// github.com/cockroachdb/datadriven. Regenerate with -rewrite and review
// the diff.
//
// Commands:
//
//	pattern                 the input is a pattern document; later runs use it
//	run [json] [final=false]
//	                        each input line is an event or {"$watermark": T}, run
//	                        through a new runner to the end of the input; prints
//	                        the records, then the trace (text, or JSON lines)

import (
	"bytes"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/cepcluster/cep/nfa"
)

func TestTraceText(t *testing.T) {
	datadriven.Walk(t, "testdata/trace", func(t *testing.T, path string) {
		var p *nfa.Pattern
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			switch d.Cmd {
			case "pattern":
				var err error
				if p, err = nfa.CompileBytes([]byte(d.Input)); err != nil {
					d.Fatalf(t, "%v", err)
				}
				return "ok\n"
			case "run":
				if p == nil {
					d.Fatalf(t, "no pattern yet")
				}
				final := true
				if d.HasArg("final") {
					var f string
					d.ScanArgs(t, "final", &f)
					final = f != "false"
				}
				var sb strings.Builder
				sb.WriteString("records:\n")
				var trace bytes.Buffer
				tw := nfa.NewTraceWriter(&trace, d.HasArg("json"))
				r := nfa.NewRunner(p)
				r.SetTracer(tw.Trace)
				_, js := runTraced(t, r, bytes.Split([]byte(strings.TrimSpace(d.Input)), []byte("\n")), final)
				tw.Flush()
				if tw.Err() != nil {
					d.Fatalf(t, "%v", tw.Err())
				}
				for _, j := range js {
					sb.WriteString(j)
					sb.WriteByte('\n')
				}
				sb.WriteString("trace:\n")
				sb.Write(trace.Bytes())
				return sb.String()
			}
			d.Fatalf(t, "unknown command %s", d.Cmd)
			return ""
		})
	})
}
