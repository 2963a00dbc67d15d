package explain

import (
	"encoding/xml"
	"fmt"
	"strings"

	"github.com/cepcluster/cep/nfa"
)

// The SVG is laid out here rather than by Graphviz: an NFA of a pattern
// is a chain of stages with loops and skips, which reads well as one row
// of states left to right with forward transitions arching above it and
// backward ones below. That layout takes linear time in the automaton's
// size whatever pattern a server is asked to draw, and needs no Graphviz
// (nor a WebAssembly build of it) in cepctl and cepnode.

const (
	svgMargin   = 20
	svgGap      = 190 // between two states
	svgLine     = 14  // height of a label line
	svgNameChar = 7.2 // width of a 12px character, roughly
	svgNoteChar = 6.0 // of a 10px one
	svgLabelMax = 30  // characters of a condition drawn; the rest in the tooltip
)

type svgNode struct {
	x, w  float64
	lines []string
}

type svgEdge struct {
	from, to int // positions in the row
	e        nfa.AutomatonEdge
	lift     float64 // how far the arc rises (negative: falls)
}

func esc(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

var edgeColor = map[nfa.Action]string{nfa.ActionTake: "#222222", nfa.ActionIgnore: "#888888", nfa.ActionProceed: "#1f5fbf"}
var edgeDash = map[nfa.Action]string{nfa.ActionTake: "", nfa.ActionIgnore: ` stroke-dasharray="6,4"`, nfa.ActionProceed: ` stroke-dasharray="2,3"`}

// SVG draws the automaton: the states in a row in reading order (as Text
// lists them), each a box with its name and notes, and each transition an
// arrow labelled with its action and condition (clipped; the whole
// condition is the arrow's tooltip).
func SVG(a nfa.Automaton) string {
	ord, reached := order(a)
	pos := make([]int, len(a.States))
	nodes := make([]svgNode, len(ord))
	maxLines := 1
	x := float64(svgMargin + 30) // room for the start arrows
	for k, i := range ord {
		pos[i] = k
		s := a.States[i]
		n := svgNode{lines: append([]string{textName(s.Name)}, notes(s, reached[i])...)}
		n.w = max(90, float64(len([]rune(n.lines[0])))*svgNameChar+24)
		for _, l := range n.lines[1:] {
			n.w = max(n.w, float64(len([]rune(l)))*svgNoteChar+24)
		}
		if k > 0 {
			x += svgGap
		}
		n.x = x + n.w/2
		x += n.w
		maxLines = max(maxLines, len(n.lines))
		nodes[k] = n
	}
	width := x + svgMargin
	nodeH := float64(12 + svgLine*maxLines)

	// Arcs rise with the distance they span, and further for each other
	// arc between the same two states, so that labels do not sit on each
	// other; self loops stack below their state, backward arcs below them.
	var edges []svgEdge
	count := map[[2]int]int{}
	up, down := 0.0, 0.0
	for _, i := range ord {
		for _, e := range a.States[i].Edges {
			f, t := pos[i], pos[e.Target]
			key := [2]int{min(f, t), max(f, t)}
			if f == t {
				key = [2]int{f, f}
			}
			dup := float64(count[key])
			count[key]++
			span := float64(max(t-f, f-t))
			var lift float64
			switch {
			case f == t:
				lift = -(30 + 2*svgLine*dup)
			case t > f:
				lift = 22 + 24*(span-1) + 2*svgLine*dup
			default: // below the self loops
				lift = -(72 + 24*(span-1) + 2*svgLine*dup)
			}
			up, down = max(up, lift), max(down, -lift)
			edges = append(edges, svgEdge{from: f, to: t, e: e, lift: lift})
		}
	}
	top := float64(svgMargin+svgLine) + up + svgLine + 8
	y := top + nodeH/2 // the row's centre line
	height := y + nodeH/2 + down + svgLine + 8 + svgMargin

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="Helvetica, Arial, sans-serif">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, "<title>%s</title>\n<defs>\n", esc(a.Pattern))
	for _, act := range []nfa.Action{nfa.ActionTake, nfa.ActionIgnore, nfa.ActionProceed} {
		fmt.Fprintf(&b, `<marker id="arrow-%s" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="%s"/></marker>`+"\n", act, edgeColor[act])
	}
	b.WriteString("</defs>\n")
	fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="13" font-weight="bold">%s</text>`+"\n", svgMargin, svgMargin+4, esc(summary(a)))

	for _, ed := range edges {
		writeEdge(&b, nodes, ed, y, nodeH)
	}
	for k, i := range ord {
		writeNode(&b, a.States[i], nodes[k], y, nodeH)
	}
	b.WriteString("</svg>\n")
	return b.String()
}

func writeEdge(b *strings.Builder, nodes []svgNode, ed svgEdge, y, nodeH float64) {
	color, dash := edgeColor[ed.e.Action], edgeDash[ed.e.Action]
	label := string(ed.e.Action)
	if ed.e.Cond != "true" {
		label += ": " + clip(ed.e.Cond, svgLabelMax)
	}
	f, t := nodes[ed.from], nodes[ed.to]
	edge := fmt.Sprintf("%s: %s → %s if %s", ed.e.Action, f.lines[0], t.lines[0], ed.e.Cond)
	fmt.Fprintf(b, "<g class=\"edge %s\"><title>%s</title>", ed.e.Action, esc(edge))
	var path string
	var lx, ly float64
	switch {
	case ed.from == ed.to:
		y0 := y + nodeH/2
		path = fmt.Sprintf("M%.1f,%.1f C%.1f,%.1f %.1f,%.1f %.1f,%.1f", f.x+12, y0, f.x+40, y0-ed.lift, f.x-40, y0-ed.lift, f.x-12, y0)
		lx, ly = f.x, y0-ed.lift*0.75+svgLine
	case ed.lift > 0:
		y0 := y - nodeH/2
		x0, x1 := f.x+f.w/4, t.x-t.w/4
		path = fmt.Sprintf("M%.1f,%.1f Q%.1f,%.1f %.1f,%.1f", x0, y0, (x0+x1)/2, y0-2*ed.lift, x1, y0)
		lx, ly = (x0+x1)/2, y0-ed.lift-4
	default:
		y0 := y + nodeH/2
		x0, x1 := f.x-f.w/4, t.x+t.w/4
		path = fmt.Sprintf("M%.1f,%.1f Q%.1f,%.1f %.1f,%.1f", x0, y0, (x0+x1)/2, y0-2*ed.lift, x1, y0)
		lx, ly = (x0+x1)/2, y0-ed.lift+svgLine
	}
	fmt.Fprintf(b, `<path d="%s" fill="none" stroke="%s" stroke-width="1.3"%s marker-end="url(#arrow-%s)"/>`, path, color, dash, ed.e.Action)
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" font-size="10" text-anchor="middle" fill="%s">%s</text></g>`+"\n", lx, ly, color, esc(label))
}

