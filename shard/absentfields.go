package shard

import "strings"

// AbsentField is a field a pattern reads that no event of its sources
// has had on this replica since it built the pattern: Events counts the
// events without it. A misspelt field: a query's column reads as NULL
// and a condition counts as false, so the pattern matches nothing with
// no other sign.
type AbsentField struct {
	Path   string
	Events uint64
}

// absentFields watches, for one deployed version, the fields its pattern
// reads (nfa.Pattern.FieldsRead) until each has been seen once. Not part
// of the replicated state (like the condition errors): it counts what
// this replica applied.
type absentFields struct {
	paths   [][]string
	names   []string
	seen    []bool
	missing []uint64
	open    int // fields not seen yet
}

func newAbsentFields(fields []string) *absentFields {
	a := &absentFields{names: fields, seen: make([]bool, len(fields)), missing: make([]uint64, len(fields)), open: len(fields)}
	for _, f := range fields {
		a.paths = append(a.paths, strings.Split(f, "."))
	}
	return a
}

// observe counts the fields event lacks, while no event had them.
func (a *absentFields) observe(event map[string]any) {
	if a.open == 0 {
		return
	}
	for i, path := range a.paths {
		if a.seen[i] {
			continue
		}
		if hasPath(event, path) {
			a.seen[i] = true
			a.open--
			continue
		}
		a.missing[i]++
	}
}

// list returns the fields no event has had, with the events without
// them, in path order.
func (a *absentFields) list() []AbsentField {
	if a == nil {
		return nil
	}
	var out []AbsentField
	for i, n := range a.names {
		if !a.seen[i] && a.missing[i] > 0 {
			out = append(out, AbsentField{Path: n, Events: a.missing[i]})
		}
	}
	return out
}

func hasPath(m map[string]any, path []string) bool {
	for i, p := range path {
		v, ok := m[p]
		if !ok {
			return false
		}
		if i == len(path)-1 {
			return true
		}
		if m, ok = v.(map[string]any); !ok {
			return false
		}
	}
	return true
}
