package snapshot_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"runtime"
	"testing"

	"github.com/cepcluster/cep/snapshot"
)

func smallSections() []section {
	return []section{
		kgSec(2, "two"),
		namedSec("wm", "watermarks"),
		kgSec(5, ""),
		kgSec(9, "nine nine nine"),
	}
}

// regionOf names the part of the file that holds byte off, the way the
// reader's errors name it.
func regionOf(t *testing.T, r *snapshot.Reader, size, off int64) string {
	secs := r.Sections()
	switch {
	case off >= size-36:
		return "footer"
	case len(secs) == 0 || off < secs[0].Offset:
		return "header"
	}
	for _, s := range secs {
		if off < s.Offset+frameLen(s) {
			return s.String()
		}
	}
	return "index"
}

// checkAll reads everything through r and fails on silently wrong data. It
// returns the first error seen, NewReader's included.
func checkAll(t *testing.T, data []byte, orig []section) error {
	t.Helper()
	r, err := snapshot.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return err
	}
	var first error
	var kgs []int
	for _, s := range orig {
		var got []byte
		if s.kg >= 0 {
			kgs = append(kgs, s.kg)
			got, err = r.KeyGroup(s.kg)
		} else {
			got, err = r.Named(s.name)
		}
		if err != nil {
			if first == nil {
				first = err
			}
			continue
		}
		if !bytes.Equal(got, s.payload) {
			t.Fatalf("section %d/%q read %q, want %q, without error", s.kg, s.name, got, s.payload)
		}
	}
	if got := r.KeyGroups(); !equalInts(got, kgs) {
		t.Fatalf("KeyGroups() = %v, want %v, without error", got, kgs)
	}
	verr := r.Verify()
	if first != nil && verr == nil {
		t.Fatalf("a section read failed (%v) but Verify passed", first)
	}
	if first == nil {
		first = verr
	}
	return first
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Flipping any bit pattern in any byte is detected, by NewReader or by the
// read of the damaged section and by Verify, and the error names the part
// of the file that was damaged.
func TestFlipEveryByte(t *testing.T) {
	h := testHeader()
	h.Patterns, h.Sources = nil, nil
	orig := build(t, h, smallSections())
	ref := open(t, orig)
	size := int64(len(orig))
	for off := range size {
		for _, mask := range []byte{0x01, 0x80, 0xff} {
			d := append([]byte(nil), orig...)
			d[off] ^= mask
			err := checkAll(t, d, smallSections())
			if err == nil {
				t.Fatalf("flip %#x at %d of %d: no error", mask, off, size)
			}
			want := regionOf(t, ref, size, off)
			var ce *snapshot.CorruptError
			switch {
			case errors.As(err, &ce):
				if ce.Section != want {
					t.Errorf("flip %#x at %d: error names %q, byte is in %q: %v", mask, off, ce.Section, want, err)
				}
			case off < 8 && (errors.Is(err, snapshot.ErrNotSnapshot) || errors.Is(err, snapshot.ErrVersion)):
				// the preamble's magic or version: acceptable answers too
			default:
				t.Errorf("flip %#x at %d (%s): unexpected error %v", mask, off, want, err)
			}
		}
	}
}

// Every proper prefix of a file is rejected by NewReader.
func TestTruncateEveryLength(t *testing.T) {
	orig := build(t, testHeader(), smallSections())
	for n := range len(orig) {
		_, err := snapshot.NewReader(bytes.NewReader(orig[:n]), int64(n))
		switch {
		case err == nil:
			t.Fatalf("prefix of %d of %d bytes accepted", n, len(orig))
		case n < 4 && !errors.Is(err, snapshot.ErrNotSnapshot):
			t.Errorf("prefix %d: %v, want ErrNotSnapshot", n, err)
		case n >= 4 && !errors.Is(err, snapshot.ErrCorrupt):
			t.Errorf("prefix %d: %v, want ErrCorrupt", n, err)
		}
	}
	// A size larger than the data (a short read) is an error too.
	if _, err := snapshot.NewReader(bytes.NewReader(orig[:len(orig)-1]), int64(len(orig))); err == nil {
		t.Error("short ReaderAt accepted")
	}
}

// Lengths declared in the file are checked against its size before anything
// is allocated for them, even when the checksums have been forged to match.
func TestHugeDeclaredLengthsDoNotAllocate(t *testing.T) {
	tab := crc32.MakeTable(crc32.Castagnoli)
	le := binary.LittleEndian
	h := testHeader()
	h.Patterns, h.Sources, h.Metadata = nil, nil, nil
	orig := build(t, h, []section{kgSec(1, "x")})
	fixFooter := func(d []byte) {
		f := d[len(d)-36:]
		le.PutUint32(f[20:24], crc32.Checksum(d[:len(d)-36], tab))
		le.PutUint32(f[28:32], crc32.Checksum(f[:28], tab))
	}
	r := open(t, orig)
	sec := r.Sections()[0]
	indexOff := sec.Offset + frameLen(sec)
	cases := map[string]func(d []byte){
		"header length": func(d []byte) { le.PutUint32(d[8:12], 0xffffffff) },
		"index length": func(d []byte) {
			f := d[len(d)-36:]
			le.PutUint64(f[0:8], 0)
			le.PutUint64(f[8:16], 1<<62)
			fixFooter(d)
		},
		"index count": func(d []byte) {
			le.PutUint32(d[indexOff+4:], 0xffffffff)
			f := d[len(d)-36:]
			le.PutUint32(f[16:20], crc32.Checksum(d[indexOff:len(d)-36], tab))
			fixFooter(d)
		},
		"payload length": func(d []byte) {
			// index entry: magic(4) count(4) kind(1) kg(4) offset(8) length(8)
			le.PutUint64(d[indexOff+4+4+1+4+8:], 1<<40)
			f := d[len(d)-36:]
			le.PutUint32(f[16:20], crc32.Checksum(d[indexOff:len(d)-36], tab))
			fixFooter(d)
		},
	}
	for name, patch := range cases {
		d := append([]byte(nil), orig...)
		patch(d)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		_, err := snapshot.NewReader(bytes.NewReader(d), int64(len(d)))
		runtime.ReadMemStats(&after)
		if err == nil {
			t.Errorf("%s: accepted", name)
		}
		t.Logf("%s: %v", name, err)
		if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
			t.Errorf("%s: NewReader allocated %d bytes", name, n)
		}
	}
}
