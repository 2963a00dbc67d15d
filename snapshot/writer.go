package snapshot

import (
	"bufio"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
)

// Writer writes one file: NewWriter writes the header, KeyGroup and Named
// append sections, Close appends the index and the footer. The bytes written
// are a deterministic function of the header and the calls made, so replicas
// that snapshot the same state produce identical files.
//
// A Writer is not safe for concurrent use; one goroutine owns it. The first
// error is sticky: every later call returns it.
type Writer struct {
	bw       *bufio.Writer
	h        Header
	fileCRC  hash.Hash32
	off      int64
	sections []SectionInfo
	names    map[string]bool
	lastKG   int
	err      error
	closed   bool
	scratch  []byte

	// sealing (WithMAC): the header's bytes and each section's MAC
	macKey []byte
	mac    hash.Hash
	header []byte
	macs   [][macSize]byte
}

// NewWriter validates h and writes the preamble and the header to w. It does
// not close w: after Close, the caller closes (and, for a file, syncs) w.
func NewWriter(w io.Writer, h Header, opts ...WriterOption) (*Writer, error) {
	if err := h.Validate(); err != nil {
		return nil, err
	}
	js, err := json.Marshal(h)
	if err != nil {
		return nil, fmt.Errorf("snapshot: encoding header: %w", err)
	}
	if len(js) > MaxHeaderSize {
		return nil, herr("header", "encoded header is %d bytes, more than %d", len(js), MaxHeaderSize)
	}
	sw := &Writer{
		bw:      bufio.NewWriterSize(w, 64<<10),
		h:       h.clone(),
		fileCRC: crc32.New(castagnoli),
		names:   map[string]bool{},
		lastKG:  -1,
	}
	for _, o := range opts {
		o(sw)
	}
	if sw.macKey != nil {
		if len(sw.macKey) < 16 {
			return nil, errors.New("snapshot: a MAC key of fewer than 16 bytes")
		}
		sw.mac, sw.header = hmac.New(sha256.New, sw.macKey), js
	}
	b := make([]byte, 0, preambleSize+len(js)+crcSize)
	b = append(b, Magic...)
	b = le.AppendUint16(b, Version)
	b = le.AppendUint16(b, 0) // flags
	b = le.AppendUint32(b, uint32(len(js)))
	b = append(b, js...)
	b = le.AppendUint32(b, crc(b))
	if err := sw.write(b); err != nil {
		return nil, err
	}
	return sw, nil
}

// write appends p to the file, keeping the offset and the whole-file CRC.
func (w *Writer) write(p []byte) error {
	if w.err != nil {
		return w.err
	}
	n, err := w.bw.Write(p)
	w.fileCRC.Write(p[:n])
	w.off += int64(n)
	if err != nil {
		w.err = fmt.Errorf("snapshot: write: %w", err)
	}
	return w.err
}

func (w *Writer) check() error {
	if w.err != nil {
		return w.err
	}
	if w.closed {
		return ErrClosed
	}
	return nil
}

// KeyGroup writes the section of key group kg. Key groups must come in
// strictly ascending order and lie in the header's range; an empty payload
// is written as a present, empty section (omit the call to leave kg absent).
func (w *Writer) KeyGroup(kg int, payload []byte) error {
	if err := w.check(); err != nil {
		return err
	}
	if !w.h.Covers(kg) {
		return fmt.Errorf("%w: %d not in [%d, %d]", ErrOutOfRange, kg, w.h.FirstKeyGroup, w.h.LastKeyGroup)
	}
	if kg <= w.lastKG {
		return fmt.Errorf("%w: %d after %d", ErrOrder, kg, w.lastKG)
	}
	w.lastKG = kg
	return w.section(SectionInfo{Kind: KeyGroupSection, KeyGroup: kg}, payload)
}

// Named writes a shard-level section that belongs to no key group, such as
// "watermarks". Names must be unique in a file and satisfy ValidName. Named
// sections may come before, between or after key groups.
func (w *Writer) Named(name string, payload []byte) error {
	if err := w.check(); err != nil {
		return err
	}
	if !ValidName(name) || name == MACSection {
		return fmt.Errorf("snapshot: invalid section name %q", name)
	}
	if w.names[name] {
		return fmt.Errorf("%w: %q", ErrDuplicate, name)
	}
	w.names[name] = true
	return w.section(SectionInfo{Kind: NamedSection, Name: name}, payload)
}

func (w *Writer) section(s SectionInfo, payload []byte) error {
	s.Offset = w.off
	s.Length = int64(len(payload))
	s.CRC = crc(payload)
	w.scratch = s.appendFrameHeader(w.scratch[:0])
	if err := w.write(w.scratch); err != nil {
		return err
	}
	if err := w.write(payload); err != nil {
		return err
	}
	w.scratch = le.AppendUint32(w.scratch[:0], s.CRC)
	if err := w.write(w.scratch); err != nil {
		return err
	}
	w.sections = append(w.sections, s)
	if w.mac != nil {
		w.macs = append(w.macs, sectionMAC(w.mac, s, payload))
	}
	return nil
}

// Close writes the index and the footer and flushes. It does not close the
// underlying writer. Calling Close again returns ErrClosed.
func (w *Writer) Close() error {
	if err := w.check(); err != nil {
		return err
	}
	if w.mac != nil {
		seal := sealPayload(w.macKey, w.header, w.sections, w.macs)
		w.mac = nil // the seal has no MAC of its own in the list
		if err := w.section(SectionInfo{Kind: NamedSection, Name: MACSection}, seal); err != nil {
			return err
		}
	}
	w.closed = true
	idx := append([]byte(nil), indexMagic...)
	idx = le.AppendUint32(idx, uint32(len(w.sections)))
	for _, s := range w.sections {
		idx = s.appendIndexEntry(idx)
	}
	indexOff := w.off
	if err := w.write(idx); err != nil {
		return err
	}
	f := make([]byte, 0, footerSize)
	f = le.AppendUint64(f, uint64(indexOff))
	f = le.AppendUint64(f, uint64(len(idx)))
	f = le.AppendUint32(f, crc(idx))
	f = le.AppendUint32(f, w.fileCRC.Sum32())
	f = le.AppendUint16(f, 0) // flags
	f = le.AppendUint16(f, Version)
	f = le.AppendUint32(f, crc(f))
	f = append(f, Magic...)
	if err := w.write(f); err != nil {
		return err
	}
	if err := w.bw.Flush(); err != nil {
		w.err = fmt.Errorf("snapshot: write: %w", err)
		return w.err
	}
	return nil
}

// Size is the number of bytes written so far (the file size after Close).
func (w *Writer) Size() int64 { return w.off }
