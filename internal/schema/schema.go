// Package schema is what a source may declare of its events: the fields
// they carry and each field's JSON type. A person writes it as a YAML (or
// JSON) map of field to type, or as a JSON Schema subset; cepctl infers
// one from sample events. Patterns reading the source are checked against
// it before they are deployed (a misspelt field is named, with the
// closest declared one). Check says why an event does not fit one.
//
// The simple form maps each field to a type, nested maps declaring the
// fields of an object, a type ending in "?" an optional field:
//
//	account: string
//	amount: number
//	note: string?
//	card:
//	  country: string
//
// The JSON Schema form is an object schema: "properties" (nested for
// objects), "type" and "required"; other keywords are ignored. Types:
// string, number, integer, boolean, object, array, null and any.
package schema

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// Types are the field types a schema may name.
var Types = []string{"string", "number", "integer", "boolean", "object", "array", "null", "any"}

// Field is one declared field: its dotted path from the event's top
// level, its type, and whether an event may lack it. An object's fields
// follow it (path "card", then "card.country"); an object without any
// declared accepts any fields under it.
type Field struct {
	Path     string `json:"path"`
	Type     string `json:"type"`
	Optional bool   `json:"optional,omitempty"`
}

// Schema is a source's declared fields, sorted by path. A nil Schema
// declares nothing (every field is allowed).
type Schema []Field

// MaxFields bounds a schema's fields, so that what a source stores in the
// replicated metadata stays small.
const MaxFields = 1000

// Parse reads a schema in either form (see the package comment).
func Parse(data []byte) (Schema, error) {
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("schema: %v", err)
	}
	var doc map[string]any
	if err := json.Unmarshal(js, &doc); err != nil {
		return nil, errors.New("schema: not a map of field to type (or a JSON Schema object)")
	}
	var s Schema
	if _, ok := doc["properties"]; ok {
		err = s.fromJSONSchema("", doc)
	} else {
		err = s.fromMap("", doc)
	}
	if err != nil {
		return nil, err
	}
	if len(s) == 0 {
		return nil, errors.New("schema: declares no field")
	}
	if len(s) > MaxFields {
		return nil, fmt.Errorf("schema: %d fields, over the limit of %d", len(s), MaxFields)
	}
	slices.SortFunc(s, func(a, b Field) int { return strings.Compare(a.Path, b.Path) })
	return s, nil
}

func (s *Schema) fromMap(prefix string, m map[string]any) error {
	for name, v := range m {
		path := prefix + name
		switch v := v.(type) {
		case map[string]any:
			*s = append(*s, Field{Path: path, Type: "object"})
			if err := s.fromMap(path+".", v); err != nil {
				return err
			}
		case string:
			t, opt := strings.CutSuffix(strings.TrimSpace(v), "?")
			if !slices.Contains(Types, t) {
				return fmt.Errorf("schema: field %q: unknown type %q (one of %s, optional with a trailing ?)", path, v, strings.Join(Types, ", "))
			}
			*s = append(*s, Field{Path: path, Type: t, Optional: opt})
		default:
			return fmt.Errorf("schema: field %q: a type (one of %s) or a map of its fields, not %s", path, strings.Join(Types, ", "), jsonKind(v))
		}
	}
	return nil
}

func (s *Schema) fromJSONSchema(prefix string, obj map[string]any) error {
	props, ok := obj["properties"].(map[string]any)
	if !ok {
		return fmt.Errorf("schema: %sproperties: not an object", prefix)
	}
	required := map[string]bool{}
	if rs, ok := obj["required"].([]any); ok {
		for _, r := range rs {
			if n, ok := r.(string); ok {
				required[n] = true
			}
		}
	}
	for name, v := range props {
		path := prefix + name
		p, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("schema: property %q: not an object", path)
		}
		t := "any"
		switch tv := p["type"].(type) {
		case string:
			t = tv
		case []any: // ["string", "null"]: a nullable field
			var ts []string
			for _, x := range tv {
				if n, ok := x.(string); ok && n != "null" {
					ts = append(ts, n)
				}
			}
			if len(ts) == 1 {
				t = ts[0]
			}
		case nil:
			if _, ok := p["properties"]; ok {
				t = "object"
			}
		}
		if !slices.Contains(Types, t) {
			return fmt.Errorf("schema: property %q: unknown type %q", path, t)
		}
		*s = append(*s, Field{Path: path, Type: t, Optional: !required[name]})
		if _, ok := p["properties"]; ok && t == "object" {
			if err := s.fromJSONSchema(path+".", p); err != nil {
				return err
			}
		}
	}
	return nil
}

