package patterntest

import (
	"slices"
	"strconv"
	"strings"
	"testing"
)

// Records are paired by type, key and events; the rest decides whether a
// pair is the same or changed; a record without a partner is only one
// version's. Duplicates count as many times as they come.
func TestDiffRecords(t *testing.T) {
	m := func(key string, ts, total int) string {
		return `{"type":"match","pattern":"p","key":"` + key + `","start":1,"end":2,"events":{"a":[{"ts":` + strconv.Itoa(ts) + `}]},"fields":{"total":` + strconv.Itoa(total) + `}}`
	}
	to := func(key string, at int) string {
		return `{"type":"timeout","pattern":"p","key":"` + key + `","start":1,"timeoutAt":` + strconv.Itoa(at) + `,"events":{"a":[{"ts":1}]}}`
	}
	old := []string{m("x", 1, 10), m("x", 1, 10), m("y", 1, 5), to("z", 100), m("w", 1, 1)}
	new := []string{m("x", 1, 10), m("y", 1, 6), to("z", 50), m("v", 1, 1), strings.Replace(m("x", 1, 10), `"total":10`, `"total":10.0`, 1)}
	d, err := DiffRecords(old, new)
	if err != nil {
		t.Fatal(err)
	}
	if d.Same != 2 || d.Old != 5 || d.New != 5 {
		t.Errorf("same %d (want 2: x twice, once as 10.0), counts %d %d", d.Same, d.Old, d.New)
	}
	if len(d.OnlyNew) != 1 || !strings.Contains(string(d.OnlyNew[0]), `"key":"v"`) {
		t.Errorf("only new: %s", d.OnlyNew)
	}
	if len(d.OnlyOld) != 1 || !strings.Contains(string(d.OnlyOld[0]), `"key":"w"`) {
		t.Errorf("only old: %s", d.OnlyOld)
	}
	var changes []string
	for _, c := range d.Changed {
		changes = append(changes, c.Fields...)
	}
	if want := []string{"fields.total: 5 → 6", "timeoutAt: 100 → 50"}; !slices.Equal(changes, want) {
		t.Errorf("changes %q, want %q", changes, want)
	}
	if d.Empty() {
		t.Error("a diff with differences is empty")
	}
	if d, _ := DiffRecords(old, old); !d.Empty() || d.Same != len(old) {
		t.Errorf("old against itself: %+v", d)
	}
}
