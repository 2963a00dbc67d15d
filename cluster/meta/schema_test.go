package meta

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/cepcluster/cep/internal/schema"
)

// A source's declared fields travel in its log entry and its snapshot
// unchanged; a source without them encodes with no "schema" key, as the
// releases before wrote it (the golden logs hold such entries).
func TestSourceSchemaRoundTrips(t *testing.T) {
	s, err := schema.Parse([]byte("account: string\namount: number?\ncard:\n  country: string\n"))
	if err != nil {
		t.Fatal(err)
	}
	e, err := Encode(PutSource{Source: &Source{Name: "bank", Stream: "CEP_SRC_BANK", Managed: true, Schema: s}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := Decode(e)
	if err != nil {
		t.Fatal(err)
	}
	m := New()
	if _, err := m.Apply(1, c); err != nil {
		t.Fatal(err)
	}
	b, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	back, err := Unmarshal(b)
	if err != nil {
		t.Fatal(err)
	}
	if got := back.Sources["bank"].Schema; !reflect.DeepEqual(got, s) {
		t.Errorf("schema after log and snapshot %+v, want %+v", got, s)
	}
	plain, err := Encode(PutSource{Source: &Source{Name: "other", Stream: "OTHER"}})
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(plain, []byte(`"schema"`)) || !strings.Contains(string(e), `"schema"`) {
		t.Errorf("entries:\n%s\n%s", e, plain)
	}
}
