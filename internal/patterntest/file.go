// Package patterntest reads pattern test files (a pattern, and cases of
// events with the records they must produce), runs them with the offline
// engine (nfa.Runner, as `cepctl run` does) and says, field by field, how
// a failing case's records differ from what it expects. `cepctl pattern
// test` and the --test flags of validate and deploy use it.
package patterntest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// File is a test file as read: the pattern under test and its cases.
type File struct {
	Path string
	// Pattern is the pattern document's or query's path, resolved against
	// the test file's directory; SQL says it is a MATCH_RECOGNIZE query.
	Pattern string
	SQL     bool
	Cases   []Case
}

// Case is one case: events in arrival order and the records expected.
type Case struct {
	Name string
	Line int
	// Events are JSON lines as `cepctl run` reads them: events, and
	// {"$watermark": T} markers.
	Events [][]byte
	Expect []Expected
	// FinalWatermark: at the end, time goes to +infinity so windows time
	// out (the default, as in `cepctl run`).
	FinalWatermark bool
}

// Expected is one record a case expects: only the fields given are
// compared.
type Expected struct {
	Line  int
	Value map[string]any // decoded with json.Number
	JSON  string         // as written, for messages
}

// recordKeys are the fields a record (or a dead letter) can have; an
// expected record naming another is a typo.
var recordKeys = []string{"type", "id", "pattern", "key", "start", "end", "timeoutAt", "events", "fields", "event",
	"source", "position", "reason", "data"}

// Load reads and checks a test file. Errors are one line, "FILE:LINE: ...".
func Load(path string) (*File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, b)
}

// Parse reads a test file's text; path names it in errors and resolves the
// pattern's path.
func Parse(path string, b []byte) (*File, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("%s: %s", path, strings.ReplaceAll(strings.TrimPrefix(err.Error(), "yaml: "), "\n", "; "))
	}
	f := &File{Path: path}
	at := func(n *yaml.Node, format string, a ...any) error {
		return fmt.Errorf("%s:%d: %s", path, n.Line, fmt.Sprintf(format, a...))
	}
	if len(doc.Content) == 0 {
		return nil, fmt.Errorf("%s: empty test file: it needs pattern (or sql) and cases", path)
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, at(root, "a test file is a mapping with pattern: (or sql:) and cases:")
	}
	var casesNode *yaml.Node
	for i := 0; i < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		switch k.Value {
		case "pattern", "sql":
			if f.Pattern != "" {
				return nil, at(k, "give one of pattern: and sql:, once")
			}
			if v.Kind != yaml.ScalarNode || v.Value == "" {
				return nil, at(v, "%s: want a file path", k.Value)
			}
			f.Pattern, f.SQL = v.Value, k.Value == "sql"
			if !filepath.IsAbs(f.Pattern) {
				f.Pattern = filepath.Join(filepath.Dir(path), f.Pattern)
			}
		case "cases":
			casesNode = v
		default:
			return nil, at(k, "unknown field %q: a test file has pattern (or sql) and cases", k.Value)
		}
	}
	if f.Pattern == "" {
		return nil, at(root, "no pattern: (or sql:) naming the file under test")
	}
	if casesNode == nil || casesNode.Kind != yaml.SequenceNode || len(casesNode.Content) == 0 {
		n := root
		if casesNode != nil {
			n = casesNode
		}
		return nil, at(n, "cases: want a list of at least one case")
	}
	names := map[string]int{}
	conv := &converter{budget: maxExpanded, open: map[*yaml.Node]bool{}}
	for i, cn := range casesNode.Content {
		c, err := parseCase(path, i, cn, conv)
		if err != nil {
			return nil, err
		}
		if first, dup := names[c.Name]; dup {
			return nil, at(cn, "case %q again (first at line %d): names tell the cases apart", c.Name, first)
		}
		names[c.Name] = c.Line
		f.Cases = append(f.Cases, c)
	}
	return f, nil
}