func writeNode(b *strings.Builder, s nfa.AutomatonState, n svgNode, y, nodeH float64) {
	x0, y0 := n.x-n.w/2, y-nodeH/2
	stroke, extra := "#222222", ""
	switch s.Kind {
	case nfa.StateStop:
		stroke = "#c0392b"
	case nfa.StatePending:
		extra = ` stroke-dasharray="5,3"`
	}
	width := 1.3
	if s.Start {
		width = 2.5
	}
	fmt.Fprintf(b, "<g class=\"state %s\"><title>%s</title>", s.Kind, esc(strings.Join(n.lines, "; ")))
	fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" rx="8" fill="#ffffff" stroke="%s" stroke-width="%.1f"%s/>`, x0, y0, n.w, nodeH, stroke, width, extra)
	if s.Kind == nfa.StateFinal {
		fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" rx="6" fill="none" stroke="%s"/>`, x0+3, y0+3, n.w-6, nodeH-6, stroke)
	}
	if s.Start {
		fmt.Fprintf(b, `<path d="M%.1f,%.1f L%.1f,%.1f" stroke="#222222" stroke-width="1.3" marker-end="url(#arrow-take)"/>`, x0-28, y, x0, y)
	}
	ty := y - float64(len(n.lines)-1)*svgLine/2 + 4
	for k, l := range n.lines {
		size, weight, fill := 10, "normal", "#555555"
		if k == 0 {
			size, weight, fill = 12, "bold", stroke
		}
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" font-size="%d" font-weight="%s" text-anchor="middle" fill="%s">%s</text>`, n.x, ty+float64(k)*svgLine, size, weight, fill, esc(l))
	}
	b.WriteString("</g>\n")
}
