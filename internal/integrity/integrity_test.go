package integrity

import (
	"bytes"
	"errors"
	"testing"

	"pgregory.net/rapid"
)

// the legacy first bytes of the two logs: shard batches (versions 3–5)
// and metadata commands (JSON objects)
var env = Envelope{Legacy: func(b byte) bool { return (b >= 3 && b <= 5) || b == '{' }}

func TestSealOpenRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		data := rapid.SliceOf(rapid.Byte()).Draw(t, "data")
		got, sealed, err := env.Open(Seal(data))
		if err != nil || !sealed || !bytes.Equal(got, data) {
			t.Fatalf("Open(Seal(%x)) = %x, %v, %v", data, got, sealed, err)
		}
	})
}

// Any single-bit flip or truncation of a sealed entry is refused, never
// returned as data (nor as a legacy entry).
func TestDamageIsDetected(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		data := rapid.SliceOf(rapid.Byte()).Draw(t, "data")
		entry := Seal(data)
		var bad []byte
		if rapid.Bool().Draw(t, "truncate") {
			bad = entry[:rapid.IntRange(0, len(entry)-1).Draw(t, "length")]
		} else {
			bad = bytes.Clone(entry)
			bit := rapid.IntRange(0, 8*len(bad)-1).Draw(t, "bit")
			bad[bit/8] ^= 1 << (bit % 8)
		}
		got, sealed, err := env.Open(bad)
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("damaged entry %x of %x opened: %x, sealed %v, err %v", bad, entry, got, sealed, err)
		}
	})
}

func TestLegacyPassesThrough(t *testing.T) {
	for _, e := range [][]byte{{5, 1, 2}, []byte(`{"kind":"x"}`)} {
		got, sealed, err := env.Open(e)
		if err != nil || sealed || !bytes.Equal(got, e) {
			t.Errorf("legacy %q: %q, %v, %v", e, got, sealed, err)
		}
	}
	for _, e := range [][]byte{nil, {0}, {0xff, 1}, {marker}} {
		if _, _, err := env.Open(e); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%x: %v, want ErrCorrupt", e, err)
		}
	}
}
