package snapshot

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// Layout constants of format version 1. DESIGN.md describes every byte.
const (
	// Magic opens the file and closes its footer.
	Magic = "CEPS"
	// Version is the major format version this package writes and reads.
	// A reader rejects any other major version with ErrVersion.
	Version uint16 = 1

	indexMagic = "CEPX"

	preambleSize = 12 // magic, version, flags, header length
	crcSize      = 4
	footerSize   = 36

	// MaxHeaderSize bounds the header JSON, so that a damaged length cannot
	// make a reader allocate more than this before the header CRC is checked.
	MaxHeaderSize = 16 << 20
	// MaxNameLen is the longest named-section name, in bytes.
	MaxNameLen = 255
	// MaxKeyGroups is the largest key-group count K a header may declare.
	MaxKeyGroups = 1 << 16
	// DefaultKeyGroups is the key-group count K of a cluster that does not
	// choose one (Flink's default maxParallelism is 128; ours is 256).
	DefaultKeyGroups = 256

	minIndexSize = 8                                                      // index magic + count
	minFileSize  = preambleSize + 2 + crcSize + minIndexSize + footerSize // "{}" header, no sections
)

// Flags are the 16 feature bits of the preamble and footer. The low byte holds
// compatible features (a reader that does not know a bit ignores it); the high
// byte holds incompatible ones (a reader that does not know a bit rejects the
// file with ErrVersion). Version 1 defines none; writers write 0.
const (
	flagsIncompatMask uint16 = 0xff00
	knownFlags        uint16 = 0
)

// Section kinds, as stored in frames and index entries.
const (
	kindKeyGroup byte = 1
	kindNamed    byte = 2
)

// castagnoli is the CRC-32C table; every checksum in the format uses it.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func crc(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

var le = binary.LittleEndian

// Errors callers branch on, with errors.Is.
var (
	// ErrNotSnapshot: the data does not start (and end) with the magic "CEPS".
	ErrNotSnapshot = errors.New("snapshot: not a snapshot file (bad magic)")
	// ErrVersion: the file has a major version or an incompatible feature
	// flag this package does not know.
	ErrVersion = errors.New("snapshot: unsupported format version")
	// ErrCorrupt: a checksum does not match or the structure is inconsistent.
	// Every *CorruptError is ErrCorrupt.
	ErrCorrupt = errors.New("snapshot: corrupt")
	// ErrTruncated: the file is shorter than its structure says. It comes
	// wrapped in a *CorruptError, so errors.Is(err, ErrCorrupt) holds too.
	ErrTruncated = errors.New("truncated or footer missing")
	// ErrChecksum: a CRC-32C does not match. Wrapped in a *CorruptError.
	ErrChecksum = errors.New("checksum mismatch")
	// ErrOutOfRange: a key group outside the header's range, or outside [0,K).
	ErrOutOfRange = errors.New("snapshot: key group out of range")
	// ErrOrder: Writer.KeyGroup was called with a key group not above the
	// previous one.
	ErrOrder = errors.New("snapshot: key groups not in ascending order")
	// ErrDuplicate: Writer.Named was called twice with one name.
	ErrDuplicate = errors.New("snapshot: duplicate named section")
	// ErrClosed: the Writer was already closed.
	ErrClosed = errors.New("snapshot: writer closed")
	// ErrNotFound: a Store has no snapshot with that id.
	ErrNotFound = errors.New("snapshot: not found")
)

// CorruptError reports damage to one part of a file: Section is "header",
// "index", "footer", "file" (the whole-file checksum), "key group N" or
// "named section \"x\"". It matches ErrCorrupt with errors.Is and unwraps to
// the reason (ErrChecksum, ErrTruncated or a description).
type CorruptError struct {
	Section string
	Offset  int64 // where the damaged part starts in the file, -1 if unknown
	Err     error
}

func (e *CorruptError) Error() string {
	if e.Offset >= 0 {
		return fmt.Sprintf("snapshot: corrupt %s at offset %d: %v", e.Section, e.Offset, e.Err)
	}
	return fmt.Sprintf("snapshot: corrupt %s: %v", e.Section, e.Err)
}

// Unwrap returns the reason.
func (e *CorruptError) Unwrap() error { return e.Err }

// Is makes every CorruptError match ErrCorrupt.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

func corrupt(section string, off int64, format string, args ...any) *CorruptError {
	return &CorruptError{Section: section, Offset: off, Err: fmt.Errorf(format, args...)}
}

func corruptErr(section string, off int64, err error) *CorruptError {
	return &CorruptError{Section: section, Offset: off, Err: err}
}

// SectionKind tells key-group sections from named ones.
type SectionKind uint8

const (
	// KeyGroupSection holds the state of one key group.
	KeyGroupSection SectionKind = SectionKind(kindKeyGroup)
	// NamedSection holds shard-level state under a name, e.g. "watermarks".
	NamedSection SectionKind = SectionKind(kindNamed)
)

func (k SectionKind) String() string {
	switch k {
	case KeyGroupSection:
		return "keygroup"
	case NamedSection:
		return "named"
	}
	return fmt.Sprintf("SectionKind(%d)", uint8(k))
}

// SectionInfo describes one section as the index records it.
type SectionInfo struct {
	Kind     SectionKind
	KeyGroup int    // for KeyGroupSection
	Name     string // for NamedSection
	Offset   int64  // of the section frame in the file
	Length   int64  // of the payload
	CRC      uint32 // CRC-32C of the payload
}

// String names the section the way errors do: "key group 7" or
// `named section "watermarks"`.
func (s SectionInfo) String() string {
	if s.Kind == KeyGroupSection {
		return fmt.Sprintf("key group %d", s.KeyGroup)
	}
	return fmt.Sprintf("named section %q", s.Name)
}

// frameHeaderLen is the size of a section frame before its payload.
func (s SectionInfo) frameHeaderLen() int64 {
	if s.Kind == KeyGroupSection {
		return 1 + 4 + 8
	}
	return 1 + 1 + int64(len(s.Name)) + 8
}

// frameLen is the size of the whole frame: header, payload, CRC.
func (s SectionInfo) frameLen() int64 { return s.frameHeaderLen() + s.Length + crcSize }

// appendID appends kind and id (key group or name), the prefix shared by a
// frame header and an index entry.
func (s SectionInfo) appendID(b []byte) []byte {
	b = append(b, byte(s.Kind))
	if s.Kind == KeyGroupSection {
		return le.AppendUint32(b, uint32(s.KeyGroup))
	}
	b = append(b, byte(len(s.Name)))
	return append(b, s.Name...)
}

func (s SectionInfo) appendFrameHeader(b []byte) []byte {
	b = s.appendID(b)
	return le.AppendUint64(b, uint64(s.Length))
}

func (s SectionInfo) appendIndexEntry(b []byte) []byte {
	b = s.appendID(b)
	b = le.AppendUint64(b, uint64(s.Offset))
	b = le.AppendUint64(b, uint64(s.Length))
	return le.AppendUint32(b, s.CRC)
}

// ValidName reports whether name can name a section: 1 to 255 bytes of
// ASCII letters, digits, '.', '_', '-' and '/'.
func ValidName(name string) bool {
	if len(name) == 0 || len(name) > MaxNameLen {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9',
			c == '.', c == '_', c == '-', c == '/':
		default:
			return false
		}
	}
	return true
}
