// Package explain draws a compiled pattern's NFA: its states, the take,
// ignore and proceed transitions between them with their conditions, the
// windows and the skip strategy. It renders the same picture as text for a
// terminal, as Graphviz dot, and as SVG laid out here.
//
// Everything is read from the compiled automaton (nfa.Pattern.Automaton),
// not from the document, so the picture is what the engine runs. The
// package is pure: the output is a function of the automaton alone.
package explain

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/cepcluster/cep/nfa"
)

// Explanation is one pattern's picture in every form.
type Explanation struct {
	Text, Dot, SVG string
}

// Pattern explains a compiled pattern.
func Pattern(p *nfa.Pattern) Explanation {
	a := p.Automaton()
	return Explanation{Text: Text(a), Dot: Dot(a), SVG: SVG(a)}
}

// order lists the states as a reader follows them: from the start states
// along the transitions in the order the engine tries them, then any
// state not reached that way (reached tells which). The compiler makes
// them from the last stage back, which reads backwards.
func order(a nfa.Automaton) (out []int, reached []bool) {
	seen := make([]bool, len(a.States))
	var queue []int
	for i, s := range a.States {
		if s.Start {
			seen[i] = true
			queue = append(queue, i)
		}
	}
	for len(queue) > 0 {
		i := queue[0]
		queue = queue[1:]
		out = append(out, i)
		for _, e := range a.States[i].Edges {
			if !seen[e.Target] {
				seen[e.Target] = true
				queue = append(queue, e.Target)
			}
		}
	}
	reached = slices.Clone(seen)
	for i := range a.States {
		if !seen[i] {
			out = append(out, i)
		}
	}
	return out, reached
}

// duration writes ms as the largest whole unit: 5m, 90s, 1500ms.
func duration(ms int64) string {
	for _, u := range []struct {
		n    int64
		unit string
	}{{86_400_000, "d"}, {3_600_000, "h"}, {60_000, "m"}, {1000, "s"}} {
		if ms%u.n == 0 {
			return fmt.Sprintf("%d%s", ms/u.n, u.unit)
		}
	}
	return fmt.Sprintf("%dms", ms)
}

// summary is the line on what acts on every state.
func summary(a nfa.Automaton) string {
	s := fmt.Sprintf("pattern %s: %d states", a.Pattern, len(a.States))
	if a.Window > 0 {
		s += ", within " + duration(a.Window) + " of the first event"
	} else {
		s += ", no window on the whole match"
	}
	return s + ", after a match " + a.Skip
}

// notes are what a state is besides a place to wait, for its label.
func notes(s nfa.AutomatonState, reached bool) []string {
	var out []string
	if !reached {
		// a copy the compiler made and no transition leads to
		out = append(out, "unreachable")
	}
	if s.Start {
		out = append(out, "start")
	}
	switch s.Kind {
	case nfa.StateFinal:
		out = append(out, "final: match")
	case nfa.StateStop:
		out = append(out, "stop: drops the partial match")
	case nfa.StatePending:
		out = append(out, "pending: matches once its window passes")
	}
	if s.Window > 0 {
		out = append(out, "within "+duration(s.Window)+" of the previous event")
	}
	return out
}

// textName is a state's name as drawn: quoted when it has characters
// other than a name's usual ones (a stage "not c"), so that every name
// reads as one word.
func textName(s string) string {
	for _, r := range s {
		if !(r == '_' || r == '-' || r == ':' || r == '$' || r == '.' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return strconv.Quote(s)
		}
	}
	if s == "" {
		return `""`
	}
	return s
}

// Text is the automaton for a terminal: a summary line, then each state
// with what it is and its transitions, one a line.
func Text(a nfa.Automaton) string {
	var b strings.Builder
	b.WriteString(summary(a))
	b.WriteString("\n")
	width := 0
	for _, s := range a.States {
		width = max(width, len(textName(s.Name)))
	}
	ord, reached := order(a)
	for _, i := range ord {
		s := a.States[i]
		b.WriteString(textName(s.Name))
		if n := notes(s, reached[i]); len(n) > 0 {
			b.WriteString(" (" + strings.Join(n, "; ") + ")")
		}
		b.WriteString("\n")
		for _, e := range s.Edges {
			fmt.Fprintf(&b, "  %-7s -> %-*s if %s\n", e.Action, width, textName(a.States[e.Target].Name), e.Cond)
		}
	}
	return b.String()
}

// dotString quotes s as a dot string.
func dotString(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\r", ``)
	return `"` + r.Replace(s) + `"`
}

// Dot is the automaton as a Graphviz digraph: a node per state (n<index
// into a.States>) labelled with its name and notes, an edge per
// transition labelled with its action and condition; takes are solid,
// ignores dashed, proceeds dotted.
func Dot(a nfa.Automaton) string {
	var b strings.Builder
	fmt.Fprintf(&b, "digraph %s {\n", dotString(a.Pattern))
	fmt.Fprintf(&b, "  label=%s;\n  labelloc=t;\n  rankdir=LR;\n", dotString(summary(a)))
	b.WriteString("  node [shape=box, style=rounded, fontname=\"Helvetica\"];\n  edge [fontname=\"Helvetica\", fontsize=10];\n")
	ord, reached := order(a)
	for _, i := range ord {
		s := a.States[i]
		label := strings.Join(append([]string{textName(s.Name)}, notes(s, reached[i])...), "\n")
		attrs := "label=" + dotString(label)
		switch s.Kind {
		case nfa.StateFinal:
			attrs += ", peripheries=2"
		case nfa.StateStop:
			attrs += ", color=red, fontcolor=red"
		case nfa.StatePending:
			attrs += ", style=\"rounded,dashed\""
		}
		if s.Start {
			attrs += ", penwidth=2"
		}
		fmt.Fprintf(&b, "  n%d [%s];\n", i, attrs)
	}
	for _, i := range ord {
		if a.States[i].Start {
			fmt.Fprintf(&b, "  start%d [shape=point, label=\"\"];\n  start%d -> n%d;\n", i, i, i)
		}
	}
	for _, i := range ord {
		for _, e := range a.States[i].Edges {
			style := ""
			switch e.Action {
			case nfa.ActionIgnore:
				style = ", style=dashed"
			case nfa.ActionProceed:
				style = ", style=dotted"
			}
			fmt.Fprintf(&b, "  n%d -> n%d [label=%s%s];\n", i, e.Target, dotString(string(e.Action)+"\n"+e.Cond), style)
		}
	}
	b.WriteString("}\n")
	return b.String()
}
