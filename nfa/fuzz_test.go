package nfa_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/cepcluster/cep/nfa"
)

// FuzzCompileSpec: any document gives a compiled pattern or an error, never a
// panic; a compiled pattern runs over a small input without panicking.
func FuzzCompileSpec(f *testing.F) {
	seeds, _ := filepath.Glob("../testdata/conformance/cases/*/*.json")
	for _, s := range seeds {
		b, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	if b, err := os.ReadFile("../examples/login-fail-logout.yaml"); err == nil {
		f.Add(b)
	}
	f.Add([]byte(`{"name":"p","stages":[{"name":"a","times":[0,2]},{"name":"b","contiguity":"notFollowedBy"}],"within":"1s"}`))
	f.Add([]byte("name: p\nstages:\n - name: a\n   group:\n    - name: b\n   oneOrMore: true\n"))
	f.Fuzz(func(t *testing.T, doc []byte) {
		p, err := nfa.CompileBytes(doc)
		if err != nil {
			if p != nil {
				t.Fatal("pattern and error")
			}
			return
		}
		r := nfa.NewRunner(p)
		for _, l := range []string{`{"id":"1","ts":1,"name":"a"}`, `{"$watermark":3}`, `{"id":"2","ts":5,"name":"b"}`} {
			r.Line([]byte(l))
		}
		r.Finish(true)
	})
}

// FuzzInputLine: any input line gives an event, a watermark or an error.
func FuzzInputLine(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `{"$watermark":5}`, `{"$watermark":"x"}`, `[1]`, `{"a":1e400}`, `{"a":{"b":[1,2,{"c":null}]}}`, ``} {
		f.Add([]byte(s))
	}
	p, err := nfa.CompileBytes([]byte(`{"name":"p","key":"e.k","time":"e.ts","stages":[{"name":"a","where":"e.x > 1"},{"name":"b","oneOrMore":true}],"within":10}`))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		if _, _, _, err := nfa.ParseLine(line); err != nil {
			return
		}
		r := nfa.NewRunner(p)
		r.Line(line)
		r.Finish(true)
	})
}

// FuzzUnmarshalMatcher: damaged state is refused, never a panic; state that
// decodes keeps working. Every input is decoded for three patterns: one
// with a loop (nodes shared by event and stage), a plain followedByAny
// sequence (a node per partial match) and a sequence of followedBy and
// next stages (the last two run per start event), seeded with a state of
// each.
func FuzzUnmarshalMatcher(f *testing.F) {
	var ps []*nfa.Pattern
	for _, doc := range []string{
		`{"name":"p","key":"e.k","time":"e.ts","within":50,"stages":[{"name":"a","where":"e.t == \"A\""},{"name":"b","oneOrMore":true,"where":"e.t == \"B\""},{"name":"c","where":"e.t == \"C\""}]}`,
		`{"name":"q","key":"e.k","time":"e.ts","within":50,"stages":[{"name":"a","where":"e.t == \"A\""},{"name":"b","contiguity":"followedByAny","where":"e.t == \"B\""},{"name":"c","contiguity":"followedByAny","where":"e.t == \"C\""}]}`,
		`{"name":"r","key":"e.k","time":"e.ts","within":50,"skip":"skipToNext","stages":[{"name":"a","where":"e.t == \"A\""},{"name":"b","contiguity":"followedBy","where":"e.t == \"B\""},{"name":"c","contiguity":"next","where":"e.t == \"B\" || e.t == \"C\""}]}`,
	} {
		p, err := nfa.CompileBytes([]byte(doc))
		if err != nil {
			f.Fatal(err)
		}
		ps = append(ps, p)
		m := nfa.NewMatcher(p)
		for i, ev := range []string{`{"k":"x","t":"A","ts":1}`, `{"k":"x","t":"B","ts":2}`, `{"k":"y","t":"A","ts":3}`, `{"k":"x","t":"B","ts":4}`, `{"k":"x","t":"A","ts":5}`, `{"k":"x","t":"B","ts":6}`} {
			in, _, _, _ := nfa.ParseLine([]byte(ev))
			in.Pos = uint64(i + 1)
			m.Event(in)
		}
		st, _ := m.MarshalBinary()
		f.Add(st)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, p := range ps {
			m2, err := nfa.UnmarshalMatcher(p, data)
			if err != nil {
				continue
			}
			for _, ev := range []string{`{"k":"x","t":"B","ts":9}`, `{"k":"x","t":"C","ts":10}`} {
				in, _, _, _ := nfa.ParseLine([]byte(ev))
				m2.Event(in)
			}
			m2.Finish(true)
		}
	})
}
