package nfa

import (
	"strings"
	"testing"
)

// A group must take an event: one whose every stage may be skipped
// (optional, times from 0, a group that may itself take nothing) is
// refused, naming the stage. Repeated, it sent the engine round the loop
// for ever on one event (cepctl run did not return); once, it matched
// twice what skipping it matches. One stage that must take an event is
// enough.
func TestGroupThatMayTakeNothing(t *testing.T) {
	doc := func(quant, inner string) string {
		return "name: h\nsource: s\nstages:\n  - name: a\n    where: e.t == \"A\"\n  - name: g\n" + quant + "    group:\n" + inner +
			"  - name: d\n    where: e.t == \"D\"\n"
	}
	optB := "      - name: b\n        where: e.t == \"B\"\n        optional: true\n"
	optC := "      - name: c\n        where: e.t == \"C\"\n        optional: true\n"
	zeroC := "      - name: c\n        where: e.t == \"C\"\n        times: [0, 2]\n"
	mustC := "      - name: c\n        where: e.t == \"C\"\n"
	nested := "      - name: inner\n        optional: true\n        group:\n          - name: x\n            where: e.t == \"X\"\n"
	for _, tt := range []struct {
		name, quant, inner string
		refused            bool
	}{
		{"oneOrMore, all optional", "    oneOrMore: true\n", optB + optC, true},
		{"timesOrMore, optional and times from 0", "    timesOrMore: 2\n", optB + zeroC, true},
		{"times, an optional group inside", "    times: 2\n", nested, true},
		{"oneOrMore, one stage that takes an event", "    oneOrMore: true\n", optB + mustC, false},
		{"once, all optional: what skipping it matches, twice", "    optional: true\n", optB + optC, true},
		{"once, all optional, not optional itself", "", optB + optC, true},
	} {
		_, err := CompileBytes([]byte(doc(tt.quant, tt.inner)))
		refused := err != nil && strings.Contains(err.Error(), `stage "g": field "group": a group must take an event`)
		if refused != tt.refused {
			t.Errorf("%s: %v", tt.name, err)
		}
	}
}
