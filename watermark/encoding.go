package watermark

import (
	"bytes"
	"encoding"
	"encoding/binary"
	"errors"

	"github.com/cepcluster/cep/internal/varint"
)

const maxVarintLen = binary.MaxVarintLen64

var (
	errTruncated    = errors.New("truncated input")
	errTrailing     = errors.New("trailing bytes")
	errOverflow     = errors.New("varint overflows 64 bits or is longer than needed")
	errNonCanonical = errors.New("non-canonical encoding")
)

func appendVarint(b []byte, v int64) []byte { return binary.AppendVarint(b, v) }

func appendString(b []byte, s string) []byte {
	b = appendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// decoder reads the package's binary formats. The first error sticks;
// subsequent reads return zero values.
type decoder struct {
	buf []byte
	err error
}

func (d *decoder) fail(err error) {
	if d.err == nil {
		d.err = err
	}
}

func (d *decoder) byte() byte {
	if d.err != nil {
		return 0
	}
	if len(d.buf) == 0 {
		d.fail(errTruncated)
		return 0
	}
	c := d.buf[0]
	d.buf = d.buf[1:]
	return c
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := varint.Varint(d.buf)
	if n <= 0 {
		d.fail(varintErr(n))
		return 0
	}
	d.buf = d.buf[n:]
	return v
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := varint.Uvarint(d.buf)
	if n <= 0 {
		d.fail(varintErr(n))
		return 0
	}
	d.buf = d.buf[n:]
	return v
}

// varintErr maps the n <= 0 results of varint.Varint/Uvarint to errors.
func varintErr(n int) error {
	if n == 0 {
		return errTruncated
	}
	return errOverflow
}

func (d *decoder) string() string {
	n := d.uvarint()
	if d.err != nil {
		return ""
	}
	if n > uint64(len(d.buf)) {
		d.fail(errTruncated)
		return ""
	}
	s := string(d.buf[:n])
	d.buf = d.buf[n:]
	return s
}

// remaining returns the number of unread bytes.
func (d *decoder) remaining() int { return len(d.buf) }

// finish returns the first error, or errTrailing if input is left over.
func (d *decoder) finish() error {
	if d.err != nil {
		return d.err
	}
	if len(d.buf) != 0 {
		return errTrailing
	}
	return nil
}

// checkCanonical re-encodes v and requires the result to equal data, so
// that every accepted encoding is the one MarshalBinary would produce.
func checkCanonical(data []byte, v encoding.BinaryAppender) error {
	re, err := v.AppendBinary(make([]byte, 0, len(data)))
	if err != nil {
		return err
	}
	if !bytes.Equal(re, data) {
		return errNonCanonical
	}
	return nil
}

func appendUvarint(b []byte, v uint64) []byte { return binary.AppendUvarint(b, v) }
