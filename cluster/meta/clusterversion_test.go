package meta

import (
	"bytes"
	"errors"
	"testing"

	"pgregory.net/rapid"

	"github.com/cepcluster/cep/internal/clusterversion"
)

// moreKinds draws the commands kept out of drawCommandOf's switch, one
// function per kind.
var moreKinds = []func(t *rapid.T) Command{
	func(t *rapid.T) Command {
		return SetClusterVersion{Version: rapid.Uint32Range(0, 4).Draw(t, "version"), Expect: rapid.Uint32Range(0, 3).Draw(t, "expect")}
	},
}

// gatedKinds are the kinds a node of the release before rejects as
// unknown: they are proposed only once no member runs it, so they need
// not decode into its union struct.
var gatedKinds = map[string]bool{SetClusterVersion{}.Kind(): true}

// checkDecodes checks that c's entry decodes back to c.
func checkDecodes(t *rapid.T, c Command) {
	b, err := Encode(c)
	if err != nil {
		t.Fatal(err)
	}
	d, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if db, _ := Encode(d); !bytes.Equal(db, b) {
		t.Fatalf("decoded as %#v, which encodes as\n%s\nnot\n%s", d, db, b)
	}
}

// The active version only moves up, from the version the proposer saw;
// metadata written before cluster versions is at Base, and a snapshot of
// it (no clusterVersion key) reads as Base in this release.
func TestClusterVersionMovesUpOnly(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := New()
		if m.ActiveVersion() != clusterversion.Base {
			t.Fatalf("new metadata at %v", m.ActiveVersion())
		}
		if b, _ := m.Marshal(); bytes.Contains(b, []byte("clusterVersion")) {
			t.Fatalf("Base metadata encodes a version: %s", b)
		}
		for i := range rapid.IntRange(1, 20).Draw(t, "commands") {
			c := SetClusterVersion{Version: rapid.Uint32Range(0, 5).Draw(t, "version"), Expect: rapid.Uint32Range(0, 5).Draw(t, "expect")}
			before := m.ClusterVersion
			_, err := m.Apply(uint64(i+1), c)
			var r *Error
			switch {
			case c.Expect != before:
				if !errors.As(err, &r) || !errors.Is(err, ErrConflict) || m.ClusterVersion != before {
					t.Fatalf("%+v at %d: %v, now %d", c, before, err, m.ClusterVersion)
				}
			case clusterversion.Active(c.Version) <= clusterversion.Active(before) || c.Version == 0:
				if !errors.Is(err, ErrPrecondition) || m.ClusterVersion != before {
					t.Fatalf("%+v at %d: %v, now %d", c, before, err, m.ClusterVersion)
				}
			default:
				if err != nil || m.ClusterVersion != c.Version {
					t.Fatalf("%+v at %d: %v, now %d", c, before, err, m.ClusterVersion)
				}
			}
			if m.ClusterVersion != 0 && m.ClusterVersion < before {
				t.Fatalf("version went from %d to %d", before, m.ClusterVersion)
			}
		}
		b, err := m.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		back, err := Unmarshal(b)
		if err != nil || back.ActiveVersion() != m.ActiveVersion() {
			t.Fatalf("snapshot round trip: %v, %v for %v", err, back.ActiveVersion(), m.ActiveVersion())
		}
	})
}

// The cluster version's entries (version-*) apply after the limits log
// to the same results and metadata, and the snapshot keeps the version.
func TestGoldenClusterVersion(t *testing.T) {
	before, err := Unmarshal(readGolden(t, "limits-meta.json"))
	if err != nil {
		t.Fatal(err)
	}
	if v := before.ActiveVersion(); v != clusterversion.Base {
		t.Fatalf("metadata of an older release at %v", v)
	}
	want := goldenChain(t, "version", "limits-meta", before.Index+1)
	if want == nil {
		return
	}
	m, err := Unmarshal(want)
	if err != nil {
		t.Fatal(err)
	}
	if m.ActiveVersion() != 3 {
		t.Errorf("snapshot at %v, want v3", m.ActiveVersion())
	}
}

// A strict source is refused until the cluster is at Strict (its shards
// would log an op an older release cannot read), and taken from then on.
func TestStrictSourceNeedsItsVersion(t *testing.T) {
	m := New()
	strict := func(name string) PutSource {
		return PutSource{Source: &Source{Name: name, Stream: "CEP_SRC_" + name, Subjects: []string{name + ".*"}, Strict: true}}
	}
	idx := uint64(0)
	for _, v := range []clusterversion.Version{clusterversion.Base, clusterversion.Logged} {
		if v != clusterversion.Base {
			idx++
			if _, err := m.Apply(idx, SetClusterVersion{Version: uint32(v), Expect: m.ClusterVersion}); err != nil {
				t.Fatal(err)
			}
		}
		idx++
		if _, err := m.Apply(idx, strict("s")); !errors.Is(err, ErrPrecondition) || m.Sources["s"] != nil {
			t.Fatalf("a strict source at %v: %v", v, err)
		}
		idx++
		if _, err := m.Apply(idx, PutSource{Source: &Source{Name: "plain" + v.String(), Stream: "P" + v.String()}}); err != nil {
			t.Fatalf("a plain source at %v: %v", v, err)
		}
	}
	idx++
	if _, err := m.Apply(idx, SetClusterVersion{Version: uint32(clusterversion.Strict), Expect: m.ClusterVersion}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Apply(idx+1, strict("s")); err != nil || !m.Sources["s"].Strict {
		t.Fatalf("a strict source at %v: %v", clusterversion.Strict, err)
	}
}
