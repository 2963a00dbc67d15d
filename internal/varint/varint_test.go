package varint

import (
	"encoding/binary"
	"math"
	"testing"
)

// Every value reads back from binary's encoding with its length, and no
// other encoding of it is accepted: appending a zero continuation byte
// (the one way to lengthen an encoding) is refused.
func TestShortestFormOnly(t *testing.T) {
	us := []uint64{0, 1, 127, 128, 255, 300, 1 << 20, 1<<63 - 1, 1 << 63, math.MaxUint64}
	for _, u := range us {
		b := binary.AppendUvarint(nil, u)
		if v, n := Uvarint(b); v != u || n != len(b) {
			t.Errorf("Uvarint(%x) = %d, %d; want %d, %d", b, v, n, u, len(b))
		}
		if len(b) < binary.MaxVarintLen64 {
			long := append(append([]byte(nil), b...), 0)
			long[len(b)-1] |= 0x80
			if gv, gn := binary.Uvarint(long); gv != u || gn != len(long) {
				t.Fatalf("test input %x is not another encoding of %d (%d, %d)", long, u, gv, gn)
			}
			if _, n := Uvarint(long); n != -len(long) {
				t.Errorf("Uvarint(%x): n = %d, want %d (refused)", long, n, -len(long))
			}
		}
	}
	for _, x := range []int64{0, -1, 1, -64, 64, math.MinInt64, math.MaxInt64} {
		b := binary.AppendVarint(nil, x)
		if v, n := Varint(b); v != x || n != len(b) {
			t.Errorf("Varint(%x) = %d, %d; want %d, %d", b, v, n, x, len(b))
		}
	}
	if _, n := Uvarint([]byte{0x80}); n != 0 {
		t.Errorf("truncated: n = %d, want 0", n)
	}
	if _, n := Uvarint([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02}); n >= 0 {
		t.Errorf("overflow: n = %d, want < 0", n)
	}
}
