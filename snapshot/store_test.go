package snapshot_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"

	"github.com/cepcluster/cep/snapshot"
)

func put(s snapshot.Store, id string, data []byte) error {
	sink, err := s.Create(context.Background(), id)
	if err != nil {
		return err
	}
	// Write in pieces, as a Writer does.
	for len(data) > 0 {
		n := min(len(data), 1000)
		if _, err := sink.Write(data[:n]); err != nil {
			return errors.Join(err, sink.Abort())
		}
		data = data[n:]
	}
	return sink.Close()
}

func get(s snapshot.Store, id string) ([]byte, error) {
	o, err := s.Open(context.Background(), id)
	if err != nil {
		return nil, err
	}
	defer o.Close()
	b := make([]byte, o.Size())
	if _, err := o.ReadAt(b, 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return b, nil
}

func writeAll(t *testing.T, s snapshot.Store, id string, data []byte) {
	t.Helper()
	if err := put(s, id, data); err != nil {
		t.Fatal(err)
	}
}

func readAll(t *testing.T, s snapshot.Store, id string) []byte {
	t.Helper()
	b, err := get(s, id)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func list(t *testing.T, s snapshot.Store) []string {
	t.Helper()
	ids, err := s.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// testStore is the contract every Store meets.
func testStore(t *testing.T, s snapshot.Store) {
	ctx := context.Background()
	if ids := list(t, s); len(ids) != 0 {
		t.Fatalf("new store lists %v", ids)
	}

	// Save and Load through the format.
	h := testHeader()
	err := snapshot.Save(ctx, s, "sp-b", h, func(w *snapshot.Writer) error {
		for _, sec := range roundTripSections() {
			var err error
			if sec.kg >= 0 {
				err = w.KeyGroup(sec.kg, sec.payload)
			} else {
				err = w.Named(sec.name, sec.payload)
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	r, o, err := snapshot.Load(ctx, s, "sp-b")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Verify(); err != nil {
		t.Error(err)
	}
	if got, _ := r.KeyGroup(7); !bytes.Equal(got, roundTripSections()[3].payload) {
		t.Error("key group 7 differs after Save/Load")
	}
	if !reflect.DeepEqual(r.Header(), h) {
		t.Errorf("header %+v", r.Header())
	}
	o.Close()

	// Raw create/list/open, sorted listing, replacement.
	writeAll(t, s, "sp-a", []byte("first version"))
	writeAll(t, s, "sp-c.1", bytes.Repeat([]byte("big"), 100_000))
	if got, want := list(t, s), []string{"sp-a", "sp-b", "sp-c.1"}; !reflect.DeepEqual(got, want) {
		t.Errorf("List = %v, want %v", got, want)
	}
	writeAll(t, s, "sp-a", []byte("second version"))
	if got := readAll(t, s, "sp-a"); string(got) != "second version" {
		t.Errorf("after replacement: %q", got)
	}
	if got := readAll(t, s, "sp-c.1"); !bytes.Equal(got, bytes.Repeat([]byte("big"), 100_000)) {
		t.Errorf("big object: %d bytes", len(got))
	}

	// An aborted or failed write leaves the previous file, or nothing.
	sink, err := s.Create(ctx, "sp-a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sink.Write([]byte("half a third ver")); err != nil {
		t.Fatal(err)
	}
	if err := sink.Abort(); err != nil {
		t.Fatal(err)
	}
	if err := sink.Close(); err == nil {
		t.Error("Close after Abort succeeded")
	}
	if got := readAll(t, s, "sp-a"); string(got) != "second version" {
		t.Errorf("after abort: %q", got)
	}
	sink, err = s.Create(ctx, "sp-never")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = sink.Write([]byte("x"))
	_ = sink.Abort()
	// A cancelled context aborts at Close.
	cctx, cancel := context.WithCancel(ctx)
	sink, err = s.Create(cctx, "sp-cancelled")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = sink.Write([]byte("partial"))
	cancel()
	if err := sink.Close(); err == nil {
		t.Error("Close with a cancelled context succeeded")
	}
	if got, want := list(t, s), []string{"sp-a", "sp-b", "sp-c.1"}; !reflect.DeepEqual(got, want) {
		t.Errorf("after aborts List = %v, want %v", got, want)
	}
	// A failed Save leaves nothing behind.
	boom := errors.New("boom")
	if err := snapshot.Save(ctx, s, "sp-failed", h, func(*snapshot.Writer) error { return boom }); !errors.Is(err, boom) {
		t.Errorf("Save: %v", err)
	}
	if _, err := s.Open(ctx, "sp-failed"); !errors.Is(err, snapshot.ErrNotFound) {
		t.Errorf("failed Save left %v", err)
	}

	// Missing ids and invalid ids.
	if _, err := s.Open(ctx, "missing"); !errors.Is(err, snapshot.ErrNotFound) {
		t.Errorf("Open(missing): %v", err)
	}
	if err := s.Delete(ctx, "missing"); !errors.Is(err, snapshot.ErrNotFound) {
		t.Errorf("Delete(missing): %v", err)
	}
	for _, bad := range []string{"", "../x", "a/b", ".hidden", "sp a", string(make([]byte, 129))} {
		if _, err := s.Create(ctx, bad); err == nil {
			t.Errorf("Create(%q) accepted", bad)
		}
		if _, err := s.Open(ctx, bad); err == nil || errors.Is(err, snapshot.ErrNotFound) {
			t.Errorf("Open(%q): %v", bad, err)
		}
	}

	// Delete.
	if err := s.Delete(ctx, "sp-b"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Open(ctx, "sp-b"); !errors.Is(err, snapshot.ErrNotFound) {
		t.Errorf("Open after Delete: %v", err)
	}
	if got, want := list(t, s), []string{"sp-a", "sp-c.1"}; !reflect.DeepEqual(got, want) {
		t.Errorf("after Delete List = %v, want %v", got, want)
	}

	// Concurrent writers of distinct ids, and of one id, with readers.
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			if err := put(s, fmt.Sprintf("conc-%d", i), []byte(fmt.Sprintf("payload %d", i))); err != nil {
				t.Error(err)
			}
		}()
		go func() {
			defer wg.Done()
			if err := put(s, "conc-same", []byte(fmt.Sprintf("same %d", i))); err != nil {
				t.Error(err)
			}
			// Whoever won, a reader sees one whole version.
			if got, err := get(s, "conc-same"); err != nil || len(got) != len("same 0") {
				t.Errorf("conc-same read %q, %v", got, err)
			}
		}()
	}
	wg.Wait()
	for i := range 6 {
		if got := readAll(t, s, fmt.Sprintf("conc-%d", i)); string(got) != fmt.Sprintf("payload %d", i) {
			t.Errorf("conc-%d = %q", i, got)
		}
	}
	if n := len(list(t, s)); n != 2+7 {
		t.Errorf("List has %d ids, want 9", n)
	}
}

func TestDirStore(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "savepoints", "nested")
	s := snapshot.NewDirStore(dir)
	testStore(t, s)
	// Nothing but committed files is left in the directory.
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if filepath.Ext(e.Name()) != ".ceps" {
			t.Errorf("left behind: %s", e.Name())
		}
	}
	// Stray files are not listed.
	for _, name := range []string{".tmp-x-123", "notes.txt", "bad id.ceps"} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range list(t, s) {
		if !snapshot.ValidID(id) {
			t.Errorf("listed %q", id)
		}
	}
	// An Object opened before Delete keeps reading (Unix).
	writeAll(t, s, "keep", []byte("still here"))
	o, err := s.Open(context.Background(), "keep")
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	if err := s.Delete(context.Background(), "keep"); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, o.Size())
	if _, err := o.ReadAt(b, 0); err != nil || string(b) != "still here" {
		t.Errorf("read after delete: %q, %v", b, err)
	}
}

func TestParseLocation(t *testing.T) {
	for _, c := range []struct{ loc, scheme, path string }{
		{"dir:///abs/path", "dir", "/abs/path"},
		{"dir:///abs/path/", "dir", "/abs/path"},
		{"dir://rel", "dir", "rel"},
		{"dir://rel/sub/../x", "dir", "rel/x"},
		{"nats://savepoints", "nats", "savepoints"},
		{"nats://sp_1-a", "nats", "sp_1-a"},
	} {
		s, p, err := snapshot.ParseLocation(c.loc)
		if err != nil || s != c.scheme || p != c.path {
			t.Errorf("ParseLocation(%q) = %q, %q, %v; want %q, %q", c.loc, s, p, err, c.scheme, c.path)
		}
	}
	for _, bad := range []string{"", "/abs/path", "dir:/x", "dir://", "nats://", "nats://a/b", "nats://a.b", "s3://bucket", "file:///x"} {
		if s, p, err := snapshot.ParseLocation(bad); err == nil {
			t.Errorf("ParseLocation(%q) = %q, %q; want an error", bad, s, p)
		}
	}
	st, err := snapshot.OpenStore(context.Background(), "dir://"+t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := st.(*snapshot.DirStore); !ok {
		t.Errorf("OpenStore(dir) = %T", st)
	}
	if _, err := snapshot.OpenStore(context.Background(), "nats://b", nil); err == nil {
		t.Error("nats:// without a connection accepted")
	}
}