func parseCase(path string, i int, n *yaml.Node, conv *converter) (Case, error) {
	c := Case{Line: n.Line, FinalWatermark: true}
	where := fmt.Sprintf("case %d", i+1)
	at := func(m *yaml.Node, format string, a ...any) error {
		return fmt.Errorf("%s:%d: %s: %s", path, m.Line, where, fmt.Sprintf(format, a...))
	}
	if n.Kind != yaml.MappingNode {
		return c, at(n, "want a mapping with name, events and expect")
	}
	var events, expect *yaml.Node
	for j := 0; j < len(n.Content); j += 2 {
		k, v := n.Content[j], n.Content[j+1]
		switch k.Value {
		case "name":
			if v.Kind != yaml.ScalarNode || v.Value == "" {
				return c, at(v, "name: want a string")
			}
			c.Name = v.Value
		case "events":
			events = v
		case "expect":
			expect = v
		case "finalWatermark":
			if err := v.Decode(&c.FinalWatermark); err != nil || v.Tag != "!!bool" {
				return c, at(v, "finalWatermark: want true or false")
			}
		default:
			return c, at(k, "unknown field %q: a case has name, events, expect and finalWatermark", k.Value)
		}
	}
	if c.Name == "" {
		return c, at(n, "no name:")
	}
	where = fmt.Sprintf("case %q", c.Name)
	if events == nil || events.Kind != yaml.SequenceNode {
		return c, at(orNode(events, n), "events: want a list of JSON objects (events, or {\"$watermark\": T})")
	}
	for j, e := range events.Content {
		if resolve(e).Kind != yaml.MappingNode {
			return c, at(e, "events[%d]: want an object", j)
		}
		b, err := conv.toJSON(nil, e)
		if err != nil {
			return c, at(e, "events[%d]: %v", j, err)
		}
		c.Events = append(c.Events, b)
	}
	if expect == nil || expect.Kind != yaml.SequenceNode {
		// an omitted expect would pass whatever the pattern does
		return c, at(orNode(expect, n), "expect: want a list of records ([] when the case produces none)")
	}
	for j, e := range expect.Content {
		e = resolve(e)
		if e.Kind != yaml.MappingNode {
			return c, at(e, "expect[%d]: want a record, such as {type: match, key: a, fields: {n: 1}}", j)
		}
		for k := 0; k < len(e.Content); k += 2 {
			if key := e.Content[k].Value; !slices.Contains(recordKeys, key) {
				return c, at(e.Content[k], "expect[%d]: a record has no field %q (it has %s)", j, key, strings.Join(recordKeys, ", "))
			}
		}
		b, err := conv.toJSON(nil, e)
		if err != nil {
			return c, at(e, "expect[%d]: %v", j, err)
		}
		var v map[string]any
		if err := decodeJSON(b, &v); err != nil {
			return c, at(e, "expect[%d]: %v", j, err)
		}
		c.Expect = append(c.Expect, Expected{Line: e.Line, Value: v, JSON: string(b)})
	}
	return c, nil
}

func orNode(n, parent *yaml.Node) *yaml.Node {
	if n != nil {
		return n
	}
	return parent
}

func resolve(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

// maxExpanded bounds the JSON a test file's events and records expand to:
// YAML aliases can repeat a value exponentially often ("billion laughs").
const maxExpanded = 64 << 20

// converter turns YAML values into JSON within a budget of bytes, refusing
// an alias to a value that contains it.
type converter struct {
	budget int
	open   map[*yaml.Node]bool // the values being converted, outermost first
}

// toJSON appends the JSON of a YAML value, keeping the order of mapping
// keys: an event's bytes are what the records carry.
func (c *converter) toJSON(b []byte, n *yaml.Node) ([]byte, error) {
	start := len(b)
	b, err := c.value(b, n)
	if err == nil {
		if c.budget -= len(b) - start; c.budget < 0 {
			return nil, fmt.Errorf("line %d: the events and records expand to over %d MiB (aliases?)", n.Line, maxExpanded>>20)
		}
	}
	return b, err
}

func (c *converter) value(b []byte, n *yaml.Node) ([]byte, error) {
	alias := n
	n = resolve(n)
	if c.open[n] {
		return nil, fmt.Errorf("line %d: an alias to a value that contains it", alias.Line)
	}
	if len(b) > c.budget {
		return nil, fmt.Errorf("line %d: the events and records expand to over %d MiB (aliases?)", alias.Line, maxExpanded>>20)
	}
	if n.Kind == yaml.MappingNode || n.Kind == yaml.SequenceNode {
		c.open[n] = true
		defer delete(c.open, n)
	}
	switch n.Kind {
	case yaml.MappingNode:
		b = append(b, '{')
		for i := 0; i < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind != yaml.ScalarNode || k.Value == "<<" {
				return nil, fmt.Errorf("line %d: a key must be a plain name", k.Line)
			}
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendQuote(b, k.Value)
			b = append(b, ':')
			var err error
			if b, err = c.value(b, n.Content[i+1]); err != nil {
				return nil, err
			}
		}
		return append(b, '}'), nil
	case yaml.SequenceNode:
		b = append(b, '[')
		for i, e := range n.Content {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = c.value(b, e); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!null":
			return append(b, "null"...), nil
		case "!!bool":
			var v bool
			if err := n.Decode(&v); err != nil {
				return nil, fmt.Errorf("line %d: %v", n.Line, err)
			}
			return strconv.AppendBool(b, v), nil
		case "!!int":
			var v int64
			if err := n.Decode(&v); err != nil {
				return nil, fmt.Errorf("line %d: %q is not a 64-bit integer", n.Line, n.Value)
			}
			return strconv.AppendInt(b, v, 10), nil
		case "!!float":
			var v float64
			if err := n.Decode(&v); err != nil || math.IsInf(v, 0) || math.IsNaN(v) {
				return nil, fmt.Errorf("line %d: %q is not a JSON number", n.Line, n.Value)
			}
			return strconv.AppendFloat(b, v, 'g', -1, 64), nil
		default: // strings, and what YAML would read as a timestamp or binary
			return appendString(b, n.Value), nil
		}
	}
	return nil, fmt.Errorf("line %d: not a JSON value", n.Line)
}

func appendString(b []byte, s string) []byte {
	q, _ := json.Marshal(s) // keeps UTF-8 as it is, as the engine's output does
	return append(b, q...)
}

// decodeJSON decodes keeping numbers exact, so 1 and 1.0 compare equal and
// large integers stay whole.
func decodeJSON(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(v); err != nil {
		return err
	}
	if d.More() {
		return errors.New("more than one JSON value")
	}
	return nil
}
