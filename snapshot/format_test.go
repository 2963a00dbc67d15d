package snapshot_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"reflect"
	"testing"

	"github.com/cepcluster/cep/keygroup"
	"github.com/cepcluster/cep/snapshot"
)

func roundTripSections() []section {
	return []section{
		namedSec("watermarks", `{"payments":1700000000000}`),
		kgSec(1, "state of key group one"),
		kgSec(3, ""), // present, empty
		kgSec(7, string(bytes.Repeat([]byte{0, 1, 2, 0xff}, 1000))),
		namedSec("outbox", "pending records"),
		kgSec(15, "last"),
	}
}

func TestRoundTrip(t *testing.T) {
	h := testHeader()
	data := build(t, h, roundTripSections())
	r := open(t, data)

	if got := r.Header(); !reflect.DeepEqual(got, h) {
		t.Errorf("header:\n got %+v\nwant %+v", got, h)
	}
	if got, want := r.KeyGroups(), []int{1, 3, 7, 15}; !reflect.DeepEqual(got, want) {
		t.Errorf("KeyGroups() = %v, want %v", got, want)
	}
	if got, want := r.Names(), []string{"outbox", "watermarks"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Names() = %v, want %v", got, want)
	}
	for _, s := range roundTripSections() {
		var got []byte
		var err error
		if s.kg >= 0 {
			got, err = r.KeyGroup(s.kg)
		} else {
			got, err = r.Named(s.name)
		}
		if err != nil || !bytes.Equal(got, s.payload) || got == nil {
			t.Errorf("section %d/%q = %q, %v; want %q", s.kg, s.name, got, err, s.payload)
		}
	}
	for _, kg := range []int{0, 2, 4, 14} {
		if got, err := r.KeyGroup(kg); got != nil || err != nil {
			t.Errorf("absent KeyGroup(%d) = %q, %v; want nil, nil", kg, got, err)
		}
	}
	if got, err := r.Named("nope"); got != nil || err != nil {
		t.Errorf("absent Named = %q, %v", got, err)
	}
	if err := r.Verify(); err != nil {
		t.Errorf("Verify: %v", err)
	}
	secs := r.Sections()
	if len(secs) != 6 || secs[0].Kind != snapshot.NamedSection || secs[1].Kind != snapshot.KeyGroupSection || secs[1].KeyGroup != 1 {
		t.Errorf("Sections() = %+v", secs)
	}
	// The header handed out is a copy.
	hh := r.Header()
	hh.Metadata["a"] = "changed"
	hh.Sources[0].Subjects[0] = "changed"
	if got := r.Header(); !reflect.DeepEqual(got, h) {
		t.Errorf("header changed through a copy: %+v", got)
	}
}

func TestEmptyFile(t *testing.T) {
	h := testHeader()
	h.Patterns, h.Sources, h.Metadata = nil, nil, nil
	data := build(t, h, nil)
	r := open(t, data)
	if len(r.KeyGroups()) != 0 || len(r.Names()) != 0 {
		t.Errorf("sections in an empty file: %v %v", r.KeyGroups(), r.Names())
	}
	if err := r.Verify(); err != nil {
		t.Error(err)
	}
	if !reflect.DeepEqual(r.Header(), h) {
		t.Errorf("header %+v", r.Header())
	}
}

// The bytes are a function of the inputs only.
func TestDeterministic(t *testing.T) {
	a := build(t, testHeader(), roundTripSections())
	for range 5 {
		if b := build(t, testHeader(), roundTripSections()); !bytes.Equal(a, b) {
			t.Fatal("same inputs wrote different bytes")
		}
	}
}

