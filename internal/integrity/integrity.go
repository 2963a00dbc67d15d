// Package integrity seals Raft log entries with a checksum, so that a
// replica finds an entry damaged on its disk before it applies it instead
// of applying whatever the bytes decode to.
//
// A sealed entry is a marker byte, a version byte, the CRC-32C
// (Castagnoli) of the data, big-endian, and the data. Entries written
// before entries were sealed begin with another byte; Envelope.Legacy
// says which first bytes such an entry of a log can have, so that a
// damaged marker is not taken for one.
package integrity

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

const (
	marker    = 0xCE // no single-bit flip of it is a legacy first byte of either log
	version1  = 1
	headerLen = 6
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrCorrupt is wrapped by every error Open returns.
var ErrCorrupt = errors.New("damaged log entry")

// Seal returns data with its checksum in front.
func Seal(data []byte) []byte {
	out := make([]byte, headerLen+len(data))
	out[0], out[1] = marker, version1
	binary.BigEndian.PutUint32(out[2:headerLen], crc32.Checksum(data, castagnoli))
	copy(out[headerLen:], data)
	return out
}

// Envelope is how one log's entries are opened.
type Envelope struct {
	// Legacy reports whether an entry beginning with b may be one
	// written before entries were sealed (its decoder then checks it).
	Legacy func(b byte) bool
}

// Open returns the data of entry and whether it was sealed. A sealed
// entry is returned only when its checksum matches; a legacy one (sealed
// false) is returned as it is, for the caller to decode: a decode failure
// is damage too. Anything else is an error wrapping ErrCorrupt.
func (e Envelope) Open(entry []byte) (data []byte, sealed bool, err error) {
	if len(entry) == 0 {
		return nil, false, fmt.Errorf("%w: empty", ErrCorrupt)
	}
	if entry[0] != marker {
		if e.Legacy != nil && e.Legacy(entry[0]) {
			return entry, false, nil
		}
		return nil, false, fmt.Errorf("%w: first byte %#x is neither the checksum marker nor an unchecksummed entry's", ErrCorrupt, entry[0])
	}
	if len(entry) < headerLen {
		return nil, false, fmt.Errorf("%w: %d bytes, shorter than the checksum header", ErrCorrupt, len(entry))
	}
	if entry[1] != version1 {
		return nil, false, fmt.Errorf("%w: unknown entry version %d", ErrCorrupt, entry[1])
	}
	data = entry[headerLen:]
	want := binary.BigEndian.Uint32(entry[2:headerLen])
	if got := crc32.Checksum(data, castagnoli); got != want {
		return nil, false, fmt.Errorf("%w: checksum %08x, the entry says %08x", ErrCorrupt, got, want)
	}
	return data, true, nil
}
