package snapshot_test

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"sync"
	"testing"

	"github.com/cepcluster/cep/snapshot"
)

// section is one section of a test file.
type section struct {
	kg      int    // -1 for a named section
	name    string // for a named section
	payload []byte
}

func kgSec(kg int, payload string) section { return section{kg: kg, payload: []byte(payload)} }
func namedSec(name, payload string) section {
	return section{kg: -1, name: name, payload: []byte(payload)}
}

func testHeader() snapshot.Header {
	return snapshot.Header{
		ID:            "sp-0001",
		Kind:          snapshot.KindSavepoint,
		ClusterID:     "cluster-a",
		KeyGroups:     16,
		FirstKeyGroup: 0,
		LastKeyGroup:  15,
		CreatedIndex:  4242,
		LoggedTimeMs:  1_700_000_000_123,
		Shards:        2,
		Patterns: []snapshot.Pattern{
			{Name: "login-fail-logout", Version: 3, Format: "yaml", Spec: "name: login-fail-logout\nstages: []\n"},
		},
		Sources: []snapshot.Source{
			{Name: "payments", Stream: "PAYMENTS", Subjects: []string{"pay.*", "pay.>"}},
		},
		Metadata: map[string]string{"b": "2", "a": "1"},
	}
}

// fataler is what build needs of testing.TB and *rapid.T.
type fataler interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

// build writes a file and returns its bytes.
func build(t fataler, h snapshot.Header, secs []section) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := snapshot.NewWriter(&buf, h)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range secs {
		if s.kg >= 0 {
			err = w.KeyGroup(s.kg, s.payload)
		} else {
			err = w.Named(s.name, s.payload)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if w.Size() != int64(buf.Len()) {
		t.Fatalf("Size() = %d, wrote %d", w.Size(), buf.Len())
	}
	return buf.Bytes()
}

func open(t testing.TB, data []byte) *snapshot.Reader {
	t.Helper()
	r, err := snapshot.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// recordingReaderAt records the byte ranges read from it.
type recordingReaderAt struct {
	r     io.ReaderAt
	mu    sync.Mutex
	reads [][2]int64
}

func (c *recordingReaderAt) ReadAt(p []byte, off int64) (int, error) {
	c.mu.Lock()
	c.reads = append(c.reads, [2]int64{off, off + int64(len(p))})
	c.mu.Unlock()
	return c.r.ReadAt(p, off)
}

func (c *recordingReaderAt) take() [][2]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.reads
	c.reads = nil
	return r
}

func (c *recordingReaderAt) String() string { return fmt.Sprint(c.reads) }

// frameLen is the size of a section's frame in the file.
func frameLen(s snapshot.SectionInfo) int64 {
	if s.Kind == snapshot.KeyGroupSection {
		return 1 + 4 + 8 + s.Length + 4
	}
	return 1 + 1 + int64(len(s.Name)) + 8 + s.Length + 4
}

func readDirNames(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names, err
}
