package snapshot_test

import (
	"bytes"
	"fmt"
	"reflect"
	"testing"

	"pgregory.net/rapid"

	"github.com/cepcluster/cep/snapshot"
)

func genHeader(t *rapid.T) snapshot.Header {
	k := rapid.IntRange(1, 300).Draw(t, "K")
	first := rapid.IntRange(0, k-1).Draw(t, "first")
	last := rapid.IntRange(first, k-1).Draw(t, "last")
	h := snapshot.Header{
		ID:            rapid.StringMatching(`[a-z0-9][a-z0-9 ._é-]{0,20}`).Draw(t, "id"),
		Kind:          rapid.SampledFrom([]snapshot.Kind{snapshot.KindRaftSnapshot, snapshot.KindSavepoint}).Draw(t, "kind"),
		ClusterID:     rapid.String().Draw(t, "cluster"),
		KeyGroups:     k,
		FirstKeyGroup: first,
		LastKeyGroup:  last,
		CreatedIndex:  rapid.Uint64().Draw(t, "index"),
		LoggedTimeMs:  rapid.Int64().Draw(t, "time"),
		Shards:        rapid.IntRange(0, k).Draw(t, "shards"),
	}
	for i := range rapid.IntRange(0, 3).Draw(t, "patterns") {
		h.Patterns = append(h.Patterns, snapshot.Pattern{
			Name:    fmt.Sprintf("p%d", i),
			Version: rapid.Int64().Draw(t, "version"),
			Format:  rapid.SampledFrom([]string{"", "yaml", "json", "sql"}).Draw(t, "format"),
			Spec:    rapid.String().Draw(t, "spec"),
		})
	}
	for i := range rapid.IntRange(0, 2).Draw(t, "sources") {
		h.Sources = append(h.Sources, snapshot.Source{
			Name:     fmt.Sprintf("s%d", i),
			Stream:   rapid.String().Draw(t, "stream"),
			Subjects: rapid.SliceOfN(rapid.StringMatching(`[a-z*>.]{1,8}`), 1, 3).Draw(t, "subjects"),
		})
	}
	if m := rapid.MapOfN(rapid.String(), rapid.String(), 0, 4).Draw(t, "meta"); len(m) > 0 {
		h.Metadata = m
	}
	return h
}

// genSections draws ascending key groups within the header's range with
// named sections interleaved anywhere.
func genSections(t *rapid.T, h snapshot.Header) []section {
	var secs []section
	names := map[string]bool{}
	for kg := h.FirstKeyGroup; kg <= h.LastKeyGroup && len(secs) < 40; kg++ {
		if rapid.IntRange(0, 3).Draw(t, "named?") == 0 {
			name := rapid.StringMatching(`[A-Za-z0-9._/-]{1,12}`).Draw(t, "name")
			if !names[name] {
				names[name] = true
				secs = append(secs, section{kg: -1, name: name, payload: rapid.SliceOfN(rapid.Byte(), 0, 64).Draw(t, "payload")})
			}
		}
		if rapid.Bool().Draw(t, "present") {
			secs = append(secs, section{kg: kg, payload: rapid.SliceOfN(rapid.Byte(), 0, 300).Draw(t, "payload")})
		}
	}
	return secs
}

// Whatever is written reads back the same, by random access in any order,
// and the same inputs always give the same bytes.
func TestPropertyRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		h := genHeader(t)
		secs := genSections(t, h)
		data := build(t, h, secs)
		if again := build(t, h, secs); !bytes.Equal(data, again) {
			t.Fatal("not deterministic")
		}
		r, err := snapshot.NewReader(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			t.Fatal(err)
		}
		if got := r.Header(); !reflect.DeepEqual(got, h) {
			t.Fatalf("header\n got %#v\nwant %#v", got, h)
		}
		// The model: what each key group and name should hold.
		kgs := map[int][]byte{}
		named := map[string][]byte{}
		var wantKGs []int
		for _, s := range secs {
			if s.kg >= 0 {
				kgs[s.kg] = s.payload
				wantKGs = append(wantKGs, s.kg)
			} else {
				named[s.name] = s.payload
			}
		}
		if !equalInts(r.KeyGroups(), wantKGs) {
			t.Fatalf("KeyGroups() = %v, want %v", r.KeyGroups(), wantKGs)
		}
		if len(r.Names()) != len(named) {
			t.Fatalf("Names() = %v", r.Names())
		}
		for range 20 {
			kg := rapid.IntRange(h.FirstKeyGroup, h.LastKeyGroup).Draw(t, "read kg")
			got, err := r.KeyGroup(kg)
			want, present := kgs[kg]
			if err != nil || !bytes.Equal(got, want) || (got == nil) == present {
				t.Fatalf("KeyGroup(%d) = %v, %v; want %v (present %v)", kg, got, err, want, present)
			}
		}
		for name, want := range named {
			got, err := r.Named(name)
			if err != nil || !bytes.Equal(got, want) || got == nil {
				t.Fatalf("Named(%q) = %v, %v; want %v", name, got, err, want)
			}
		}
		if err := r.Verify(); err != nil {
			t.Fatal(err)
		}
	})
}
