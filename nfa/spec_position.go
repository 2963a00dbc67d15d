package nfa

import (
	"strings"

	yaml3 "go.yaml.in/yaml/v3"
)

// SpecPosition finds where a pattern document (YAML or JSON) writes what
// a PatternError names: the stage path's field ("emit.total" walks into
// emit), else the stage, else the document-level field. It returns the
// 1-based line and column of the deepest of those found, so an editor can
// show the error at its line; 0, 0 when the document does not parse or
// names none of them.
func SpecPosition(doc []byte, stage, field string) (line, col int) {
	var root yaml3.Node
	if yaml3.Unmarshal(doc, &root) != nil || root.Kind != yaml3.DocumentNode || len(root.Content) == 0 {
		return 0, 0
	}
	at := root.Content[0]
	if at.Kind != yaml3.MappingNode {
		return 0, 0
	}
	mark := func(n *yaml3.Node) { line, col = n.Line, n.Column }
	if stage != "" {
		list := "stages" // a group's stages are under "group"
		for _, name := range strings.Split(stage, "/") {
			_, seq := mapValue(at, list)
			st := stageNamed(seq, name)
			if st == nil {
				return line, col
			}
			at = st
			if k, _ := mapValue(st, "name"); k != nil {
				mark(k)
			} else {
				mark(st)
			}
			list = "group"
		}
	}
	if field == "" {
		return line, col
	}
	for _, part := range strings.Split(field, ".") {
		k, v := mapValue(at, part)
		if k == nil {
			break
		}
		mark(k)
		at = v
	}
	return line, col
}

// mapValue returns the key and value nodes of key in mapping m.
func mapValue(m *yaml3.Node, key string) (k, v *yaml3.Node) {
	if m == nil || m.Kind != yaml3.MappingNode {
		return nil, nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i], m.Content[i+1]
		}
	}
	return nil, nil
}

// stageNamed returns the stage mapping of seq whose name is name.
func stageNamed(seq *yaml3.Node, name string) *yaml3.Node {
	if seq == nil || seq.Kind != yaml3.SequenceNode {
		return nil
	}
	for _, st := range seq.Content {
		if _, v := mapValue(st, "name"); v != nil && v.Value == name {
			return st
		}
	}
	return nil
}
