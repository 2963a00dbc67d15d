package nfa

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	yaml3 "go.yaml.in/yaml/v3"
	"sigs.k8s.io/yaml"
)

// Spec is a pattern document of pattern-v1 (see the project's spec). Field
// names follow Flink CEP's Pattern API. A Spec is plain data: Compile turns it
// into a Pattern that can run.
type Spec struct {
	Name           string    `json:"name"`
	Source         Sources   `json:"source,omitempty"`
	Key            string    `json:"key,omitempty"`
	Time           string    `json:"time,omitempty"`
	OutOfOrderness *Duration `json:"outOfOrderness,omitempty"`
	IdleTimeout    *Duration `json:"idleTimeout,omitempty"`
	MaxDrift       *Duration `json:"maxDrift,omitempty"`
	// MaxFutureSkew bounds how far ahead of its source's event time an
	// event may be (absent: DefaultMaxFutureSkew); one further ahead is
	// dead-lettered and does not move the watermark. See docs/time.md.
	MaxFutureSkew *Duration `json:"maxFutureSkew,omitempty"`
	Within        *Duration `json:"within,omitempty"`
	WithinType    string    `json:"withinType,omitempty"`
	Skip          string    `json:"skip,omitempty"`
	// MaxKeys bounds the keys the pattern holds state for on one shard
	// (cluster mode; absent: the cluster's default). An event of a new key
	// past it is dead-lettered; see docs/limits.md.
	MaxKeys *int `json:"maxKeys,omitempty"`
	// MaxStateBytes bounds the raw bytes of the events the pattern holds
	// on one shard (cluster mode; absent: the cluster's default). An event
	// that would take it past is dead-lettered; see docs/limits.md.
	MaxStateBytes *int64 `json:"maxStateBytes,omitempty"`
	// Emit maps output field names to CEL expressions evaluated once per match.
	Emit   map[string]string `json:"emit,omitempty"`
	Stages []Stage           `json:"stages"`
}

// Stage is one element of the pattern sequence, or a group of them.
type Stage struct {
	Name              string    `json:"name"`
	Where             string    `json:"where,omitempty"`
	Contiguity        string    `json:"contiguity,omitempty"`
	Times             *Times    `json:"times,omitempty"`
	TimesOrMore       *int      `json:"timesOrMore,omitempty"`
	OneOrMore         bool      `json:"oneOrMore,omitempty"`
	Optional          bool      `json:"optional,omitempty"`
	Greedy            bool      `json:"greedy,omitempty"`
	Consecutive       bool      `json:"consecutive,omitempty"`
	AllowCombinations bool      `json:"allowCombinations,omitempty"`
	Until             string    `json:"until,omitempty"`
	Window            *Duration `json:"window,omitempty"`
	Within            *Duration `json:"within,omitempty"`
	WithinType        string    `json:"withinType,omitempty"`
	Group             []Stage   `json:"group,omitempty"`
	// Alts makes the stage an alternation of stage chains, tried in
	// order (the first that matches is preferred). Only MATCH_RECOGNIZE's
	// '|' and PERMUTE build one: pattern documents have no such key.
	Alts [][]Stage `json:"-"`
}

// Times is `times: n` or `times: [from, to]`.
type Times struct {
	From, To int
}

// UnmarshalJSON accepts an integer or a two-element array.
func (t *Times) UnmarshalJSON(b []byte) error {
	var n int
	if err := json.Unmarshal(b, &n); err == nil {
		t.From, t.To = n, n
		return nil
	}
	var arr []int
	if err := json.Unmarshal(b, &arr); err != nil || len(arr) != 2 {
		return errors.New("want an integer or [from, to]")
	}
	t.From, t.To = arr[0], arr[1]
	return nil
}

// MarshalJSON writes n or [from, to].
func (t Times) MarshalJSON() ([]byte, error) {
	if t.From == t.To {
		return json.Marshal(t.From)
	}
	return json.Marshal([]int{t.From, t.To})
}

// Sources is `source: name` or `source: [a, b]`.
type Sources []string

// UnmarshalJSON accepts a string or a list of strings.
func (s *Sources) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*s = Sources{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return errors.New("want a source name or a list of names")
	}
	*s = many
	return nil
}

// Duration is a duration in milliseconds, written as a Go/Flink-style
// duration string ("5m", "3s", "250ms") or an integer number of milliseconds.
type Duration struct{ Millis int64 }

// UnmarshalJSON accepts "5m" style strings and integer milliseconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	ms, err := parseDuration(b)
	if err != nil {
		return err
	}
	d.Millis = ms
	return nil
}

// MarshalJSON writes integer milliseconds.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.Millis) }

