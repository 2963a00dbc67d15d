package patterntest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/cepcluster/cep/nfa"
)

// Result is what one case did.
type Result struct {
	File string
	Case string
	Line int
	// Records are the records the case produced, as JSON lines.
	Records []string
	// Problems say how the records differ from the expected ones, a line
	// each (indented lines belong to the one before); none: it passed.
	Problems []string
	// Err is an error running the case (a bad event, a query that does
	// not compile against the case's columns).
	Err error
}

// Passed reports whether the case produced exactly the records expected.
func (r *Result) Passed() bool { return r.Err == nil && len(r.Problems) == 0 }

// Run runs every case of the file against its pattern. An error is the
// pattern's (it cannot be read or does not compile); a case's own trouble
// is in its Result.
func (f *File) Run() ([]Result, error) {
	src, err := os.ReadFile(f.Pattern)
	if err != nil {
		return nil, fmt.Errorf("%s: read the pattern: %w", f.Path, err)
	}
	var p *nfa.Pattern
	if !f.SQL {
		p, err = nfa.CompileBytes(src)
		if err == nil {
			err = p.CheckStageRefs()
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %s", f.Pattern, oneLine(err))
		}
	}
	var out []Result
	for _, c := range f.Cases {
		res := Result{File: f.Path, Case: c.Name, Line: c.Line}
		cp := p
		if f.SQL {
			// a query's columns are the first event's, as `cepctl run` takes them
			name := nfa.SanitizeName(strings.TrimSuffix(filepath.Base(f.Pattern), filepath.Ext(f.Pattern)))
			var cols []string
			for _, e := range c.Events {
				if in, _, isWM, err := nfa.ParseLine(e); err == nil && !isWM {
					for k := range in.Data {
						cols = append(cols, k)
					}
					sort.Strings(cols)
					break
				}
			}
			if cp, err = nfa.CompileSQLColumns(string(src), name, cols); err != nil {
				return nil, fmt.Errorf("%s: %s", f.Pattern, oneLine(err))
			}
		}
		res.Records, res.Err = runCase(cp, c)
		if res.Err == nil {
			res.Problems = Compare(c.Expect, res.Records)
		}
		out = append(out, res)
	}
	return out, nil
}

// runCase feeds a case's events to a fresh runner: every record, and as
// records of type "deadletter" the events the pattern refused.
func runCase(p *nfa.Pattern, c Case) ([]string, error) {
	cfg := nfa.DefaultConfig()
	cfg.ReportTimeouts = true
	r := nfa.NewRunnerWith(cfg, p)
	var out []string
	var buf []byte
	add := func(recs []nfa.Record) {
		for i := range recs {
			buf, _ = recs[i].AppendJSON(buf[:0])
			out = append(out, string(buf))
		}
	}
	for i, e := range c.Events {
		recs, err := r.Line(e)
		if err != nil {
			return out, fmt.Errorf("events[%d]: %s", i, oneLine(err))
		}
		for _, dl := range r.DeadLetters() {
			b, _ := json.Marshal(dl)
			out = append(out, `{"type":"deadletter",`+string(b[1:]))
		}
		add(recs)
	}
	add(r.Finish(c.FinalWatermark))
	return out, nil
}

func oneLine(err error) string { return strings.ReplaceAll(err.Error(), "\n", "; ") }
