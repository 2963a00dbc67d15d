package conformance

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Case is one conformance case.
type Case struct {
	File           string            `json:"-"`
	Name           string            `json:"name"`
	From           string            `json:"from"`
	Note           string            `json:"note"`
	Pattern        json.RawMessage   `json:"pattern"`
	SQL            *string           `json:"sql"`
	Input          []json.RawMessage `json:"input"`
	FinalWatermark *bool             `json:"finalWatermark"`
	Expect         Expect            `json:"expect"`
	Skip           bool              `json:"skip"`
}

// Expect is what Flink produced.
type Expect struct {
	Matches  []json.RawMessage `json:"matches"`
	Timeouts []json.RawMessage `json:"timeouts"`
	Late     []string          `json:"late"`
	Rows     []json.RawMessage `json:"rows"`
	Error    *string           `json:"error"`
	Ordered  bool              `json:"ordered"`

	hasTimeouts, hasLate, hasMatches, hasRows bool
}

// UnmarshalJSON notes which fields are present (absent differs from empty).
func (e *Expect) UnmarshalJSON(b []byte) error {
	type plain Expect
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	*e = Expect(p)
	_, e.hasTimeouts = m["timeouts"]
	_, e.hasLate = m["late"]
	_, e.hasMatches = m["matches"]
	_, e.hasRows = m["rows"]
	return nil
}

// Final reports whether a final watermark is applied at the end.
func (c *Case) Final() bool { return c.FinalWatermark == nil || *c.FinalWatermark }

// IsSQL reports whether the case is a MATCH_RECOGNIZE query.
func (c *Case) IsSQL() bool { return c.SQL != nil && *c.SQL != "" }

// Load reads every case below dir, sorted by path.
func Load(dir string) ([]*Case, error) {
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".json") {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	var out []*Case
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var c Case
		if err := json.Unmarshal(b, &c); err != nil {
			return nil, fmt.Errorf("%s: %v", f, err)
		}
		rel, _ := filepath.Rel(dir, f)
		c.File = rel
		out = append(out, &c)
	}
	return out, nil
}

// InputLines renders the input as JSON lines.
func (c *Case) InputLines() []byte {
	var b bytes.Buffer
	for _, in := range c.Input {
		if err := json.Compact(&b, in); err != nil {
			b.Write(in)
		}
		b.WriteByte('\n')
	}
	return b.Bytes()
}

type match struct {
	flat  bool
	items []string // "stage=id,id" or ids
}

func (m match) String() string { return strings.Join(m.items, " ") }

func (m match) equal(o match) bool {
	if len(m.items) != len(o.items) {
		return false
	}
	for i := range m.items {
		if m.items[i] != o.items[i] {
			return false
		}
	}
	return true
}

func parseExpected(raw json.RawMessage) (match, error) {
	var flat []string
	if err := json.Unmarshal(raw, &flat); err == nil {
		sort.Strings(flat)
		return match{flat: true, items: flat}, nil
	}
	var staged map[string][]string
	if err := json.Unmarshal(raw, &staged); err != nil {
		return match{}, fmt.Errorf("bad expected match %s", raw)
	}
	return stagedMatch(staged), nil
}

func stagedMatch(m map[string][]string) match {
	var items []string
	for k, v := range m {
		if len(v) == 0 {
			continue
		}
		items = append(items, k+"="+strings.Join(v, ","))
	}
	sort.Strings(items)
	return match{items: items}
}

func (m match) flatten(staged map[string][]string) match {
	var ids []string
	for _, v := range staged {
		ids = append(ids, v...)
	}
	sort.Strings(ids)
	return match{flat: true, items: ids}
}

// Record is an output record as decoded from JSON.
type Record struct {
	Type      string                       `json:"type"`
	Events    map[string][]json.RawMessage `json:"events"`
	Fields    map[string]json.RawMessage   `json:"fields"`
	Event     json.RawMessage              `json:"event"`
	TimeoutAt *int64                       `json:"timeoutAt"`
}

func eventID(raw json.RawMessage) string {
	var e struct {
		ID any `json:"id"`
	}
	_ = json.Unmarshal(raw, &e)
	switch v := e.ID.(type) {
	case string:
		return v
	case nil:
		return ""
	default:
		b, _ := json.Marshal(v)
		return string(b)
	}
}

func ids(evs map[string][]json.RawMessage) map[string][]string {
	out := map[string][]string{}
	for k, v := range evs {
		for _, e := range v {
			out[k] = append(out[k], eventID(e))
		}
	}
	return out
}

