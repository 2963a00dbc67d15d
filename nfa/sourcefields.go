package nfa

import "strings"

// SourceFields is what a source declares of its events' fields (package
// internal/schema's Schema implements it).
type SourceFields interface {
	// Has reports whether an event of the source may have the field at
	// the dotted path.
	Has(path string) bool
	// Missing is the error for a read of a field the source lacks,
	// naming source (the names given) and the closest declared field.
	Missing(source, path string) error
	// Columns are the top-level fields: a query's input columns.
	Columns() []string
}

// CheckSourceFields checks the fields a new document reads against what
// its sources declare, so that a misspelt field is refused with the
// closest declared one rather than count as false at every event. sources
// maps a source name to its declaration; when one of the pattern's
// sources declares nothing nothing is checked (a field it lacks may be
// the other's). query is the document's text, which a MATCH_RECOGNIZE
// query is compiled again from with the columns known.
func CheckSourceFields(p *Pattern, query string, sources map[string]SourceFields) error {
	names := p.Sources()
	var decl []SourceFields
	for _, n := range names {
		d := sources[n]
		if d == nil {
			return nil
		}
		decl = append(decl, d)
	}
	if len(decl) == 0 {
		return nil
	}
	if p.sql {
		_, err := CompileSQLColumns(query, p.Name(), decl[0].Columns())
		return err
	}
	return p.CheckFields(func(path string) error {
		for _, d := range decl {
			if d.Has(path) {
				return nil
			}
		}
		return decl[0].Missing(strings.Join(names, ", "), path)
	})
}
