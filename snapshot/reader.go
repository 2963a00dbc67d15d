package snapshot

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"sort"
)

// Reader reads a file by random access. NewReader checks the footer, the
// index and the header; each section is checked (CRC-32C of its payload, and
// its frame against the index) when it is read; Verify checks everything,
// including the whole-file checksum.
//
// A Reader holds no lock and never changes after NewReader, so it is safe for
// concurrent use as far as the underlying io.ReaderAt is (io.ReaderAt's
// contract allows parallel ReadAt calls). It does not own the ReaderAt:
// closing that is the caller's job.
type Reader struct {
	r        io.ReaderAt
	size     int64
	flags    uint16
	h        Header
	hdrEnd   int64 // first byte after the header CRC
	indexOff int64
	indexLen int64
	fileCRC  uint32
	sections []SectionInfo // in file order
	kgs      []int         // index into sections, sorted by key group
	named    map[string]int

	// set by Authenticated: the key and the MAC of each section but the seal
	macKey []byte
	macs   [][macSize]byte
}

// NewReader opens a file of the given size. It verifies, in this order, the
// magic at both ends, the version, the footer's checksum, the header's
// checksum and fields, and the index's checksum and structure. It reads the
// preamble, the footer, the header and the index, and nothing else; no
// allocation exceeds what the file's size allows.
func NewReader(r io.ReaderAt, size int64) (*Reader, error) {
	if size < 4 {
		return nil, ErrNotSnapshot
	}
	var pre [preambleSize]byte
	preN, _ := r.ReadAt(pre[:min(int64(preambleSize), size)], 0)
	if preN < 4 {
		return nil, corrupt("header", 0, "short read")
	}
	var foot [footerSize]byte
	footOK := false
	if size >= footerSize {
		if n, _ := r.ReadAt(foot[:], size-footerSize); n == footerSize && string(foot[32:]) == Magic {
			footOK = true
		}
	}
	if string(pre[:4]) != Magic {
		if footOK {
			return nil, corrupt("header", 0, "bad magic %q", pre[:4])
		}
		return nil, ErrNotSnapshot
	}
	if preN >= 6 {
		if v := le.Uint16(pre[4:6]); v != Version {
			if footOK && le.Uint16(foot[26:28]) == v {
				return nil, fmt.Errorf("%w: major version %d (this reader knows %d)", ErrVersion, v, Version)
			}
			return nil, corrupt("header", 0, "version %d, footer disagrees", v)
		}
	}
	if size < minFileSize || preN < preambleSize || !footOK {
		return nil, corruptErr("footer", max(size-footerSize, 0), ErrTruncated)
	}

	// Footer.
	footOff := size - footerSize
	if crc(foot[:28]) != le.Uint32(foot[28:32]) {
		return nil, corruptErr("footer", footOff, ErrChecksum)
	}
	rd := &Reader{r: r, size: size}
	indexOff, indexLen := le.Uint64(foot[0:8]), le.Uint64(foot[8:16])
	indexCRC := le.Uint32(foot[16:20])
	rd.fileCRC = le.Uint32(foot[20:24])
	rd.flags = le.Uint16(foot[24:26])
	if le.Uint16(foot[26:28]) != Version || rd.flags != le.Uint16(pre[6:8]) {
		return nil, corrupt("header", 0, "version or flags disagree with the footer")
	}
	if unknown := rd.flags &^ knownFlags & flagsIncompatMask; unknown != 0 {
		return nil, fmt.Errorf("%w: unknown incompatible feature flags %#04x", ErrVersion, unknown)
	}
	hdrLen := int64(le.Uint32(pre[8:12]))
	rd.hdrEnd = preambleSize + hdrLen + crcSize
	if hdrLen > MaxHeaderSize || rd.hdrEnd > footOff {
		return nil, corrupt("header", 0, "header length %d exceeds the file", hdrLen)
	}
	// Header.
	hdr := make([]byte, preambleSize+hdrLen+crcSize)
	if err := readFull(r, hdr, 0); err != nil {
		return nil, corruptErr("header", 0, err)
	}
	body := hdr[:preambleSize+hdrLen]
	if crc(body) != le.Uint32(hdr[preambleSize+hdrLen:]) {
		return nil, corruptErr("header", 0, ErrChecksum)
	}
	if err := json.Unmarshal(body[preambleSize:], &rd.h); err != nil {
		return nil, corrupt("header", 0, "decoding JSON: %v", err)
	}
	if err := rd.h.Validate(); err != nil {
		return nil, corruptErr("header", 0, err)
	}

	if indexOff < uint64(rd.hdrEnd) || indexOff > uint64(footOff) || indexLen != uint64(footOff)-indexOff || indexLen < minIndexSize {
		return nil, corrupt("footer", footOff, "index at %d, length %d, does not end at the footer", indexOff, indexLen)
	}
	rd.indexOff, rd.indexLen = int64(indexOff), int64(indexLen)

	// Index. Its length is bounded by the file size, so reading it whole is safe.
	idx := make([]byte, rd.indexLen)
	if err := readFull(r, idx, rd.indexOff); err != nil {
		return nil, corruptErr("index", rd.indexOff, err)
	}
	if crc(idx) != indexCRC {
		return nil, corruptErr("index", rd.indexOff, ErrChecksum)
	}

	if err := rd.parseIndex(idx); err != nil {
		return nil, err
	}
	return rd, nil
}

