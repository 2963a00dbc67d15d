package explain_test

import (
	"encoding/xml"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/cepcluster/cep/internal/conformance"
	"github.com/cepcluster/cep/nfa"
	"github.com/cepcluster/cep/nfa/explain"
)

// edge is a transition as read back from a picture: from and to by state
// name.
type edge struct{ from, action, to, cond string }

func (e edge) String() string {
	return fmt.Sprintf("%s -%s-> %s if %s", e.from, e.action, e.to, e.cond)
}

// want lists the automaton's states and transitions, in the order the
// compiler made them and each state's transitions in the engine's order.
func want(a nfa.Automaton) (states []string, edges []edge) {
	for _, s := range a.States {
		states = append(states, s.Name)
		for _, e := range s.Edges {
			edges = append(edges, edge{s.Name, string(e.Action), a.States[e.Target].Name, e.Cond})
		}
	}
	return states, edges
}

// same reports how got differs from the automaton's states and edges:
// every state once, every transition of a state in its order.
func same(t *testing.T, what string, a nfa.Automaton, gotStates []string, gotEdges []edge) {
	t.Helper()
	ws, we := want(a)
	slices.Sort(ws)
	gs := slices.Sorted(slices.Values(gotStates))
	if !slices.Equal(ws, gs) {
		t.Errorf("%s: states %v, the automaton has %v", what, gs, ws)
	}
	// per state, the edges in order
	by := func(es []edge) map[string][]edge {
		m := map[string][]edge{}
		for _, e := range es {
			m[e.from] = append(m[e.from], e)
		}
		return m
	}
	wb, gb := by(we), by(gotEdges)
	for _, s := range ws {
		if !slices.Equal(wb[s], gb[s]) {
			t.Errorf("%s: state %s has transitions\n%v\nthe automaton has\n%v", what, s, gb[s], wb[s])
		}
	}
	if len(gotEdges) != len(we) {
		t.Errorf("%s: %d transitions, the automaton has %d", what, len(gotEdges), len(we))
	}
}

var (
	textEdge = regexp.MustCompile(`^  (take|ignore|proceed) +-> ("(?:[^"\\]|\\.)*"|\S+) +if (.*)$`)
	dotNode  = regexp.MustCompile(`^  n(\d+) \[label="((?:[^"\\]|\\.)*)"`)
	dotEdge  = regexp.MustCompile(`^  n(\d+) -> n(\d+) \[label="((?:[^"\\]|\\.)*)"`)
)

// readText reads the states and transitions back from Text.
func readText(t *testing.T, s string) (states []string, edges []edge) {
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	cur := ""
	for _, l := range lines[1:] {
		if m := textEdge.FindStringSubmatch(l); m != nil {
			edges = append(edges, edge{cur, m[1], unquote(t, m[2]), m[3]})
			continue
		}
		if strings.HasPrefix(l, " ") {
			t.Fatalf("text: unexpected line %q", l)
		}
		if q, err := strconv.QuotedPrefix(l); err == nil {
			cur = unquote(t, q)
		} else {
			cur, _, _ = strings.Cut(l, " (")
		}
		states = append(states, cur)
	}
	return states, edges
}

func unquote(t *testing.T, s string) string {
	if !strings.HasPrefix(s, `"`) {
		return s
	}
	u, err := strconv.Unquote(s)
	if err != nil {
		t.Fatalf("text: name %s: %v", s, err)
	}
	return u
}

// cutName reads a state's name as drawn off the front of s: a quoted
// one, or up to a space, ';' or a line's end.
func cutName(t *testing.T, s string) (name, rest string) {
	if q, err := strconv.QuotedPrefix(s); err == nil {
		return unquote(t, q), s[len(q):]
	}
	i := strings.IndexAny(s, " ;\n")
	if i < 0 {
		return s, ""
	}
	return s[:i], s[i:]
}