// NewReader reads only the preamble, the footer, the header and the index;
// reading one key group reads only that section's frame.
func TestRandomAccess(t *testing.T) {
	data := build(t, testHeader(), roundTripSections())
	rec := &recordingReaderAt{r: bytes.NewReader(data)}
	r, err := snapshot.NewReader(rec, int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	secs := r.Sections()
	last := secs[len(secs)-1]
	sectionsStart, sectionsEnd := secs[0].Offset, last.Offset+frameLen(last)
	for _, rg := range rec.take() {
		if rg[0] < sectionsEnd && rg[1] > sectionsStart {
			t.Errorf("NewReader read %v, inside the sections [%d, %d)", rg, sectionsStart, sectionsEnd)
		}
	}
	var kg7 snapshot.SectionInfo
	for _, s := range secs {
		if s.Kind == snapshot.KeyGroupSection && s.KeyGroup == 7 {
			kg7 = s
		}
	}
	if _, err := r.KeyGroup(7); err != nil {
		t.Fatal(err)
	}
	reads := rec.take()
	if len(reads) != 1 || reads[0][0] != kg7.Offset || reads[0][1]-reads[0][0] != 1+4+8+kg7.Length+4 {
		t.Errorf("KeyGroup(7) read %v; want the one frame at %d (payload %d bytes)", reads, kg7.Offset, kg7.Length)
	}
	if got, _ := r.KeyGroup(4); got != nil || len(rec.take()) != 0 {
		t.Error("an absent key group read the file")
	}
}

func TestWriterErrors(t *testing.T) {
	h := testHeader()
	h.FirstKeyGroup, h.LastKeyGroup = 4, 9
	newW := func() *snapshot.Writer {
		w, err := snapshot.NewWriter(&bytes.Buffer{}, h)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	w := newW()
	if err := w.KeyGroup(3, nil); !errors.Is(err, snapshot.ErrOutOfRange) {
		t.Errorf("below range: %v", err)
	}
	if err := w.KeyGroup(10, nil); !errors.Is(err, snapshot.ErrOutOfRange) {
		t.Errorf("above range: %v", err)
	}
	if err := w.KeyGroup(5, nil); err != nil {
		t.Fatal(err)
	}
	if err := w.KeyGroup(5, nil); !errors.Is(err, snapshot.ErrOrder) {
		t.Errorf("repeat: %v", err)
	}
	if err := w.KeyGroup(4, nil); !errors.Is(err, snapshot.ErrOrder) {
		t.Errorf("descending: %v", err)
	}
	if err := w.Named("wm", nil); err != nil {
		t.Fatal(err)
	}
	if err := w.Named("wm", nil); !errors.Is(err, snapshot.ErrDuplicate) {
		t.Errorf("duplicate name: %v", err)
	}
	for _, bad := range []string{"", "has space", "ü", string(bytes.Repeat([]byte("x"), 256))} {
		if err := w.Named(bad, nil); err == nil {
			t.Errorf("Named(%q) accepted", bad)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); !errors.Is(err, snapshot.ErrClosed) {
		t.Errorf("second Close: %v", err)
	}
	if err := w.KeyGroup(8, nil); !errors.Is(err, snapshot.ErrClosed) {
		t.Errorf("KeyGroup after Close: %v", err)
	}

	// A failing writer's error is sticky.
	fw := &failingWriter{after: 100}
	w2, err := snapshot.NewWriter(fw, h)
	if err != nil {
		t.Fatal(err)
	}
	_ = w2.KeyGroup(4, make([]byte, 200<<10))
	if err := w2.Close(); err == nil {
		t.Error("Close succeeded on a failing writer")
	}
}

type failingWriter struct{ after int }

func (f *failingWriter) Write(p []byte) (int, error) {
	if len(p) > f.after {
		n := f.after
		f.after = 0
		return n, errors.New("disk full")
	}
	f.after -= len(p)
	return len(p), nil
}

func TestHeaderValidation(t *testing.T) {
	for name, mut := range map[string]func(*snapshot.Header){
		"empty id":       func(h *snapshot.Header) { h.ID = "" },
		"control in id":  func(h *snapshot.Header) { h.ID = "a\nb" },
		"kind":           func(h *snapshot.Header) { h.Kind = "backup" },
		"zero K":         func(h *snapshot.Header) { h.KeyGroups = 0 },
		"huge K":         func(h *snapshot.Header) { h.KeyGroups = snapshot.MaxKeyGroups + 1 },
		"first > last":   func(h *snapshot.Header) { h.FirstKeyGroup, h.LastKeyGroup = 5, 4 },
		"last >= K":      func(h *snapshot.Header) { h.LastKeyGroup = h.KeyGroups },
		"negative first": func(h *snapshot.Header) { h.FirstKeyGroup = -1 },
		"shards > K":     func(h *snapshot.Header) { h.Shards = h.KeyGroups + 1 },
		"pattern name":   func(h *snapshot.Header) { h.Patterns[0].Name = "" },
		"source name":    func(h *snapshot.Header) { h.Sources[0].Name = "" },
	} {
		h := testHeader()
		mut(&h)
		_, err := snapshot.NewWriter(&bytes.Buffer{}, h)
		var he *snapshot.HeaderError
		if !errors.As(err, &he) {
			t.Errorf("%s: NewWriter error %v, want a *HeaderError", name, err)
		}
	}
}

// rewrite patches data at off and fixes every checksum so that only the
// patched meaning differs: header CRC, footer CRC, file CRC.
func rewrite(t *testing.T, data []byte, patch func([]byte)) []byte {
	t.Helper()
	d := append([]byte(nil), data...)
	patch(d)
	le := binary.LittleEndian
	tab := crc32.MakeTable(crc32.Castagnoli)
	hl := int(le.Uint32(d[8:12]))
	if 12+hl+4 <= len(d) {
		le.PutUint32(d[12+hl:], crc32.Checksum(d[:12+hl], tab))
	}
	f := d[len(d)-36:]
	le.PutUint32(f[20:24], crc32.Checksum(d[:len(d)-36], tab))
	le.PutUint32(f[28:32], crc32.Checksum(f[:28], tab))
	return d
}

func TestVersionAndMagic(t *testing.T) {
	data := build(t, testHeader(), roundTripSections())
	// A future major version, stated consistently at both ends.
	v2 := rewrite(t, data, func(d []byte) {
		binary.LittleEndian.PutUint16(d[4:6], 2)
		binary.LittleEndian.PutUint16(d[len(d)-10:], 2)
	})
	if _, err := snapshot.NewReader(bytes.NewReader(v2), int64(len(v2))); !errors.Is(err, snapshot.ErrVersion) {
		t.Errorf("version 2: %v, want ErrVersion", err)
	}
	// An unknown incompatible feature flag.
	inc := rewrite(t, data, func(d []byte) {
		binary.LittleEndian.PutUint16(d[6:8], 0x0100)
		binary.LittleEndian.PutUint16(d[len(d)-12:], 0x0100)
	})
	if _, err := snapshot.NewReader(bytes.NewReader(inc), int64(len(inc))); !errors.Is(err, snapshot.ErrVersion) {
		t.Errorf("incompatible flag: %v, want ErrVersion", err)
	}
	// An unknown compatible feature flag is ignored.
	comp := rewrite(t, data, func(d []byte) {
		binary.LittleEndian.PutUint16(d[6:8], 0x0001)
		binary.LittleEndian.PutUint16(d[len(d)-12:], 0x0001)
	})
	r, err := snapshot.NewReader(bytes.NewReader(comp), int64(len(comp)))
	if err != nil || r.Flags() != 1 {
		t.Errorf("compatible flag: %v", err)
	} else if err := r.Verify(); err != nil {
		t.Errorf("compatible flag: Verify: %v", err)
	}
	// Not a snapshot at all.
	for _, junk := range [][]byte{[]byte("PK\x03\x04 a zip file, or so it says......................................."), {}, []byte("CEP")} {
		if _, err := snapshot.NewReader(bytes.NewReader(junk), int64(len(junk))); !errors.Is(err, snapshot.ErrNotSnapshot) {
			t.Errorf("junk %q: %v, want ErrNotSnapshot", junk, err)
		}
	}
	// Trailing garbage moves the footer: truncation/footer error.
	long := append(append([]byte(nil), data...), "garbage"...)
	if _, err := snapshot.NewReader(bytes.NewReader(long), int64(len(long))); !errors.Is(err, snapshot.ErrCorrupt) {
		t.Errorf("trailing garbage: %v", err)
	}
}

// A header with fields this reader does not know is read (forward
// compatibility within a major version).
func TestUnknownHeaderFields(t *testing.T) {
	h := testHeader()
	h.Metadata = nil
	var buf bytes.Buffer
	w, err := snapshot.NewWriter(&buf, h)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	// Rebuild the file by hand with an extra field in the header JSON.
	d := buf.Bytes()
	hl := int(binary.LittleEndian.Uint32(d[8:12]))
	js := append([]byte(`{"futureField":{"x":[1,2]},`), d[13:12+hl]...)
	rest := d[12+hl+4:] // index + footer
	var out []byte
	out = append(out, d[:8]...)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(js)))
	out = append(out, js...)
	out = binary.LittleEndian.AppendUint32(out, 0)
	shift := uint64(len(js) - hl)
	out = append(out, rest...)
	f := out[len(out)-36:]
	binary.LittleEndian.PutUint64(f[0:8], binary.LittleEndian.Uint64(f[0:8])+shift)
	out = rewrite(t, out, func([]byte) {})
	r, err := snapshot.NewReader(bytes.NewReader(out), int64(len(out)))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(r.Header(), h) {
		t.Errorf("header %+v", r.Header())
	}
	if err := r.Verify(); err != nil {
		t.Error(err)
	}
}

func TestKeyGroupOutOfRange(t *testing.T) {
	h := testHeader()
	h.FirstKeyGroup, h.LastKeyGroup = 4, 7
	r := open(t, build(t, h, []section{kgSec(5, "x")}))
	for _, kg := range []int{-1, 3, 8, 16} {
		if _, err := r.KeyGroup(kg); !errors.Is(err, snapshot.ErrOutOfRange) {
			t.Errorf("KeyGroup(%d): %v", kg, err)
		}
	}
}

// A savepoint of 3 shards restores into 5 shards, and back into 1.
func TestRescale(t *testing.T) {
	const k = 32
	want := map[int]string{}
	for kg := 0; kg < k; kg++ {
		if kg%3 != 1 { // leave some empty
			want[kg] = fmt.Sprintf("state-%d", kg)
		}
	}
	var readers []*snapshot.Reader
	for shard := range 3 {
		first, last := keygroup.Range(shard, 3, k)
		h := testHeader()
		h.KeyGroups, h.FirstKeyGroup, h.LastKeyGroup, h.Shards = k, first, last, 3
		h.ID = fmt.Sprintf("sp-1-shard-%d", shard)
		var secs []section
		for kg := first; kg <= last; kg++ {
			if p, ok := want[kg]; ok {
				secs = append(secs, kgSec(kg, p))
			}
		}
		readers = append(readers, open(t, build(t, h, secs)))
	}
	for _, shards := range []int{1, 2, 5, 32} {
		got := map[int]string{}
		for shard := range shards {
			first, last := keygroup.Range(shard, shards, k)
			prev := -1
			err := snapshot.ForEachKeyGroup(readers, first, last, func(kg int, p []byte) error {
				if kg < first || kg > last || kg <= prev {
					t.Errorf("shard %d/%d got key group %d (range [%d,%d], prev %d)", shard, shards, kg, first, last, prev)
				}
				prev = kg
				got[kg] = string(p)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%d shards: restored %v", shards, got)
		}
	}
	// Gaps, overlaps and mismatched clusters are refused.
	if err := snapshot.ForEachKeyGroup(readers[:2], 0, k-1, nil); err == nil {
		t.Error("a gap was accepted")
	}
	if err := snapshot.ForEachKeyGroup([]*snapshot.Reader{readers[0], readers[1], readers[1], readers[2]}, 0, k-1, nil); err == nil {
		t.Error("an overlap was accepted")
	}
	h := testHeader()
	h.ClusterID, h.KeyGroups, h.LastKeyGroup = "other", k, k-1
	other := open(t, build(t, h, nil))
	if err := snapshot.ForEachKeyGroup(append(readers[:1:1], other), 0, 5, nil); err == nil {
		t.Error("a reader of another cluster was accepted")
	}
	stop := errors.New("stop")
	if err := snapshot.ForEachKeyGroup(readers, 0, k-1, func(int, []byte) error { return stop }); !errors.Is(err, stop) {
		t.Errorf("fn error not returned: %v", err)
	}
}

// A Reader is safe for concurrent use.
func TestReaderConcurrent(t *testing.T) {
	secs := roundTripSections()
	r := open(t, build(t, testHeader(), secs))
	done := make(chan error)
	for g := range 8 {
		go func() {
			for i := range 50 {
				s := secs[(g+i)%len(secs)]
				var got []byte
				var err error
				if s.kg >= 0 {
					got, err = r.KeyGroup(s.kg)
				} else {
					got, err = r.Named(s.name)
				}
				if err == nil && !bytes.Equal(got, s.payload) {
					err = fmt.Errorf("section %d/%q: wrong payload", s.kg, s.name)
				}
				if err == nil && i%10 == 0 {
					err = r.Verify()
				}
				if err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
	}
	for range 8 {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}