// parseIndex decodes the index and checks it against the header and the
// file: sections lie back to back from the end of the header to the index,
// key groups ascend within the header's range, names are valid and unique.
func (rd *Reader) parseIndex(idx []byte) error {
	bad := func(format string, args ...any) error { return corrupt("index", rd.indexOff, format, args...) }
	if string(idx[:4]) != indexMagic {
		return bad("bad index magic")
	}
	n := int64(le.Uint32(idx[4:8]))
	const minEntry = 1 + 1 + 1 + 8 + 8 + 4 // a named entry with a one-byte name
	p := idx[8:]
	if n > int64(len(p))/minEntry {
		return bad("%d entries cannot fit in %d bytes", n, len(p))
	}
	rd.sections = make([]SectionInfo, 0, n)
	rd.named = map[string]int{}
	next := rd.hdrEnd
	lastKG := -1
	for i := int64(0); i < n; i++ {
		if len(p) < 1 {
			return bad("entry %d truncated", i)
		}
		var s SectionInfo
		s.Kind = SectionKind(p[0])
		p = p[1:]
		switch s.Kind {
		case KeyGroupSection:
			if len(p) < 4 {
				return bad("entry %d truncated", i)
			}
			s.KeyGroup = int(le.Uint32(p))
			p = p[4:]
			if !rd.h.Covers(s.KeyGroup) || s.KeyGroup <= lastKG {
				return bad("entry %d: key group %d out of order or outside [%d, %d]", i, s.KeyGroup, rd.h.FirstKeyGroup, rd.h.LastKeyGroup)
			}
			lastKG = s.KeyGroup
		case NamedSection:
			if len(p) < 1 || len(p) < 1+int(p[0]) {
				return bad("entry %d truncated", i)
			}
			s.Name = string(p[1 : 1+int(p[0])])
			p = p[1+int(p[0]):]
			if !ValidName(s.Name) {
				return bad("entry %d: invalid name %q", i, s.Name)
			}
			if _, dup := rd.named[s.Name]; dup {
				return bad("entry %d: duplicate name %q", i, s.Name)
			}
		default:
			return bad("entry %d: unknown section kind %d", i, s.Kind)
		}
		if len(p) < 8+8+4 {
			return bad("entry %d truncated", i)
		}
		off, length := le.Uint64(p[0:8]), le.Uint64(p[8:16])
		s.CRC = le.Uint32(p[16:20])
		p = p[20:]
		if off != uint64(next) || length > uint64(rd.indexOff) {
			return bad("entry %d (%s): offset %d, length %d; expected offset %d", i, s, off, length, next)
		}
		s.Offset, s.Length = int64(off), int64(length)
		next += s.frameLen()
		if next > rd.indexOff {
			return bad("entry %d (%s) runs past the index", i, s)
		}
		if s.Kind == NamedSection {
			rd.named[s.Name] = len(rd.sections)
		} else {
			rd.kgs = append(rd.kgs, len(rd.sections))
		}
		rd.sections = append(rd.sections, s)
	}
	if len(p) != 0 {
		return bad("%d trailing bytes", len(p))
	}
	if next != rd.indexOff {
		return bad("sections end at %d, index starts at %d", next, rd.indexOff)
	}
	return nil
}

// readFull reads len(b) bytes at off; a short read is ErrTruncated.
func readFull(r io.ReaderAt, b []byte, off int64) error {
	n, err := r.ReadAt(b, off)
	if n == len(b) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		return ErrTruncated
	}
	return err
}

// Header returns a copy of the file's header.
func (rd *Reader) Header() Header { return rd.h.clone() }

// Flags returns the feature flags of the file (0 in version 1).
func (rd *Reader) Flags() uint16 { return rd.flags }

// Size returns the file size given to NewReader.
func (rd *Reader) Size() int64 { return rd.size }

// KeyGroups returns the key groups that have a section, ascending.
func (rd *Reader) KeyGroups() []int {
	out := make([]int, len(rd.kgs))
	for i, si := range rd.kgs {
		out[i] = rd.sections[si].KeyGroup
	}
	return out
}