func undot(s string) string {
	return strings.NewReplacer(`\\`, `\`, `\"`, `"`, `\n`, "\n").Replace(s)
}

// readDot reads the states and transitions back from Dot.
func readDot(t *testing.T, s string) (states []string, edges []edge) {
	names := map[string]string{}
	for _, l := range strings.Split(s, "\n") {
		if m := dotNode.FindStringSubmatch(l); m != nil {
			name, _ := cutName(t, undot(m[2]))
			names[m[1]] = name
			states = append(states, name)
		}
	}
	for _, l := range strings.Split(s, "\n") {
		if m := dotEdge.FindStringSubmatch(l); m != nil {
			action, cond, _ := strings.Cut(undot(m[3]), "\n")
			from, ok1 := names[m[1]]
			to, ok2 := names[m[2]]
			if !ok1 || !ok2 {
				t.Fatalf("dot: edge %q between undeclared nodes", l)
			}
			edges = append(edges, edge{from, action, to, cond})
		}
	}
	return states, edges
}

// readSVG parses the SVG as XML and reads the states and transitions back
// from the titles of its groups.
func readSVG(t *testing.T, s string) (states []string, edges []edge) {
	d := xml.NewDecoder(strings.NewReader(s))
	var class string
	inTitle := false
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("svg: %v", err)
		}
		switch x := tok.(type) {
		case xml.StartElement:
			if x.Name.Local == "g" {
				for _, a := range x.Attr {
					if a.Name.Local == "class" {
						class = a.Value
					}
				}
			}
			inTitle = x.Name.Local == "title" && class != ""
		case xml.EndElement:
			inTitle = false
			if x.Name.Local == "g" {
				class = ""
			}
		case xml.CharData:
			if !inTitle {
				continue
			}
			text := string(x)
			switch kind, _, _ := strings.Cut(class, " "); kind {
			case "state":
				name, _ := cutName(t, text)
				states = append(states, name)
			case "edge":
				action, rest, _ := strings.Cut(text, ": ")
				from, rest := cutName(t, rest)
				to, rest := cutName(t, strings.TrimPrefix(rest, " → "))
				edges = append(edges, edge{from, action, to, strings.TrimPrefix(rest, " if ")})
			}
		}
	}
	return states, edges
}

func cases(t *testing.T) []*conformance.Case {
	cs, err := conformance.Load("../../testdata/conformance")
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func compileCase(c *conformance.Case) (*nfa.Pattern, error) {
	if c.IsSQL() {
		return nfa.CompileSQL(*c.SQL, "t")
	}
	return nfa.CompileBytes(c.Pattern)
}

// Every state and transition of each conformance pattern's automaton is
// in the text, the dot and the SVG, read back from each and compared with
// the automaton.
func TestEveryStateAndEdge(t *testing.T) {
	n := 0
	for _, c := range cases(t) {
		p, err := compileCase(c)
		if err != nil {
			continue // a case of a refused pattern
		}
		n++
		t.Run(c.File, func(t *testing.T) {
			a := p.Automaton()
			x := explain.Pattern(p)
			s, e := readText(t, x.Text)
			same(t, "text", a, s, e)
			s, e = readDot(t, x.Dot)
			same(t, "dot", a, s, e)
			s, e = readSVG(t, x.SVG)
			same(t, "svg", a, s, e)
		})
	}
	if n < 150 {
		t.Fatalf("only %d conformance patterns compiled", n)
	}
}

// The pictures are a function of the automaton: the same pattern compiled
// twice draws the same bytes.
func TestDeterministic(t *testing.T) {
	for _, c := range cases(t)[:40] {
		p1, err := compileCase(c)
		if err != nil {
			continue
		}
		p2, _ := compileCase(c)
		if explain.Pattern(p1) != explain.Pattern(p2) {
			t.Errorf("%s: two compilations draw differently", c.File)
		}
	}
}

// Golden pictures of the conformance patterns, in testdata/*.txt:
//
//	explain case=FILE [format=text|dot]
//
// Regenerate with -rewrite and review the diff.
func TestGolden(t *testing.T) {
	byFile := map[string]*conformance.Case{}
	for _, c := range cases(t) {
		byFile[c.File] = c
	}
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			var file, format string
			d.ScanArgs(t, "case", &file)
			format = "text"
			if d.HasArg("format") {
				d.ScanArgs(t, "format", &format)
			}
			c := byFile[file]
			if c == nil {
				d.Fatalf(t, "no conformance case %s", file)
			}
			p, err := compileCase(c)
			if err != nil {
				return "error: " + err.Error() + "\n"
			}
			x := explain.Pattern(p)
			switch format {
			case "text":
				return x.Text
			case "dot":
				return x.Dot
			}
			d.Fatalf(t, "unknown format %s", strconv.Quote(format))
			return ""
		})
	})
}

// Names and conditions with what XML, dot and a terminal treat specially
// come out escaped: the SVG still parses, and every form reads back the
// automaton.
func TestAwkwardNames(t *testing.T) {
	doc := `{"name": "p", "within": "1m", "stages": [
		{"name": "a \"q\" <b> & c\\\\d", "where": "e.s == \"<&>\\n\\u0001\""},
		{"name": "two\nlines\u0001", "where": "e.t != '\\\\'"}]}`
	p, err := nfa.CompileBytes([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	a := p.Automaton()
	x := explain.Pattern(p)
	s, e := readText(t, x.Text)
	same(t, "text", a, s, e)
	s, e = readDot(t, x.Dot)
	same(t, "dot", a, s, e)
	s, e = readSVG(t, x.SVG)
	same(t, "svg", a, s, e)
}
