package snapshot

import (
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"hash"
)

// A sealed file (WithMAC) proves who wrote it: CRCs find damage, but anyone
// can edit a section and write its CRCs again. Its last section, named
// MACSection, lists an HMAC-SHA256 of every other section (its kind, id and
// payload) and a seal: an HMAC of the header's bytes and that list. A
// reader given the key (Reader.Authenticated) checks the seal, that the
// list names exactly the file's other sections, and each section's MAC
// when it reads the section. The key is the writer's (a cluster derives
// it from its secret); files without the section read as before.

// MACSection names the section that seals a file.
const MACSection = "cep.mac"

const (
	macSize    = sha256.Size
	macVersion = 1
)

var (
	// ErrUnsealed: Authenticated was asked of a file with no MACSection.
	ErrUnsealed = errors.New("snapshot: not sealed (no MAC section): written without this key, or by a release that did not seal files")
	// ErrMAC: a MAC does not match the key: the file was written with
	// another key, or edited.
	ErrMAC = errors.New("snapshot: MAC does not match: written with another key, or edited")
)

// WriterOption configures a Writer.
type WriterOption func(*Writer)

// WithMAC seals the file with key (at least 16 bytes): see MACSection.
func WithMAC(key []byte) WriterOption {
	return func(w *Writer) {
		w.macKey = append([]byte(nil), key...)
	}
}

// sectionMAC is the MAC of one section: its kind and id, and its payload.
func sectionMAC(h hash.Hash, s SectionInfo, payload []byte) [macSize]byte {
	h.Reset()
	h.Write([]byte("section"))
	h.Write(s.appendID(nil))
	h.Write(payload)
	var m [macSize]byte
	h.Sum(m[:0])
	return m
}

// sealPayload is MACSection's payload: version, the sections' ids and
// MACs in file order, and the seal over the header bytes and that list.
func sealPayload(key, header []byte, sections []SectionInfo, macs [][macSize]byte) []byte {
	b := []byte{macVersion}
	b = le.AppendUint32(b, uint32(len(sections)))
	for i, s := range sections {
		b = s.appendID(b)
		b = append(b, macs[i][:]...)
	}
	seal := hmac.New(sha256.New, key)
	seal.Write([]byte("seal"))
	seal.Write(le.AppendUint32(nil, uint32(len(header))))
	seal.Write(header)
	seal.Write(b)
	return seal.Sum(b)
}

// Authenticated returns a reader of the same file that checks, with key,
// the file's seal now and each section's MAC whenever it is read (KeyGroup,
// Named, ForEachKeyGroup, Verify). It fails with ErrUnsealed or ErrMAC
// (wrapped in a *CorruptError naming MACSection's part of the file).
func (rd *Reader) Authenticated(key []byte) (*Reader, error) {
	i, ok := rd.named[MACSection]
	if !ok {
		return nil, ErrUnsealed
	}
	if i != len(rd.sections)-1 {
		return nil, corrupt(rd.sections[i].String(), rd.sections[i].Offset, "not the last section")
	}
	s := rd.sections[i]
	p, err := rd.read(i)
	if err != nil {
		return nil, err
	}
	bad := func(format string, a ...any) error { return corrupt(s.String(), s.Offset, format, a...) }
	others := rd.sections[:i]
	if len(p) < 5+macSize || p[0] != macVersion {
		return nil, bad("version or length")
	}
	header := make([]byte, rd.hdrEnd-preambleSize-crcSize)
	if err := readFull(rd.r, header, preambleSize); err != nil {
		return nil, corruptErr("header", 0, err)
	}
	body := p[:len(p)-macSize]
	seal := hmac.New(sha256.New, key)
	seal.Write([]byte("seal"))
	seal.Write(le.AppendUint32(nil, uint32(len(header))))
	seal.Write(header)
	seal.Write(body)
	if !hmac.Equal(seal.Sum(nil), p[len(p)-macSize:]) {
		return nil, corruptErr(s.String(), s.Offset, ErrMAC)
	}
	// sealed by the key: the list can be trusted, and must be the index's
	if n := int(le.Uint32(body[1:5])); n != len(others) {
		return nil, bad("lists %d sections, the index %d", n, len(others))
	}
	macs := make([][macSize]byte, len(others))
	rest := body[5:]
	for j, o := range others {
		id := o.appendID(nil)
		if len(rest) < len(id)+macSize || string(rest[:len(id)]) != string(id) {
			return nil, bad("does not list %s where the index has it", o)
		}
		copy(macs[j][:], rest[len(id):])
		rest = rest[len(id)+macSize:]
	}
	if len(rest) != 0 {
		return nil, bad("%d bytes after the list", len(rest))
	}
	c := *rd
	c.macKey, c.macs = append([]byte(nil), key...), macs
	return &c, nil
}

// checkMAC checks the payload of section i of an authenticated reader.
func (rd *Reader) checkMAC(i int, payload []byte) error {
	if rd.macs == nil || i >= len(rd.macs) {
		return nil // not authenticated, or the MAC section itself
	}
	s := rd.sections[i]
	if got := sectionMAC(hmac.New(sha256.New, rd.macKey), s, payload); !hmac.Equal(got[:], rd.macs[i][:]) {
		return corruptErr(s.String(), s.Offset, ErrMAC)
	}
	return nil
}
