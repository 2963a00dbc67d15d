package patterntest

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// RecordDiff is how two versions of a pattern's records over the same
// events differ. A record is known by its type, key and events (a late
// record by its event); records alike in those but not in the rest (start,
// end, timeoutAt, fields) are Changed.
type RecordDiff struct {
	OnlyNew []json.RawMessage `json:"onlyNew"`
	OnlyOld []json.RawMessage `json:"onlyDeployed"`
	Changed []ChangedRecord   `json:"changed"`
	Same    int               `json:"same"`
	New     int               `json:"newRecords"`
	Old     int               `json:"deployedRecords"`
}

// ChangedRecord is a record both versions produce, with other values.
type ChangedRecord struct {
	Old    json.RawMessage `json:"deployed"`
	New    json.RawMessage `json:"new"`
	Fields []string        `json:"differences"` // "fields.amount: 12 → 13"
}

// Empty reports whether the versions agree.
func (d *RecordDiff) Empty() bool {
	return len(d.OnlyNew) == 0 && len(d.OnlyOld) == 0 && len(d.Changed) == 0
}

// DiffRecords compares the records of the deployed version (old) and the
// new one, JSON each, as multisets. The pattern's name is not compared.
func DiffRecords(old, new []string) (*RecordDiff, error) {
	d := &RecordDiff{Old: len(old), New: len(new), OnlyNew: []json.RawMessage{}, OnlyOld: []json.RawMessage{}, Changed: []ChangedRecord{}}
	type rec struct {
		raw  string
		v    map[string]any
		rest string // what is compared once the identity agrees
	}
	byID := map[string][]rec{}
	var order []string // identities in the order the old version made them
	parse := func(s string) (string, rec, error) {
		var v map[string]any
		if err := decodeJSON([]byte(s), &v); err != nil {
			return "", rec{}, fmt.Errorf("record %s: %v", s, err)
		}
		id, _ := json.Marshal([]any{v["type"], v["key"], v["events"], v["event"]})
		rest, _ := json.Marshal([]any{v["start"], v["end"], v["timeoutAt"], v["fields"]})
		return string(id), rec{raw: s, v: v, rest: string(rest)}, nil
	}
	for _, s := range old {
		id, r, err := parse(s)
		if err != nil {
			return nil, err
		}
		if len(byID[id]) == 0 {
			order = append(order, id)
		}
		byID[id] = append(byID[id], r)
	}
	var unpaired []rec // new records with no old one of their identity
	for _, s := range new {
		id, r, err := parse(s)
		if err != nil {
			return nil, err
		}
		olds := byID[id]
		// the same record if there is one, else any of the identity
		i := -1
		for j := range olds {
			if olds[j].rest == r.rest {
				i = j
				break
			}
		}
		switch {
		case i >= 0:
			d.Same++
		case len(olds) > 0:
			i = 0
			if c := changes(olds[0].v, r.v); len(c) > 0 {
				d.Changed = append(d.Changed, ChangedRecord{Old: json.RawMessage(olds[0].raw), New: json.RawMessage(r.raw), Fields: c})
			} else {
				d.Same++ // alike but for how a number is written
			}
		default:
			unpaired = append(unpaired, r)
			continue
		}
		byID[id] = append(olds[:i:i], olds[i+1:]...)
	}
	for _, r := range unpaired {
		d.OnlyNew = append(d.OnlyNew, json.RawMessage(r.raw))
	}
	for _, id := range order {
		for _, r := range byID[id] {
			d.OnlyOld = append(d.OnlyOld, json.RawMessage(r.raw))
		}
	}
	return d, nil
}

// changes lists the values that differ between two records of the same
// identity, "path: old → new", the emitted fields one by one.
func changes(old, new map[string]any) []string {
	var out []string
	for _, k := range []string{"start", "end", "timeoutAt"} {
		if show(old[k]) != show(new[k]) {
			out = append(out, fmt.Sprintf("%s: %s → %s", k, showOrNone(old[k]), showOrNone(new[k])))
		}
	}
	of, _ := old["fields"].(map[string]any)
	nf, _ := new["fields"].(map[string]any)
	names := map[string]bool{}
	for k := range of {
		names[k] = true
	}
	for k := range nf {
		names[k] = true
	}
	sorted := make([]string, 0, len(names))
	for k := range names {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	for _, k := range sorted {
		ov, oh := of[k]
		nv, nh := nf[k]
		if oh != nh || !sameValue(ov, nv) {
			out = append(out, fmt.Sprintf("fields.%s: %s → %s", k, showIf(ov, oh), showIf(nv, nh)))
		}
	}
	return out
}

func sameValue(a, b any) bool {
	if x, ok := a.(json.Number); ok {
		y, ok := b.(json.Number)
		return ok && sameNumber(x, y)
	}
	return show(a) == show(b)
}

func showOrNone(v any) string { return showIf(v, v != nil) }

func showIf(v any, has bool) string {
	if !has {
		return "(none)"
	}
	return show(v)
}

// Summary is the counts in a line.
func (d *RecordDiff) Summary() string {
	parts := []string{
		fmt.Sprintf("deployed version %d records, new version %d", d.Old, d.New),
		fmt.Sprintf("%d the same", d.Same),
		fmt.Sprintf("%d only new", len(d.OnlyNew)),
		fmt.Sprintf("%d only deployed", len(d.OnlyOld)),
		fmt.Sprintf("%d changed", len(d.Changed)),
	}
	return strings.Join(parts, ", ")
}
