package nfa_test

import (
	"fmt"
	"testing"

	"github.com/cepcluster/cep/nfa"
	"pgregory.net/rapid"
)

// TestNumberDuplicates checks the numbering of identical records of one
// step (what record ids tell apart) against counting: a record's Dup is
// the number of earlier records equal to it in type, key, timeout time,
// positions and stage sizes. Steps of up to 8 records and longer ones are
// numbered differently; both are drawn.
func TestNumberDuplicates(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(0, 40).Draw(t, "records")
		recs := make([]nfa.Record, n)
		for i := range recs {
			r := &recs[i]
			r.Type = rapid.SampledFrom([]string{"match", "timeout"}).Draw(t, "type")
			r.Key = rapid.SampledFrom([]string{"", "k", "kk"}).Draw(t, "key")
			r.TimeoutAt = int64(rapid.IntRange(0, 1).Draw(t, "at"))
			for range rapid.IntRange(0, 2).Draw(t, "positions") {
				r.Positions = append(r.Positions, uint64(rapid.IntRange(1, 2).Draw(t, "pos")))
			}
			for range rapid.IntRange(0, 2).Draw(t, "stages") {
				se := nfa.StageEvents{Stage: rapid.SampledFrom([]string{"a", "b"}).Draw(t, "stage")}
				for range rapid.IntRange(1, 2).Draw(t, "events") {
					se.Events = append(se.Events, []byte("{}"))
				}
				r.Events = append(r.Events, se)
			}
		}
		nfa.NumberDuplicates(recs)
		for i := range recs {
			want := 0
			for j := range i {
				if sameRecord(&recs[j], &recs[i]) {
					want++
				}
			}
			if recs[i].Dup != want {
				t.Fatalf("record %d of %d: Dup %d, %d earlier records are equal to it", i, n, recs[i].Dup, want)
			}
		}
	})
}

func sameRecord(a, b *nfa.Record) bool {
	shape := func(r *nfa.Record) string {
		s := fmt.Sprint(r.Type, "|", r.Key, "|", r.TimeoutAt, "|", r.Positions, "|")
		for _, se := range r.Events {
			s += fmt.Sprint(se.Stage, ":", len(se.Events), ",")
		}
		return s
	}
	return shape(a) == shape(b)
}