func compareMatches(expected []json.RawMessage, actual []map[string][]string, ordered bool) (bool, string) {
	exp := make([]match, len(expected))
	for i, e := range expected {
		m, err := parseExpected(e)
		if err != nil {
			return false, err.Error()
		}
		exp[i] = m
	}
	got := func(e match, a map[string][]string) match {
		if e.flat {
			return e.flatten(a)
		}
		return stagedMatch(a)
	}
	if ordered {
		if len(exp) != len(actual) {
			return false, fmt.Sprintf("%d matches, want %d", len(actual), len(exp))
		}
		for i := range exp {
			if g := got(exp[i], actual[i]); !g.equal(exp[i]) {
				return false, fmt.Sprintf("match %d is [%s], want [%s]", i, g, exp[i])
			}
		}
		return true, ""
	}
	remaining := append([]map[string][]string(nil), actual...)
	for _, e := range exp {
		hit := -1
		for j, a := range remaining {
			if got(e, a).equal(e) {
				hit = j
				break
			}
		}
		if hit < 0 {
			var all []string
			for _, a := range actual {
				all = append(all, "["+stagedMatch(a).String()+"]")
			}
			return false, fmt.Sprintf("missing match [%s]; got %s", e, strings.Join(all, " "))
		}
		remaining = append(remaining[:hit], remaining[hit+1:]...)
	}
	if len(remaining) > 0 {
		return false, fmt.Sprintf("%d unexpected matches, e.g. [%s]", len(remaining), stagedMatch(remaining[0]))
	}
	return true, ""
}

func normRow(raw json.RawMessage) (string, error) {
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return "", err
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		v := m[k]
		if f, ok := v.(float64); ok && f == float64(int64(f)) {
			v = int64(f)
		}
		b, _ := json.Marshal(v)
		parts = append(parts, k+"="+string(b))
	}
	return strings.Join(parts, ","), nil
}

// CheckRecords judges the output records of a run that succeeded.
func (c *Case) CheckRecords(recs []Record) (bool, string) {
	var matches []map[string][]string
	var rows []json.RawMessage
	var timeouts []Record
	var late []string
	for _, r := range recs {
		switch r.Type {
		case "match":
			matches = append(matches, ids(r.Events))
			f, _ := json.Marshal(r.Fields)
			if r.Fields == nil {
				f = []byte("{}")
			}
			rows = append(rows, f)
		case "timeout":
			timeouts = append(timeouts, r)
		case "late":
			late = append(late, eventID(r.Event))
		}
	}
	e := &c.Expect
	if e.hasMatches {
		if ok, why := compareMatches(e.Matches, matches, e.Ordered); !ok {
			return false, why
		}
	}
	if e.hasRows {
		want := make([]string, len(e.Rows))
		got := make([]string, len(rows))
		for i, r := range e.Rows {
			want[i], _ = normRow(r)
		}
		for i, r := range rows {
			got[i], _ = normRow(r)
		}
		if !e.Ordered {
			sort.Strings(want)
			sort.Strings(got)
		}
		if strings.Join(want, "|") != strings.Join(got, "|") {
			return false, fmt.Sprintf("rows %v, want %v", got, want)
		}
	}
	if e.hasTimeouts {
		var want []json.RawMessage
		allAt := true
		type wantAt struct {
			m  match
			at int64
		}
		var wats []wantAt
		for _, t := range e.Timeouts {
			var obj struct {
				Events json.RawMessage `json:"events"`
				At     *int64          `json:"at"`
			}
			if json.Unmarshal(t, &obj) == nil && obj.Events != nil {
				want = append(want, obj.Events)
				m, _ := parseExpected(obj.Events)
				if obj.At == nil {
					allAt = false
				} else {
					wats = append(wats, wantAt{m, *obj.At})
				}
			} else {
				want = append(want, t)
				allAt = false
			}
		}
		var got []map[string][]string
		for _, t := range timeouts {
			got = append(got, ids(t.Events))
		}
		if ok, why := compareMatches(want, got, false); !ok {
			return false, "timeouts: " + why
		}
		if allAt {
			var ws, gs []string
			for _, w := range wats {
				ws = append(ws, fmt.Sprintf("%s@%d", w.m, w.at))
			}
			for _, t := range timeouts {
				at := int64(-1)
				if t.TimeoutAt != nil {
					at = *t.TimeoutAt
				}
				gs = append(gs, fmt.Sprintf("%s@%d", stagedMatch(ids(t.Events)), at))
			}
			sort.Strings(ws)
			sort.Strings(gs)
			if strings.Join(ws, "|") != strings.Join(gs, "|") {
				return false, fmt.Sprintf("timeout times %v, want %v", gs, ws)
			}
		}
	}
	if e.hasLate {
		w := append([]string(nil), e.Late...)
		sort.Strings(w)
		sort.Strings(late)
		if strings.Join(w, ",") != strings.Join(late, ",") {
			return false, fmt.Sprintf("late %v, want %v", late, w)
		}
	}
	return true, ""
}

// CheckError judges a rejected pattern: it must be expected, and the message
// should contain the expected text.
func (c *Case) CheckError(msg string) (ok bool, why string) {
	if c.Expect.Error == nil {
		return false, "rejected: " + msg
	}
	if !strings.Contains(strings.ToLower(msg), strings.ToLower(*c.Expect.Error)) {
		return true, fmt.Sprintf("rejected, but the message %q lacks %q", msg, *c.Expect.Error)
	}
	return true, ""
}
