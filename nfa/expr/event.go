package expr

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/valyala/fastjson"
)

// Event is one decoded JSON object. Values are string, int64, float64,
// bool, nil, []any and map[string]any, as produced by DecodeEvent.
type Event = map[string]any

// DecodeEvent decodes b, which must hold exactly one JSON object, into an
// Event. A number without fraction or exponent that fits in int64 becomes an
// int64; every other number becomes a float64. Nested objects become
// map[string]any and arrays []any. It never panics.
//
// The result is encoding/json's. Events in the common form (valid UTF-8,
// no \u escapes, no control characters, nesting within fastjson's limit)
// are parsed with github.com/valyala/fastjson, two to four times faster;
// anything else, and anything fastjson refuses, goes through encoding/json,
// which also words the errors. FuzzDecodeEventAgrees checks that both paths
// give the same.
func DecodeEvent(b []byte) (Event, error) {
	if ev, ok := decodeFast(b); ok {
		return ev, nil
	}
	return decodeStd(b)
}

// decoders holds fastjson parsers with the object keys they have met.
var decoders = sync.Pool{New: func() any { return &decoder{keys: make(map[string]string), vals: make(map[string]any)} }}

// decoder is a fastjson parser and the state of converting its values.
type decoder struct {
	p fastjson.Parser
	// keys interns object keys: events of one source repeat the same few
	// field names, which are then not allocated again for every event
	// (bounded: a source with ever new field names fills it once)
	keys map[string]string
	vals map[string]any // short string values, boxed (see str)
	num  []byte         // a number's text
}

// maxInterned bounds decoder.keys and maxInternedLen the keys it takes.
const (
	maxInterned     = 1024
	maxInternedVals = 4096
	maxInternedLen  = 64
)

var unicodeEscape = []byte(`\u`)

// jsonSpace is JSON's white space.
const jsonSpace = " \t\n\r"

// decodeFast decodes the common form of event with fastjson, or reports
// false to leave b to decodeStd.
func decodeFast(b []byte) (Event, bool) {
	// JSON white space around the object (json.Encoder ends every message
	// with a newline) would otherwise count as control characters
	b = bytes.Trim(b, jsonSpace)
	if bytes.Contains(b, unicodeEscape) || hasControl(b) || !utf8.Valid(b) {
		return nil, false
	}
	d := decoders.Get().(*decoder)
	defer decoders.Put(d)
	// Parse first: it stops at a nesting depth of 300, while the validator
	// takes time quadratic in the depth of a deeply nested input. Parse is
	// lenient on escapes and numbers, the validator is not: it runs when b
	// holds an escape, and value checks every number it converts.
	v, err := d.p.ParseBytes(b)
	if err != nil || v.Type() != fastjson.TypeObject || (bytes.IndexByte(b, '\\') >= 0 && fastjson.ValidateBytes(b) != nil) {
		return nil, false
	}
	out, ok := d.value(v)
	if !ok {
		return nil, false
	}
	return out.(map[string]any), true
}

// hasControl reports whether b holds a control character: fastjson takes
// one inside a string (JSON does not), and white space other than blanks
// between tokens (inside the object) is rare enough to leave to
// encoding/json.
func hasControl(b []byte) bool {
	for _, c := range b {
		if c < 0x20 {
			return true
		}
	}
	return false
}

// str returns a string value, boxed. Short values are interned with their
// box: events repeat the same few types, states and keys, which then cost
// no allocation (bounded like keys: values that never repeat fill it once).
func (d *decoder) str(b []byte) any {
	if len(b) > maxInternedLen {
		return string(b)
	}
	if v, ok := d.vals[string(b)]; ok {
		return v
	}
	s := string(b)
	var v any = s
	if len(d.vals) < maxInternedVals {
		d.vals[s] = v
	}
	return v
}

// key returns an object key as a string, interned.
func (d *decoder) key(k []byte) string {
	if s, ok := d.keys[string(k)]; ok {
		return s
	}
	s := string(k)
	if len(d.keys) < maxInterned && len(k) <= maxInternedLen {
		d.keys[s] = s
	}
	return s
}

// value converts a fastjson value to the values decodeStd produces.
func (d *decoder) value(v *fastjson.Value) (any, bool) {
	switch v.Type() {
	case fastjson.TypeObject:
		o, _ := v.Object()
		m := make(map[string]any, o.Len())
		ok := true
		o.Visit(func(k []byte, x *fastjson.Value) {
			if !ok {
				return
			}
			var c any
			if c, ok = d.value(x); ok {
				m[d.key(k)] = c
			}
		})
		return m, ok
	case fastjson.TypeArray:
		a, _ := v.Array()
		out := make([]any, len(a))
		for i, x := range a {
			c, ok := d.value(x)
			if !ok {
				return nil, false
			}
			out[i] = c
		}
		return out, true
	case fastjson.TypeString:
		s, _ := v.StringBytes()
		return d.str(s), true
	case fastjson.TypeNumber:
		d.num = v.MarshalTo(d.num[:0])
		if i, ok := smallInt(d.num); ok {
			return i, true
		}
		if !jsonNumber(d.num) {
			return nil, false // "+1", "1.", "01", "NaN", "inf": fastjson takes them, JSON does not
		}
		n, err := convertNumber(json.Number(d.num))
		return n, err == nil
	case fastjson.TypeTrue:
		return true, true
	case fastjson.TypeFalse:
		return false, true
	case fastjson.TypeNull:
		return nil, true
	}
	return nil, false
}

