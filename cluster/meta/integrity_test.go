package meta

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/cepcluster/cep/internal/integrity"
)

// The golden log (entries written before entries were sealed) sealed
// applies to the same metadata; a damaged entry is not applied, nor
// anything after it, and no snapshot is taken: the metadata stays what
// the entries before it made.
func TestFSMRefusesDamagedEntry(t *testing.T) {
	entries := readLines(t, "testdata/entries.jsonl")
	legacy, sealed, damaged := NewFSM(), NewFSM(), NewFSM()
	var told []uint64
	damaged.OnCorrupt(func(idx uint64, err error) { told = append(told, idx) })
	bad := len(entries) / 2
	var atBad []byte
	for i, e := range entries {
		idx := uint64(i + 1)
		applyEntry(legacy, idx, e)
		applyEntry(sealed, idx, integrity.Seal(e))
		d := integrity.Seal(e)
		if i == bad {
			d[len(d)-2] ^= 0x04
			atBad = metaBytes(t, damaged)
		}
		if res := applyEntry(damaged, idx, d); i >= bad && res.Err == nil {
			t.Fatalf("entry %d at or after the damaged %d applied", idx, bad+1)
		}
	}
	if sealed.meta.Sealed = false; !bytes.Equal(metaBytes(t, legacy), metaBytes(t, sealed)) {
		t.Fatal("sealed entries make other metadata than the legacy ones")
	}
	if !bytes.Equal(metaBytes(t, damaged), atBad) {
		t.Fatal("the metadata changed after the damaged entry")
	}
	if len(told) != 1 || told[0] != uint64(bad+1) {
		t.Fatalf("told of %v, want entry %d once", told, bad+1)
	}
	if _, err := damaged.Snapshot(); err == nil {
		t.Fatal("a snapshot was taken after the damaged entry")
	}
	// a legacy entry that does not decode is damage too
	f := NewFSM()
	if res := applyEntry(f, 1, []byte(`{"kind":`)); res.Err == nil || f.Corrupt() == nil {
		t.Fatalf("a truncated legacy entry: %v, corrupt %v", res.Err, f.Corrupt())
	}
}

// Once a checksummed entry is applied, an unchecksummed (legacy JSON) one
// is refused, whatever it says: a forged entry cannot come as legacy JSON
// past the checksum. Before the first checksummed entry legacy ones apply
// (a log written by an older release), and checksummed ones after the
// refusal still do.
func TestFSMRefusesLegacyAfterSealed(t *testing.T) {
	entries := readLines(t, "testdata/entries.jsonl")
	del, err := Encode(DeletePattern{Name: "p"})
	if err != nil {
		t.Fatal(err)
	}
	f := NewFSM()
	if res := applyEntry(f, 1, entries[0]); res.Err != nil {
		t.Fatalf("a legacy entry in a log of legacy entries: %v", res.Err)
	}
	if res := applyEntry(f, 2, integrity.Seal(entries[1])); errors.Is(res.Err, ErrLegacyEntry) {
		t.Fatalf("a sealed entry: %v", res.Err)
	}
	before := metaBytes(t, f)
	res := applyEntry(f, 3, del)
	if !errors.Is(res.Err, ErrLegacyEntry) {
		t.Fatalf("a legacy entry after a sealed one: %v, want %v", res.Err, ErrLegacyEntry)
	}
	t.Log(res.Err)
	if !bytes.Equal(metaBytes(t, f), before) {
		t.Fatal("the refused legacy entry changed the metadata")
	}
	if f.Corrupt() != nil {
		t.Fatalf("a refused entry stopped the replica: %v", f.Corrupt())
	}
	// the rule is in the snapshot: a replica restored from it refuses too
	g := NewFSM()
	if err := g.Restore(io.NopCloser(bytes.NewReader(snapshotBytes(t, f)))); err != nil {
		t.Fatal(err)
	}
	if res := applyEntry(g, 3, del); !errors.Is(res.Err, ErrLegacyEntry) {
		t.Fatalf("after a restore: %v, want %v", res.Err, ErrLegacyEntry)
	}
	if res := applyEntry(f, 4, integrity.Seal(del)); errors.Is(res.Err, ErrLegacyEntry) || f.meta.Index != 4 {
		t.Fatalf("a sealed entry after the refused one: %v, index %d", res.Err, f.meta.Index)
	}
}

func metaBytes(t *testing.T, f *FSM) []byte {
	m, _ := f.View()
	b, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return b
}