// Infer returns the schema the events share: every field any of them
// has, with the type they agree on ("any" where they differ, "number"
// for integers and fractions mixed), optional where some event lacks it.
func Infer(events []map[string]any) Schema {
	type seen struct {
		t string
		n int
	}
	fields := map[string]*seen{}
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			path := prefix + k
			t := jsonKind(v)
			f := fields[path]
			switch {
			case f == nil:
				fields[path] = &seen{t: t, n: 1}
			case f.t == t:
				f.n++
			case (f.t == "integer" || f.t == "number") && (t == "integer" || t == "number"):
				f.t, f.n = "number", f.n+1
			default:
				f.t, f.n = "any", f.n+1
			}
			if o, ok := v.(map[string]any); ok {
				walk(path+".", o)
			}
		}
	}
	for _, e := range events {
		walk("", e)
	}
	// a field seen in every event of its parent object is required; its
	// parent's count stands for the events that had the object
	var s Schema
	for path, f := range fields {
		total := len(events)
		if i := strings.LastIndexByte(path, '.'); i >= 0 {
			if p := fields[path[:i]]; p != nil {
				total = p.n
			}
		}
		s = append(s, Field{Path: path, Type: f.t, Optional: f.n < total})
	}
	// the fields under a field that was not always an object are not known
	s = slices.DeleteFunc(s, func(f Field) bool {
		for p := f.Path; ; {
			i := strings.LastIndexByte(p, '.')
			if i < 0 {
				return false
			}
			p = p[:i]
			if fields[p].t != "object" {
				return true
			}
		}
	})
	slices.SortFunc(s, func(a, b Field) int { return strings.Compare(a.Path, b.Path) })
	return s
}

// Format writes s in the simple form, which Parse reads back.
func (s Schema) Format() string {
	var b strings.Builder
	for _, f := range s {
		depth := strings.Count(f.Path, ".")
		name := f.Path[strings.LastIndexByte(f.Path, '.')+1:]
		b.WriteString(strings.Repeat("  ", depth))
		b.WriteString(yamlKey(name))
		b.WriteString(":")
		if f.Type == "object" && s.hasChildren(f.Path) {
			b.WriteString("\n")
			continue
		}
		b.WriteString(" " + f.Type)
		if f.Optional {
			b.WriteString("?")
		}
		b.WriteString("\n")
	}
	return b.String()
}

func yamlKey(k string) string {
	for _, r := range k {
		if !(r == '_' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			q, _ := json.Marshal(k)
			return string(q)
		}
	}
	if k == "" || k == "true" || k == "false" || k == "null" || k == "yes" || k == "no" || k == "on" || k == "off" {
		q, _ := json.Marshal(k)
		return string(q)
	}
	return k
}

func (s Schema) hasChildren(path string) bool {
	for _, f := range s {
		if strings.HasPrefix(f.Path, path+".") {
			return true
		}
	}
	return false
}

func (s Schema) field(path string) (Field, bool) {
	i, ok := slices.BinarySearchFunc(s, path, func(f Field, p string) int { return strings.Compare(f.Path, p) })
	if !ok {
		return Field{}, false
	}
	return s[i], true
}

// Has reports whether an event fitting s may have the field at path: a
// declared field, a field under an object (or any) declared without
// fields of its own, or under a field of type any.
func (s Schema) Has(path string) bool {
	if s == nil {
		return true
	}
	if _, ok := s.field(path); ok {
		return true
	}
	for p := path; ; {
		i := strings.LastIndexByte(p, '.')
		if i < 0 {
			return false
		}
		p = p[:i]
		if f, ok := s.field(p); ok {
			return f.Type == "any" || f.Type == "object" && !s.hasChildren(p)
		}
	}
}

// Suggest returns the declared field closest to path (by edit distance
// among the fields at the same depth), or "" when none is close.
func (s Schema) Suggest(path string) string {
	best, bestD := "", max(3, len(path)/3+1)
	depth := strings.Count(path, ".")
	for _, f := range s {
		if strings.Count(f.Path, ".") != depth {
			continue
		}
		if d := EditDistance(strings.ToLower(path), strings.ToLower(f.Path)); d < bestD {
			best, bestD = f.Path, d
		}
	}
	return best
}

