package patterntest

import (
	"encoding/json"
	"fmt"
	"math/big"
	"sort"
	"strings"
)

// Compare matches the records a case produced (JSON lines) against the
// expected ones as multisets: each expected record takes one produced
// record that has every field it gives (objects compared partially, lists
// element by element), and every produced record must be taken. It
// returns the problems, a line each; none when they agree.
func Compare(expect []Expected, records []string) []string {
	got := make([]map[string]any, len(records))
	for i, r := range records {
		if err := decodeJSON([]byte(r), &got[i]); err != nil {
			return []string{fmt.Sprintf("record %s: %v", r, err)}
		}
	}
	ok := make([][]bool, len(expect))
	for i := range expect {
		ok[i] = make([]bool, len(got))
		for j := range got {
			ok[i][j] = len(diff("", expect[i].Value, got[j], nil)) == 0
		}
	}
	// a maximum matching (Kuhn's augmenting paths): a greedy one could
	// give a loose expectation the record a strict one needed
	owner := make([]int, len(got))
	for j := range owner {
		owner[j] = -1
	}
	var augment func(i int, seen []bool) bool
	augment = func(i int, seen []bool) bool {
		for j := range got {
			if ok[i][j] && !seen[j] {
				seen[j] = true
				if owner[j] < 0 || augment(owner[j], seen) {
					owner[j] = i
					return true
				}
			}
		}
		return false
	}
	matched := make([]bool, len(expect))
	for i := range expect {
		matched[i] = augment(i, make([]bool, len(got)))
	}
	var free []int // produced records no expectation took
	for j := range got {
		if owner[j] < 0 {
			free = append(free, j)
		}
	}
	var problems []string
	for i, e := range expect {
		if matched[i] {
			continue
		}
		p := fmt.Sprintf("expected record (line %d) not produced: %s", e.Line, e.JSON)
		// the closest record left over, else the closest of all
		cands := free
		if len(cands) == 0 {
			cands = make([]int, len(got))
			for j := range got {
				cands[j] = j
			}
		}
		best, bestD := -1, []string(nil)
		for _, j := range cands {
			d := diff("", e.Value, got[j], nil)
			if best < 0 || closer(d, bestD) {
				best, bestD = j, d
			}
		}
		problems = append(problems, p)
		if best >= 0 {
			problems = append(problems, fmt.Sprintf("  closest record produced (%s):", describe(got[best])))
			for _, d := range bestD {
				problems = append(problems, "    "+d)
			}
		} else {
			problems = append(problems, "  the case produced no record")
		}
	}
	for _, j := range free {
		problems = append(problems, "unexpected record: "+records[j])
	}
	return problems
}

// closer prefers the record that differs in fewer fields (the first
// produced of those that tie).
func closer(a, b []string) bool { return len(a) < len(b) }

// describe names a record by its type and key.
func describe(r map[string]any) string {
	return fmt.Sprintf("%v of key %s", r["type"], show(r["key"]))
}

// diff lists where got lacks or differs from want, by path ("fields.n").
func diff(path string, want, got any, out []string) []string {
	name := path
	if name == "" {
		name = "the record"
	}
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return append(out, fmt.Sprintf("%s: expected an object %s, got %s", name, show(want), show(got)))
		}
		keys := make([]string, 0, len(w))
		for k := range w {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			p := k
			if path != "" {
				p = path + "." + k
			}
			gv, has := g[k]
			if !has {
				out = append(out, fmt.Sprintf("%s: expected %s, the record has no such field", p, show(w[k])))
				continue
			}
			out = diff(p, w[k], gv, out)
		}
		return out
	case []any:
		g, ok := got.([]any)
		if !ok {
			return append(out, fmt.Sprintf("%s: expected a list %s, got %s", name, show(want), show(got)))
		}
		if len(w) != len(g) {
			return append(out, fmt.Sprintf("%s: expected %d elements, got %d: %s", name, len(w), len(g), show(got)))
		}
		for i := range w {
			out = diff(fmt.Sprintf("%s[%d]", path, i), w[i], g[i], out)
		}
		return out
	case json.Number:
		if g, ok := got.(json.Number); ok && sameNumber(w, g) {
			return out
		}
	default:
		if want == got {
			return out
		}
	}
	return append(out, fmt.Sprintf("%s: expected %s, got %s", name, show(want), show(got)))
}

// sameNumber compares JSON numbers exactly: 1 and 1.0 are the same.
func sameNumber(a, b json.Number) bool {
	if a == b {
		return true
	}
	x, ok1 := new(big.Rat).SetString(string(a))
	y, ok2 := new(big.Rat).SetString(string(b))
	return ok1 && ok2 && x.Cmp(y) == 0
}

func show(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	s := string(b)
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return strings.ReplaceAll(s, "\n", " ")
}
