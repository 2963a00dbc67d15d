// Package varint reads the variable-length integers of encoding/binary in
// their shortest form only, so that every value has exactly one encoding
// and a decoded log entry or state re-encodes to the bytes it came from.
package varint

import "encoding/binary"

// Uvarint is binary.Uvarint, except that an encoding longer than needed
// (a last byte of zero after others, such as 0x80 0x00 for 0) is refused
// like an overflow: n < 0, and -n bytes were read. n == 0: b is too short.
func Uvarint(b []byte) (uint64, int) {
	v, n := binary.Uvarint(b)
	if n > 1 && b[n-1] == 0 {
		return 0, -n
	}
	return v, n
}

// Varint is binary.Varint (zig-zag), with Uvarint's rule on the shortest
// form.
func Varint(b []byte) (int64, int) {
	ux, n := Uvarint(b)
	if n <= 0 {
		return 0, n
	}
	x := int64(ux >> 1)
	if ux&1 != 0 {
		x = ^x
	}
	return x, n
}
