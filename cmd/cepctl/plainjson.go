package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// plainJSON is what cepctl's -o json and -o yaml print: a message's
// protobuf JSON (lowerCamelCase names, fields in their declared order,
// zero values included so that scripts find every field) with two
// changes for the people and scripts that read it: 64-bit integers are
// numbers, not strings (jq compares them as numbers), and enums are their
// short lower-case names ("alive", not "NODE_STATE_ALIVE"), as the tables
// print them. The API itself speaks canonical protobuf JSON.
type plainJSON struct{ protojson.MarshalOptions }

var marshalJSON = plainJSON{protojson.MarshalOptions{EmitUnpopulated: true}}

func (o plainJSON) Marshal(m proto.Message) ([]byte, error) {
	b, err := o.MarshalOptions.Marshal(m)
	if err != nil {
		return nil, err
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := writePlain(&out, m.ProtoReflect().Descriptor(), v); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// writePlain writes v, the protobuf JSON of a message of type md, with
// its fields in declaration order.
func writePlain(w *bytes.Buffer, md protoreflect.MessageDescriptor, v any) error {
	obj, ok := v.(map[string]any)
	if !ok || keepsItsJSON(md) {
		return writeJSON(w, v)
	}
	w.WriteByte('{')
	seen := map[string]bool{}
	first := true
	key := func(k string) {
		if !first {
			w.WriteByte(',')
		}
		first = false
		_ = writeJSON(w, k)
		w.WriteByte(':')
	}
	fields := md.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		name := fd.JSONName()
		fv, ok := obj[name]
		if !ok {
			continue
		}
		seen[name] = true
		key(name)
		if err := writeField(w, fd, fv); err != nil {
			return err
		}
	}
	var rest []string // what the descriptor does not name ("@type" of an Any)
	for k := range obj {
		if !seen[k] {
			rest = append(rest, k)
		}
	}
	slices.Sort(rest)
	for _, k := range rest {
		key(k)
		if err := writeJSON(w, obj[k]); err != nil {
			return err
		}
	}
	w.WriteByte('}')
	return nil
}

func writeField(w *bytes.Buffer, fd protoreflect.FieldDescriptor, v any) error {
	switch {
	case fd.IsMap():
		obj, ok := v.(map[string]any)
		if !ok {
			return writeJSON(w, v)
		}
		keys := make([]string, 0, len(obj))
		for k := range obj {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		w.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				w.WriteByte(',')
			}
			_ = writeJSON(w, k)
			w.WriteByte(':')
			if err := writeSingle(w, fd.MapValue(), obj[k]); err != nil {
				return err
			}
		}
		w.WriteByte('}')
		return nil
	case fd.IsList():
		list, ok := v.([]any)
		if !ok {
			return writeJSON(w, v)
		}
		w.WriteByte('[')
		for i, e := range list {
			if i > 0 {
				w.WriteByte(',')
			}
			if err := writeSingle(w, fd, e); err != nil {
				return err
			}
		}
		w.WriteByte(']')
		return nil
	}
	return writeSingle(w, fd, v)
}

func writeSingle(w *bytes.Buffer, fd protoreflect.FieldDescriptor, v any) error {
	switch fd.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return writePlain(w, fd.Message(), v)
	case protoreflect.EnumKind:
		if s, ok := v.(string); ok {
			return writeJSON(w, shortEnum(fd.Enum(), s))
		}
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind,
		protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		if s, ok := v.(string); ok && json.Valid([]byte(s)) {
			w.WriteString(s)
			return nil
		}
	}
	return writeJSON(w, v)
}

// keepsItsJSON: the well-known types whose JSON is not their fields
// (a Timestamp is an RFC 3339 string, a Struct any JSON object).
func keepsItsJSON(md protoreflect.MessageDescriptor) bool {
	name := string(md.FullName())
	if !strings.HasPrefix(name, "google.protobuf.") {
		return false
	}
	switch md.Name() {
	case "Int64Value", "UInt64Value":
		return false
	}
	return true
}

// shortEnum turns NODE_STATE_ALIVE into "alive": the value's name less
// the prefix all of its enum's values share.
func shortEnum(ed protoreflect.EnumDescriptor, name string) string {
	values := ed.Values()
	if values.Len() < 2 {
		return strings.ToLower(name)
	}
	prefix := string(values.Get(0).Name())
	for i := 1; i < values.Len(); i++ {
		n := string(values.Get(i).Name())
		for !strings.HasPrefix(n, prefix) {
			prefix = prefix[:len(prefix)-1]
		}
	}
	if i := strings.LastIndexByte(prefix, '_'); i >= 0 {
		prefix = prefix[:i+1]
	} else {
		prefix = ""
	}
	if !strings.HasPrefix(name, prefix) {
		return name
	}
	return strings.ToLower(strings.TrimPrefix(name, prefix))
}

// writeJSON writes v as JSON, leaving <, > and & as they are (a
// condition "e.amount > 5" reads as written).
func writeJSON(w *bytes.Buffer, v any) error {
	e := json.NewEncoder(w)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		return fmt.Errorf("json: %w", err)
	}
	w.Truncate(w.Len() - 1) // Encode's newline
	return nil
}