func parseDuration(b []byte) (int64, error) {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return 0, err
		}
		s = strings.TrimSpace(s)
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			if n < 0 {
				return 0, fmt.Errorf("negative duration %q", s)
			}
			return n, nil
		}
		// Go durations have no day unit; accept "2d" as a convenience.
		if strings.HasSuffix(s, "d") {
			if n, err := strconv.ParseInt(strings.TrimSuffix(s, "d"), 10, 64); err == nil && n >= 0 && n < math.MaxInt64/86400000 {
				return n * 86400000, nil
			}
		}
		dur, err := time.ParseDuration(s)
		if err != nil {
			return 0, fmt.Errorf("bad duration %q (want e.g. \"5m\", \"3s\", \"250ms\" or integer milliseconds)", s)
		}
		if dur < 0 {
			return 0, fmt.Errorf("negative duration %q", s)
		}
		return dur.Milliseconds(), nil
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return 0, fmt.Errorf("bad duration %s (want e.g. \"5m\" or integer milliseconds)", string(b))
	}
	if f < 0 || f != math.Trunc(f) || f > 1e15 {
		return 0, fmt.Errorf("bad duration %s (want a non-negative integer of milliseconds)", string(b))
	}
	return int64(f), nil
}

// ParseSpec reads a pattern document from JSON or YAML. Unknown fields are
// rejected so that a misspelt field does not silently change a pattern. The
// result is not validated; Compile validates.
func ParseSpec(data []byte) (*Spec, error) {
	if err := checkDocumentSize(len(data)); err != nil {
		return nil, err
	}
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return nil, errors.New("pattern: empty document")
	}
	js := trimmed
	if trimmed[0] != '{' {
		var err error
		js, err = yaml.YAMLToJSON(trimmed)
		if err != nil {
			return nil, fmt.Errorf("pattern: %s", oneLine(err.Error()))
		}
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	var s Spec
	if err := dec.Decode(&s); err != nil {
		if pe := unknownFieldError(js); pe != nil {
			return nil, pe
		}
		if pe := durationFieldError(js); pe != nil {
			return nil, pe
		}
		return nil, fmt.Errorf("pattern: %s", describeJSONError(js, err))
	}
	if dec.More() {
		return nil, errors.New("pattern: more than one document")
	}
	return &s, nil
}

func describeJSONError(doc []byte, err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		line, col := lineCol(doc, se.Offset)
		return fmt.Sprintf("syntax error at line %d, column %d: %s", line, col, se.Error())
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		msg := fmt.Sprintf("field %q: want %s, got %s", te.Field, te.Type.String(), te.Value)
		if te.Value == "bool" && te.Type.Kind() == reflect.String {
			// YAML 1.1, as Kubernetes reads it: y, n, yes, no, on, off
			msg += " (YAML reads y, n, yes, no, on and off unquoted as true or false: quote the value)"
		}
		return msg
	}
	msg := err.Error()
	msg = strings.TrimPrefix(msg, "json: ")
	return oneLine(msg)
}

func lineCol(doc []byte, off int64) (int, int) {
	if off > int64(len(doc)) {
		off = int64(len(doc))
	}
	line, col := 1, 1
	for _, c := range doc[:off] {
		if c == '\n' {
			line++
			col = 1
		} else {
			col++
		}
	}
	return line, col
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\r", " ")
	s = strings.ReplaceAll(s, "\n", " ")
	return strings.Join(strings.Fields(s), " ")
}

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

var specFields = fieldSet(Spec{})
var stageFields = fieldSet(Stage{})

func fieldSet(v any) map[string]bool {
	out := map[string]bool{}
	t := reflect.TypeOf(v)
	for i := 0; i < t.NumField(); i++ {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "-" {
			out[name] = true
		}
	}
	return out
}

var specDurations = durationFields(Spec{})
var stageDurations = durationFields(Stage{})