// Missing is the error for a read of a field s does not have, naming the
// source and the closest declared field.
func (s Schema) Missing(source, path string) error {
	msg := fmt.Sprintf("no field %q in source %s", path, source)
	if c := s.Suggest(path); c != "" {
		msg += fmt.Sprintf("; did you mean %q?", c)
	} else {
		var top []string
		for _, f := range s {
			if !strings.Contains(f.Path, ".") {
				top = append(top, f.Path)
			}
		}
		msg += fmt.Sprintf(" (its fields: %s)", strings.Join(top, ", "))
	}
	return errors.New(msg)
}

// Columns returns the top-level field names, what a SQL query's FROM
// table has as columns.
func (s Schema) Columns() []string {
	var out []string
	for _, f := range s {
		if !strings.Contains(f.Path, ".") {
			out = append(out, f.Path)
		}
	}
	return out
}

// Check reports why event does not fit s: a required field it lacks, or
// a field of another type than declared. Fields s does not declare are
// allowed.
func (s Schema) Check(event map[string]any) error {
	for _, f := range s {
		v, present, parentPresent := lookup(event, f.Path)
		if !parentPresent {
			continue // an optional object absent: its fields with it
		}
		if !present {
			if !f.Optional {
				return fmt.Errorf("field %q is missing (schema: %s)", f.Path, f.Type)
			}
			continue
		}
		if !fits(f.Type, v) {
			return fmt.Errorf("field %q is %s, not %s", f.Path, jsonKind(v), f.Type)
		}
	}
	return nil
}

// lookup finds path in event; parentPresent is false when an object on
// the way is absent.
func lookup(event map[string]any, path string) (v any, present, parentPresent bool) {
	m := event
	parts := strings.Split(path, ".")
	for i, p := range parts {
		x, ok := m[p]
		if i == len(parts)-1 {
			return x, ok, true
		}
		if !ok {
			return nil, false, false
		}
		if m, ok = x.(map[string]any); !ok {
			return nil, false, false // the type check of the parent says why
		}
	}
	return nil, false, true
}

func fits(t string, v any) bool {
	k := jsonKind(v)
	switch t {
	case "any":
		return true
	case "number":
		return k == "number" || k == "integer"
	}
	return k == t
}

// jsonKind names v's JSON type, integer for a whole number.
func jsonKind(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case string:
		return "string"
	case bool:
		return "boolean"
	case map[string]any:
		return "object"
	case []any:
		return "array"
	case float64:
		if v == math.Trunc(v) && !math.IsInf(v, 0) {
			return "integer"
		}
		return "number"
	case float32:
		return jsonKind(float64(v))
	case int, int64, int32, uint64, uint32, uint:
		return "integer"
	case json.Number:
		if _, err := v.Int64(); err == nil {
			return "integer"
		}
		return "number"
	}
	return fmt.Sprintf("%T", v)
}

// EditDistance is the optimal string alignment distance between a and b
// (Levenshtein with transpositions).
func EditDistance(a, b string) int {
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			c := 1
			if a[i-1] == b[j-1] {
				c = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+c)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}

// FromFields checks fields as a request gives them (any order) and
// returns them as a Schema: known types, no path twice, every dotted
// path's parent declared as an object.
func FromFields(fields []Field) (Schema, error) {
	if len(fields) == 0 {
		return nil, nil
	}
	if len(fields) > MaxFields {
		return nil, fmt.Errorf("schema: %d fields, over the limit of %d", len(fields), MaxFields)
	}
	s := slices.Clone(Schema(fields))
	slices.SortFunc(s, func(a, b Field) int { return strings.Compare(a.Path, b.Path) })
	for i, f := range s {
		if !slices.Contains(Types, f.Type) {
			return nil, fmt.Errorf("schema: field %q: unknown type %q (one of %s)", f.Path, f.Type, strings.Join(Types, ", "))
		}
		if f.Path == "" || strings.HasPrefix(f.Path, ".") || strings.HasSuffix(f.Path, ".") || strings.Contains(f.Path, "..") {
			return nil, fmt.Errorf("schema: field %q: not a dotted path of names", f.Path)
		}
		if i > 0 && s[i-1].Path == f.Path {
			return nil, fmt.Errorf("schema: field %q declared twice", f.Path)
		}
		if j := strings.LastIndexByte(f.Path, '.'); j >= 0 {
			if p, ok := s.field(f.Path[:j]); !ok || p.Type != "object" {
				return nil, fmt.Errorf("schema: field %q: its parent %q is not declared as an object", f.Path, f.Path[:j])
			}
		}
	}
	return s, nil
}
