package snapshot_test

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"testing"

	"github.com/cepcluster/cep/snapshot"
)

// FuzzReader feeds arbitrary bytes to the reader: it must never panic, and
// whatever it accepts must read back consistently. Run with
//
//	go test -fuzz=FuzzReader ./snapshot/
//
// The seeds are valid files and prefixes of them.
func FuzzReader(f *testing.F) {
	h := testHeader()
	seeds := [][]byte{
		build(f, h, roundTripSections()),
		build(f, h, smallSections()),
		build(f, h, nil),
	}
	h.FirstKeyGroup, h.LastKeyGroup, h.Kind = 3, 3, snapshot.KindRaftSnapshot
	seeds = append(seeds, build(f, h, []section{namedSec("a", "b"), kgSec(3, "x")}))
	for _, s := range seeds {
		f.Add(s)
		f.Add(s[:len(s)/2])
	}
	f.Add([]byte("CEPS"))
	f.Fuzz(func(t *testing.T, data []byte) { checkFuzzed(t, data) })
}

// FuzzReaderForged is FuzzReader with the checksums recomputed after
// mutation, so that the fuzzer gets past them and exercises the structural
// checks (index entries, offsets, lengths, frames, header fields).
func FuzzReaderForged(f *testing.F) {
	h := testHeader()
	for _, secs := range [][]section{roundTripSections(), smallSections(), nil} {
		f.Add(build(f, h, secs))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkFuzzed(t, forgeChecksums(data))
	})
}

// forgeChecksums rewrites the header, index, file and footer CRCs of data
// to match its (possibly mutated) content, where the lengths allow.
func forgeChecksums(data []byte) []byte {
	d := append([]byte(nil), data...)
	if len(d) < 12+36 {
		return d
	}
	le := binary.LittleEndian
	tab := crc32.MakeTable(crc32.Castagnoli)
	if hl := uint64(le.Uint32(d[8:12])); 12+hl+4 <= uint64(len(d)-36) {
		le.PutUint32(d[12+hl:], crc32.Checksum(d[:12+hl], tab))
	}
	f := d[len(d)-36:]
	if off := le.Uint64(f[0:8]); off <= uint64(len(d)-36) {
		le.PutUint32(f[16:20], crc32.Checksum(d[off:len(d)-36], tab))
	}
	le.PutUint32(f[20:24], crc32.Checksum(d[:len(d)-36], tab))
	le.PutUint32(f[28:32], crc32.Checksum(f[:28], tab))
	return d
}

// checkFuzzed: no panic; what NewReader accepts is consistent, and Verify
// fails whenever a section read fails.
func checkFuzzed(t *testing.T, data []byte) {
	r, err := snapshot.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return
	}
	h := r.Header()
	if err := h.Validate(); err != nil {
		t.Fatalf("accepted an invalid header: %v", err)
	}
	ok := true
	for _, kg := range r.KeyGroups() {
		if !h.Covers(kg) {
			t.Fatalf("key group %d outside [%d, %d]", kg, h.FirstKeyGroup, h.LastKeyGroup)
		}
		if _, err := r.KeyGroup(kg); err != nil {
			ok = false
		}
	}
	for _, n := range r.Names() {
		if _, err := r.Named(n); err != nil {
			ok = false
		}
	}
	if err := r.Verify(); err == nil && !ok {
		t.Fatal("Verify passed but a section did not read")
	}
}