// durationFields are the JSON names of v's Duration fields.
func durationFields(v any) []string {
	var out []string
	t := reflect.TypeOf(v)
	for i := 0; i < t.NumField(); i++ {
		if ft := t.Field(i).Type; ft == reflect.TypeFor[*Duration]() || ft == reflect.TypeFor[Duration]() {
			name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// durationFieldError finds a duration that does not parse and names its
// field and stage: the decoder reports Duration's error without them.
func durationFieldError(js []byte) *PatternError {
	var doc map[string]json.RawMessage
	if json.Unmarshal(js, &doc) != nil {
		return nil
	}
	name := ""
	_ = json.Unmarshal(doc["name"], &name)
	for _, k := range specDurations {
		if raw, ok := doc[k]; ok && string(raw) != "null" {
			if _, err := parseDuration(raw); err != nil {
				return &PatternError{Pattern: name, Field: k, Err: err}
			}
		}
	}
	var walk func(raw json.RawMessage, prefix string) *PatternError
	walk = func(raw json.RawMessage, prefix string) *PatternError {
		var stages []map[string]json.RawMessage
		if json.Unmarshal(raw, &stages) != nil {
			return nil
		}
		for i, st := range stages {
			sn := ""
			_ = json.Unmarshal(st["name"], &sn)
			if sn == "" {
				sn = fmt.Sprintf("#%d", i+1)
			}
			for _, k := range stageDurations {
				if raw, ok := st[k]; ok && string(raw) != "null" {
					if _, err := parseDuration(raw); err != nil {
						return &PatternError{Pattern: name, Stage: prefix + sn, Field: k, Err: err}
					}
				}
			}
			if g, ok := st["group"]; ok {
				if pe := walk(g, prefix+sn+"/"); pe != nil {
					return pe
				}
			}
		}
		return nil
	}
	return walk(doc["stages"], "")
}

// yamlBoolKeys are the plain YAML 1.1 scalars that YAMLToJSON reads as
// booleans, keys included.
var yamlBoolKeys = map[string]bool{"y": true, "n": true, "yes": true, "no": true, "on": true, "off": true}

// CheckYAMLKeys refuses an emit field whose name YAML reads as a boolean:
// `n: size(events("a"))` would emit a field named "false". Like
// CheckStageRefs it is for new documents (deploys, validation, offline
// runs), not part of Compile: a pattern deployed before it existed must
// compile the same way on every replica. JSON documents and queries pass.
func CheckYAMLKeys(doc []byte) error {
	doc = bytes.TrimSpace(doc)
	if len(doc) == 0 || doc[0] == '{' || IsSQL(doc) {
		return nil
	}
	if pe := yamlBoolKey(doc); pe != nil {
		return pe
	}
	return nil
}

func yamlBoolKey(doc []byte) *PatternError {
	var d struct {
		Name string     `yaml:"name"`
		Emit yaml3.Node `yaml:"emit"`
	}
	if yaml3.Unmarshal(doc, &d) != nil || d.Emit.Kind != yaml3.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(d.Emit.Content); i += 2 {
		k := d.Emit.Content[i]
		if k.Style == 0 && yamlBoolKeys[strings.ToLower(k.Value)] {
			return &PatternError{Pattern: d.Name, Field: "emit." + k.Value, Err: fmt.Errorf("YAML reads %s unquoted as a boolean, so the field would be named true or false: quote it (%q)", k.Value, k.Value)}
		}
	}
	return nil
}

// unknownFieldError finds a misspelt field and names the stage it is in.
func unknownFieldError(js []byte) *PatternError {
	var doc map[string]json.RawMessage
	if json.Unmarshal(js, &doc) != nil {
		return nil
	}
	name := ""
	_ = json.Unmarshal(doc["name"], &name)
	for _, k := range sortedKeys(doc) {
		if !specFields[k] {
			return &PatternError{Pattern: name, Field: k, Err: fmt.Errorf("unknown field%s", suggest(k, specFields))}
		}
	}
	var walk func(raw json.RawMessage, prefix string) *PatternError
	walk = func(raw json.RawMessage, prefix string) *PatternError {
		var stages []map[string]json.RawMessage
		if json.Unmarshal(raw, &stages) != nil {
			return nil
		}
		for i, st := range stages {
			sn := ""
			_ = json.Unmarshal(st["name"], &sn)
			if sn == "" {
				sn = fmt.Sprintf("#%d", i+1)
			}
			for _, k := range sortedKeys(st) {
				if !stageFields[k] {
					return &PatternError{Pattern: name, Stage: prefix + sn, Field: k, Err: fmt.Errorf("unknown field%s", suggest(k, stageFields))}
				}
			}
			if g, ok := st["group"]; ok {
				if pe := walk(g, prefix+sn+"/"); pe != nil {
					return pe
				}
			}
		}
		return nil
	}
	return walk(doc["stages"], "")
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// suggest returns "; did you mean X?" for the closest known name.
func suggest(k string, known map[string]bool) string {
	best, bestD := "", 3
	for cand := range known {
		if d := editDistance(strings.ToLower(k), strings.ToLower(cand)); d < bestD || (d == bestD && cand < best) {
			best, bestD = cand, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf("; did you mean %q?", best)
}

func editDistance(a, b string) int {
	// optimal string alignment distance (Damerau-Levenshtein without
	// repeated edits of a substring)
	rows := make([][]int, len(a)+1)
	for i := range rows {
		rows[i] = make([]int, len(b)+1)
		rows[i][0] = i
	}
	for j := range rows[0] {
		rows[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			c := 1
			if a[i-1] == b[j-1] {
				c = 0
			}
			rows[i][j] = min(rows[i-1][j]+1, rows[i][j-1]+1, rows[i-1][j-1]+c)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				rows[i][j] = min(rows[i][j], rows[i-2][j-2]+1)
			}
		}
	}
	return rows[len(a)][len(b)]
}