// jsonNumber reports whether b is a number in JSON's grammar:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func jsonNumber(b []byte) bool {
	i := 0
	digits := func() int {
		n := 0
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
			n++
		}
		return n
	}
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case digits() == 0:
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if digits() == 0 {
			return false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	return i == len(b)
}

// smallInt parses an optionally negative run of at most 18 decimal digits
// (so it cannot overflow an int64), the common integral number, without
// making a string of it; everything else goes on to jsonNumber and
// convertNumber, a leading zero too (JSON refuses "01").
func smallInt(b []byte) (int64, bool) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) == 0 || len(b) > 18 || (b[0] == '0' && len(b) > 1) {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	if neg {
		n = -n
	}
	return n, true
}

func decodeStd(b []byte) (Event, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var raw any
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("decode event: %s", oneLine(err.Error()))
	}
	if _, err := dec.Token(); err != io.EOF {
		if err == nil {
			return nil, errors.New("decode event: unexpected data after the JSON object")
		}
		return nil, fmt.Errorf("decode event: after the JSON object: %s", oneLine(err.Error()))
	}
	obj, ok := raw.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("event is not a JSON object (got %s)", jsonKind(raw))
	}
	if err := convertNumbers(obj); err != nil {
		return nil, err
	}
	return obj, nil
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case []any:
		return "array"
	case string:
		return "string"
	case bool:
		return "boolean"
	case json.Number:
		return "number"
	default:
		return fmt.Sprintf("%T", v)
	}
}

// convertNumbers replaces every json.Number inside v, in place.
func convertNumbers(v any) error {
	switch t := v.(type) {
	case map[string]any:
		for k, x := range t {
			if n, ok := x.(json.Number); ok {
				c, err := convertNumber(n)
				if err != nil {
					return err
				}
				t[k] = c
				continue
			}
			if err := convertNumbers(x); err != nil {
				return err
			}
		}
	case []any:
		for i, x := range t {
			if n, ok := x.(json.Number); ok {
				c, err := convertNumber(n)
				if err != nil {
					return err
				}
				t[i] = c
				continue
			}
			if err := convertNumbers(x); err != nil {
				return err
			}
		}
	}
	return nil
}

func convertNumber(n json.Number) (any, error) {
	s := string(n)
	if !strings.ContainsAny(s, ".eE") {
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return i, nil
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return nil, fmt.Errorf("decode event: number %s is out of range for a float64", truncate(s, 40))
	}
	return f, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// KeyString formats a partition key. A string is returned as is; int64,
// uint64, integral float64 and bool values are formatted in decimal
// (or "true"/"false"), so that the int 3 and the float 3.0 give the same key.
// Any other value is an error.
func KeyString(v any) (string, error) {
	switch t := v.(type) {
	case string:
		return t, nil
	case int64:
		return strconv.FormatInt(t, 10), nil
	case uint64:
		return strconv.FormatUint(t, 10), nil
	case float64:
		if math.IsNaN(t) || math.IsInf(t, 0) || t != math.Trunc(t) {
			return "", fmt.Errorf("key %v is not an integral number", t)
		}
		if t == 0 {
			return "0", nil // also for -0
		}
		return strconv.FormatFloat(t, 'f', -1, 64), nil
	case bool:
		return strconv.FormatBool(t), nil
	case nil:
		return "", errors.New("key is null")
	default:
		return "", fmt.Errorf("key of type %s is not a string, integer or bool", typeName(v))
	}
}

// TimeMillis converts an event-time value to milliseconds since the Unix
// epoch. It accepts an int64 (already milliseconds), a uint64 that fits in an
// int64, an integral float64, a time.Time, or an RFC 3339 string (with any
// offset and optional fraction; sub-millisecond digits are truncated).
func TimeMillis(v any) (int64, error) {
	switch t := v.(type) {
	case int64:
		return t, nil
	case uint64:
		if t > math.MaxInt64 {
			return 0, fmt.Errorf("time %d is out of range", t)
		}
		return int64(t), nil
	case float64:
		if math.IsNaN(t) || math.IsInf(t, 0) || t != math.Trunc(t) {
			return 0, fmt.Errorf("time %v is not an integral number of milliseconds", t)
		}
		if t < -9.223372036854775808e18 || t >= 9.223372036854775808e18 {
			return 0, fmt.Errorf("time %v is out of range", t)
		}
		return int64(t), nil
	case time.Time:
		return t.UnixMilli(), nil
	case string:
		ts, err := time.Parse(time.RFC3339Nano, t)
		if err != nil {
			return 0, fmt.Errorf("time %q is not an RFC 3339 timestamp", truncate(t, 64))
		}
		return ts.UnixMilli(), nil
	case nil:
		return 0, errors.New("time is null")
	default:
		return 0, fmt.Errorf("time of type %s is not a number, timestamp or RFC 3339 string", typeName(v))
	}
}

func typeName(v any) string {
	switch v.(type) {
	case []any:
		return "list"
	case map[string]any:
		return "map"
	default:
		return fmt.Sprintf("%T", v)
	}
}

// oneLine condenses a possibly multi-line message into one line.
func oneLine(s string) string {
	if !strings.ContainsAny(s, "\r\n") {
		return s
	}
	fields := strings.FieldsFunc(s, func(r rune) bool { return r == '\n' || r == '\r' })
	out := make([]string, 0, len(fields))
	for _, f := range fields {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return strings.Join(out, "; ")
}
