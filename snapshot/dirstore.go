package snapshot

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
)

// fileExt ends the name of every committed file in a DirStore.
const fileExt = ".ceps"

// tmpPrefix starts the name of every file being written; it cannot start a
// valid id, so List never mistakes one for a snapshot.
const tmpPrefix = ".tmp-"

// DirStore keeps files in a directory, as <id>.ceps. A Sink writes a temporary
// file in the same directory (".tmp-<id>-*"), and Close fsyncs it, renames it
// over <id>.ceps and fsyncs the directory, so a crash leaves either the old
// file or the new one, never a mix. Temporary files left by a crash are
// ignored by List.
//
// A DirStore is safe for concurrent use, also by several processes: the
// atomic rename is the only synchronisation it needs. Concurrent Creates of
// one id each commit whole; the last Close wins. On Unix an Object opened
// before a Delete or a replacement keeps reading the file it opened.
type DirStore struct {
	dir string
}

var _ Store = (*DirStore)(nil)

// NewDirStore returns a store in dir. The directory is created (with parents)
// by the first Create; until then List returns nothing.
func NewDirStore(dir string) *DirStore { return &DirStore{dir: dir} }

// Dir returns the store's directory.
func (d *DirStore) Dir() string { return d.dir }

func (d *DirStore) path(id string) string { return filepath.Join(d.dir, id+fileExt) }

// Create starts a file under id.
func (d *DirStore) Create(ctx context.Context, id string) (Sink, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(d.dir, 0o755); err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	f, err := os.CreateTemp(d.dir, tmpPrefix+id+"-*")
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	return &dirSink{ctx: ctx, d: d, id: id, f: f}, nil
}

type dirSink struct {
	ctx  context.Context
	d    *DirStore
	id   string
	f    *os.File
	mu   sync.Mutex // guards done against a racing Abort from another goroutine
	done bool
}

func (s *dirSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return 0, errSinkDone
	}
	if err := s.ctx.Err(); err != nil {
		return 0, err
	}
	return s.f.Write(p)
}

func (s *dirSink) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return errSinkDone
	}
	s.done = true
	tmp := s.f.Name()
	err := s.ctx.Err()
	if err == nil {
		err = s.f.Sync()
	}
	if cerr := s.f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, s.d.path(s.id))
	}
	if err == nil {
		err = syncDir(s.d.dir)
		if err != nil {
			// The rename happened; the file is there but maybe not durable.
			return fmt.Errorf("snapshot: committed %q but syncing the directory failed: %w", s.id, err)
		}
		return nil
	}
	_ = os.Remove(tmp)
	return fmt.Errorf("snapshot: committing %q: %w", s.id, err)
}

func (s *dirSink) Abort() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return errSinkDone
	}
	s.done = true
	err := s.f.Close()
	if rerr := os.Remove(s.f.Name()); err == nil {
		err = rerr
	}
	return err
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Open opens the committed file under id.
func (d *DirStore) Open(ctx context.Context, id string) (Object, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f, err := os.Open(d.path(id))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %q in %s", ErrNotFound, id, d.dir)
	}
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	return &fileObject{File: f, size: fi.Size()}, nil
}

// fileObject is an open file of known size. *os.File's ReadAt (pread) is safe
// for concurrent use.
type fileObject struct {
	*os.File
	size int64
}

func (o *fileObject) Size() int64 { return o.size }

// List returns the ids of the committed files, sorted.
func (d *DirStore) List(ctx context.Context) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ents, err := os.ReadDir(d.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	var ids []string
	for _, e := range ents {
		id, ok := strings.CutSuffix(e.Name(), fileExt)
		if ok && e.Type().IsRegular() && ValidID(id) {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids, nil
}

// Delete removes the file under id and fsyncs the directory.
func (d *DirStore) Delete(ctx context.Context, id string) error {
	if err := checkID(id); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	err := os.Remove(d.path(id))
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: %q in %s", ErrNotFound, id, d.dir)
	}
	if err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	if err := syncDir(d.dir); err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	return nil
}
