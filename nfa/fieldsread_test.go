package nfa

import (
	"reflect"
	"testing"
)

// FieldsRead names what each part of a pattern reads of the event, as
// written in it; a query's variables are not fields, and a query over a
// subquery reads the subquery's columns, not the events'.
func TestFieldsRead(t *testing.T) {
	p, err := CompileNamed([]byte(`{"name":"p","key":"e.user.id","time":"e.ts","emit":{"n":"e.note","s":"size(events(\"a\"))"},
	  "stages":[{"name":"a","where":"e.type == \"A\" && has(e.card.country)"},{"name":"b","where":"e.amount > avg(events(\"a\").map(x, x.amount))"}]}`), "")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := p.FieldsRead(), []string{"amount", "card.country", "note", "ts", "type", "user.id"}; !reflect.DeepEqual(got, want) {
		t.Errorf("document: %v, want %v", got, want)
	}
	q, err := CompileSQL(`SELECT * FROM t MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES FIRST(D.price) AS p, LAST(D.meta.src) AS s
	  PATTERN (S D+? U) DEFINE D AS D.price < PREV(D.price) AND D.qty > 1, U AS U.price > 0) AS v`, "")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := q.FieldsRead(), []string{"meta.src", "price", "qty", "sym"}; !reflect.DeepEqual(got, want) {
		t.Errorf("query: %v, want %v", got, want)
	}
	sub, err := CompileSQL(`SELECT * FROM (SELECT sym, price * 2 AS p2, ts FROM t) MATCH_RECOGNIZE (PARTITION BY sym ORDER BY ts MEASURES A.p2 AS x PATTERN (A B) DEFINE A AS A.p2 > 1) AS v`, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := sub.FieldsRead(); len(got) != 0 {
		t.Errorf("query over a subquery: %v, want none", got)
	}
}
