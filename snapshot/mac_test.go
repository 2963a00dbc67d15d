package snapshot

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

var (
	keyA = bytes.Repeat([]byte{0xa1}, 32)
	keyB = bytes.Repeat([]byte{0xb2}, 32)
)

func macHeader() Header {
	return Header{ID: "sp-1-shard-1", Kind: KindSavepoint, ClusterID: "cep", KeyGroups: 16, FirstKeyGroup: 0, LastKeyGroup: 15, Shards: 1,
		Metadata: map[string]string{"patterns": "[]"}}
}

type macSection struct {
	kg      int // -1: named
	name    string
	payload []byte
}

// writeFile writes h and secs, sealed with key when it is not nil; a
// section named MACSection is written as it is (an attacker copying a
// seal), which Named refuses.
func writeFile(t testing.TB, h Header, secs []macSection, key []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	var opts []WriterOption
	if key != nil {
		opts = append(opts, WithMAC(key))
	}
	w, err := NewWriter(&buf, h, opts...)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range secs {
		switch {
		case s.kg >= 0:
			err = w.KeyGroup(s.kg, s.payload)
		case s.name == MACSection:
			err = w.section(SectionInfo{Kind: NamedSection, Name: MACSection}, s.payload)
		default:
			err = w.Named(s.name, s.payload)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// readAll reads every section of a file through an authenticated reader.
func readAll(t testing.TB, file, key []byte) ([]macSection, error) {
	t.Helper()
	r, err := NewReader(bytes.NewReader(file), int64(len(file)))
	if err != nil {
		t.Fatalf("the checksums do not hold: %v", err) // the edits rewrite them
	}
	ar, err := r.Authenticated(key)
	if err != nil {
		return nil, err
	}
	var out []macSection
	for _, s := range ar.Sections() {
		var p []byte
		if s.Kind == KeyGroupSection {
			p, err = ar.KeyGroup(s.KeyGroup)
			out = append(out, macSection{kg: s.KeyGroup, payload: p})
		} else {
			p, err = ar.Named(s.Name)
			out = append(out, macSection{kg: -1, name: s.Name, payload: p})
		}
		if err != nil {
			return nil, err
		}
	}
	if err := ar.Verify(); err != nil {
		return nil, verifyError{err}
	}
	return out, nil
}

// verifyError is an error Verify found where reading each section found
// none.
type verifyError struct{ error }

func (e verifyError) Unwrap() error { return e.error }

func sealOf(t testing.TB, file []byte) []byte {
	r, err := NewReader(bytes.NewReader(file), int64(len(file)))
	if err != nil {
		t.Fatal(err)
	}
	p, err := r.Named(MACSection)
	if err != nil || p == nil {
		t.Fatalf("no seal: %v", err)
	}
	return p
}

// A sealed file reads back with its key; with another key, unsealed, or
// edited with this package and its checksums written again (the seal
// copied from the original), it is refused naming what does not hold.
func TestSealedFiles(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		var secs []macSection
		secs = append(secs, macSection{kg: -1, name: "shard", payload: rapid.SliceOf(rapid.Byte()).Draw(rt, "shard")})
		for kg := range 16 {
			if rapid.Bool().Draw(rt, "present") {
				secs = append(secs, macSection{kg: kg, payload: rapid.SliceOfN(rapid.Byte(), 1, 64).Draw(rt, "payload")})
			}
		}
		h := macHeader()
		file := writeFile(t, h, secs, keyA)
		got, err := readAll(t, file, keyA)
		if err != nil {
			rt.Fatalf("sealed file with its key: %v", err)
		}
		got = got[:len(got)-1] // the seal
		if len(got) != len(secs) {
			rt.Fatalf("%d sections read, %d written", len(got), len(secs))
		}
		for i := range secs {
			if !bytes.Equal(got[i].payload, secs[i].payload) {
				rt.Fatalf("section %d differs", i)
			}
		}
		if _, err := readAll(t, file, keyB); !errors.Is(err, ErrMAC) {
			rt.Fatalf("with another key: %v, want ErrMAC", err)
		}
		if _, err := readAll(t, writeFile(t, h, secs, nil), keyA); !errors.Is(err, ErrUnsealed) {
			rt.Fatalf("unsealed: %v, want ErrUnsealed", err)
		}
		seal := sealOf(t, file)

		// one payload edited, the rest and the seal copied
		edited := append([]macSection(nil), secs...)
		i := rapid.IntRange(0, len(edited)-1).Draw(rt, "edited")
		p := append([]byte(nil), edited[i].payload...)
		if len(p) == 0 {
			p = []byte{1}
		} else {
			p[rapid.IntRange(0, len(p)-1).Draw(rt, "byte")] ^= byte(rapid.IntRange(1, 255).Draw(rt, "xor"))
		}
		edited[i].payload = p
		_, err = readAll(t, writeFile(t, h, append(edited, macSection{kg: -1, name: MACSection, payload: seal}), nil), keyA)
		if !errors.Is(err, ErrMAC) || errors.As(err, &verifyError{}) {
			rt.Fatalf("section %d edited, seal copied: %v, want ErrMAC when the section is read", i, err)
		}
		var ce *CorruptError
		if want := (SectionInfo{Kind: KeyGroupSection, KeyGroup: edited[i].kg, Name: edited[i].name}); edited[i].kg < 0 {
			want.Kind = NamedSection
			if !errors.As(err, &ce) || ce.Section != want.String() {
				rt.Fatalf("edited %s: the error names %v", want, err)
			}
		} else if !errors.As(err, &ce) || ce.Section != want.String() {
			rt.Fatalf("edited %s: the error names %v", want, err)
		}

		ef := writeFile(t, h, append(edited, macSection{kg: -1, name: MACSection, payload: seal}), nil)
		er, err := NewReader(bytes.NewReader(ef), int64(len(ef)))
		if err != nil {
			rt.Fatal(err)
		}
		if ar, err := er.Authenticated(keyA); err != nil {
			rt.Fatalf("the seal of an edited section's file: %v", err)
		} else if err := ar.Verify(); !errors.Is(err, ErrMAC) {
			rt.Fatalf("Verify of section %d edited: %v, want ErrMAC", i, err)
		}
		// the header edited, sections and seal copied
		h2 := h
		h2.ClusterID = "another"
		if _, err := readAll(t, writeFile(t, h2, append(secs, macSection{kg: -1, name: MACSection, payload: seal}), nil), keyA); !errors.Is(err, ErrMAC) {
			rt.Fatalf("header edited, seal copied: %v, want ErrMAC", err)
		}
		// a section left out, the seal copied
		if len(secs) > 1 {
			j := rapid.IntRange(0, len(secs)-1).Draw(rt, "dropped")
			fewer := append(append([]macSection(nil), secs[:j]...), secs[j+1:]...)
			_, err := readAll(t, writeFile(t, h, append(fewer, macSection{kg: -1, name: MACSection, payload: seal}), nil), keyA)
			if err == nil || !strings.Contains(err.Error(), "lists") && !strings.Contains(err.Error(), "does not list") {
				rt.Fatalf("a section dropped, seal copied: %v, want the list refused", err)
			}
		}
	})
}

// The seal's name is the writer's alone.
func TestMACSectionReserved(t *testing.T) {
	w, err := NewWriter(&bytes.Buffer{}, macHeader())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Named(MACSection, nil); err == nil {
		t.Fatal("Named wrote the seal's section")
	}
}