// Names returns the names of the named sections, sorted.
func (rd *Reader) Names() []string {
	out := make([]string, 0, len(rd.named))
	for n := range rd.named {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Sections returns the index: every section in file order.
func (rd *Reader) Sections() []SectionInfo { return append([]SectionInfo(nil), rd.sections...) }

// KeyGroup returns the payload of key group kg after checking its frame and
// CRC. It returns (nil, nil) when the file covers kg but has no section for
// it (the key group was empty), and ErrOutOfRange when kg lies outside the
// header's range. A present but empty section returns a non-nil empty slice.
func (rd *Reader) KeyGroup(kg int) ([]byte, error) {
	if !rd.h.Covers(kg) {
		return nil, fmt.Errorf("%w: %d not in [%d, %d]", ErrOutOfRange, kg, rd.h.FirstKeyGroup, rd.h.LastKeyGroup)
	}
	i := sort.Search(len(rd.kgs), func(i int) bool { return rd.sections[rd.kgs[i]].KeyGroup >= kg })
	if i == len(rd.kgs) || rd.sections[rd.kgs[i]].KeyGroup != kg {
		return nil, nil
	}
	return rd.read(rd.kgs[i])
}

// Named returns the payload of the named section, checked like KeyGroup's,
// or (nil, nil) when the file has no section of that name.
func (rd *Reader) Named(name string) ([]byte, error) {
	i, ok := rd.named[name]
	if !ok {
		return nil, nil
	}
	return rd.read(i)
}

// read reads section i's whole frame with a single ReadAt and checks it
// (and its MAC, when authenticated).
func (rd *Reader) read(i int) ([]byte, error) {
	s := rd.sections[i]
	buf := make([]byte, s.frameLen()) // bounded: parseIndex checked the frame lies in the file
	if err := readFull(rd.r, buf, s.Offset); err != nil {
		return nil, corruptErr(s.String(), s.Offset, err)
	}
	hl := s.frameHeaderLen()
	if !bytes.Equal(buf[:hl], s.appendFrameHeader(make([]byte, 0, hl))) {
		return nil, corrupt(s.String(), s.Offset, "frame header does not match the index")
	}
	payload := buf[hl : hl+s.Length : hl+s.Length]
	stored := le.Uint32(buf[hl+s.Length:])
	if stored != s.CRC {
		return nil, corrupt(s.String(), s.Offset, "frame CRC does not match the index")
	}
	if crc(payload) != s.CRC {
		return nil, corruptErr(s.String(), s.Offset, ErrChecksum)
	}
	if err := rd.checkMAC(i, payload); err != nil {
		return nil, err
	}
	return payload, nil
}

// Verify reads the whole file once, with a bounded buffer, and checks every
// section's frame and CRC and the whole-file CRC-32C. The error names the
// first damaged section, or "file" when only the whole-file checksum fails.
func (rd *Reader) Verify() error {
	const chunk = 1 << 20
	buf := make([]byte, min(chunk, rd.size))
	file := crc32.New(castagnoli)
	// stream feeds [off, off+n) to the file CRC and to each extra hash.
	stream := func(section string, off, n int64, extra ...func([]byte)) error {
		for n > 0 {
			b := buf[:min(n, int64(len(buf)))]
			if err := readFull(rd.r, b, off); err != nil {
				return corruptErr(section, off, err)
			}
			file.Write(b)
			for _, f := range extra {
				f(b)
			}
			off += int64(len(b))
			n -= int64(len(b))
		}
		return nil
	}
	if err := stream("header", 0, rd.hdrEnd); err != nil {
		return err
	}
	for i, s := range rd.sections {
		hl := s.frameHeaderLen()
		var head []byte
		if err := stream(s.String(), s.Offset, hl, func(b []byte) { head = append(head, b...) }); err != nil {
			return err
		}
		if !bytes.Equal(head, s.appendFrameHeader(nil)) {
			return corrupt(s.String(), s.Offset, "frame header does not match the index")
		}
		pc := crc32.New(castagnoli)
		hashes := []func([]byte){func(b []byte) { pc.Write(b) }}
		var mac hash.Hash
		if rd.macs != nil && i < len(rd.macs) {
			mac = hmac.New(sha256.New, rd.macKey)
			mac.Write([]byte("section"))
			mac.Write(s.appendID(nil))
			hashes = append(hashes, func(b []byte) { mac.Write(b) })
		}
		if err := stream(s.String(), s.Offset+hl, s.Length, hashes...); err != nil {
			return err
		}
		var tail []byte
		if err := stream(s.String(), s.Offset+hl+s.Length, crcSize, func(b []byte) { tail = append(tail, b...) }); err != nil {
			return err
		}
		if le.Uint32(tail) != s.CRC {
			return corrupt(s.String(), s.Offset, "frame CRC does not match the index")
		}
		if pc.Sum32() != s.CRC {
			return corruptErr(s.String(), s.Offset, ErrChecksum)
		}
		// damage is a checksum's to name; a MAC finds what checksums hold for
		if mac != nil && !hmac.Equal(mac.Sum(nil), rd.macs[i][:]) {
			return corruptErr(s.String(), s.Offset, ErrMAC)
		}
	}
	if err := stream("index", rd.indexOff, rd.indexLen); err != nil {
		return err
	}
	if file.Sum32() != rd.fileCRC {
		return corruptErr("file", -1, ErrChecksum)
	}
	return nil
}
