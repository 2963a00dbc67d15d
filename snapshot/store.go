package snapshot

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// Store keeps snapshot files by id. Implementations are safe for concurrent
// use by several goroutines. A file becomes visible to Open and List only
// when the Sink that wrote it is closed successfully; until then an existing
// file with the same id stays as it was, and a reader never sees a partial
// file. Committing replaces an existing file of the same id whole.
type Store interface {
	// Create starts a new file under id. The caller writes it through the
	// Sink and must end it with Close (commit) or Abort (discard); after
	// ctx is done, writes fail and Close aborts.
	Create(ctx context.Context, id string) (Sink, error)
	// Open returns the committed file under id, or an error matching
	// ErrNotFound. The caller closes the Object.
	Open(ctx context.Context, id string) (Object, error)
	// List returns the ids of the committed files, sorted.
	List(ctx context.Context) ([]string, error)
	// Delete removes the file under id, or returns an error matching
	// ErrNotFound. Objects already open stay readable where the store
	// allows it (DirStore on Unix; ObjectStore reads from a local copy).
	Delete(ctx context.Context, id string) error
}

// Sink is a file being written to a Store. It is an io.WriteCloser whose
// Close commits; Abort discards what was written. Exactly one of them must be
// called (later calls return an error). Write and Close belong to one
// goroutine; Abort may also be called from another one, to cancel.
type Sink interface {
	io.WriteCloser
	Abort() error
}

// Object is a committed file opened for random access; pass it to
// NewReader(o, o.Size()). It is safe for concurrent ReadAt calls.
type Object interface {
	io.ReaderAt
	io.Closer
	Size() int64
}

var idRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// ValidID reports whether id can name a file in a Store: 1 to 128 ASCII
// letters, digits, '.', '_' and '-', starting with a letter or digit. Such an
// id is a safe file name and a safe object name.
func ValidID(id string) bool { return idRE.MatchString(id) }

func checkID(id string) error {
	if !ValidID(id) {
		return fmt.Errorf("snapshot: invalid id %q (want 1-128 of [A-Za-z0-9._-], starting with a letter or digit)", id)
	}
	return nil
}

// Location schemes understood by ParseLocation.
const (
	SchemeDir  = "dir"
	SchemeNATS = "nats"
)

var bucketRE = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// ParseLocation splits a store location into scheme and path:
//
//	dir:///abs/path  → "dir", "/abs/path"
//	dir://rel/path   → "dir", "rel/path" (relative to the working directory)
//	nats://bucket    → "nats", "bucket" (a JetStream object store bucket)
//
// Directory paths are cleaned; a bucket name is letters, digits, '_' and '-'.
func ParseLocation(loc string) (scheme, path string, err error) {
	scheme, rest, ok := strings.Cut(loc, "://")
	if !ok {
		return "", "", fmt.Errorf("snapshot: location %q: want dir:///abs/path, dir://rel/path or nats://bucket", loc)
	}
	switch scheme {
	case SchemeDir:
		if rest == "" {
			return "", "", fmt.Errorf("snapshot: location %q: empty directory", loc)
		}
		return scheme, filepath.Clean(rest), nil
	case SchemeNATS:
		if !bucketRE.MatchString(rest) {
			return "", "", fmt.Errorf("snapshot: location %q: bucket must be letters, digits, '_' or '-'", loc)
		}
		return scheme, rest, nil
	}
	return "", "", fmt.Errorf("snapshot: location %q: unknown scheme %q (want %q or %q)", loc, scheme, SchemeDir, SchemeNATS)
}

// OpenStore opens the store at a location (see ParseLocation). js is needed
// only for nats:// locations; the bucket is created if missing.
func OpenStore(ctx context.Context, loc string, js jetstream.JetStream) (Store, error) {
	scheme, path, err := ParseLocation(loc)
	if err != nil {
		return nil, err
	}
	if scheme == SchemeDir {
		return NewDirStore(path), nil
	}
	if js == nil {
		return nil, fmt.Errorf("snapshot: location %q needs a JetStream connection", loc)
	}
	return OpenObjectStore(ctx, js, jetstream.ObjectStoreConfig{Bucket: path})
}

// Save writes one file to s under id: it creates a Sink, calls write with a
// Writer for header h, closes the Writer and commits. On any error the file is
// discarded and an existing one under id is left as it was.
func Save(ctx context.Context, s Store, id string, h Header, write func(*Writer) error) (err error) {
	sink, err := s.Create(ctx, id)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = sink.Abort()
		}
	}()
	w, err := NewWriter(sink, h)
	if err != nil {
		return err
	}
	if err := write(w); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	return sink.Close()
}

// Load opens the file under id and a Reader on it. The caller closes the
// returned Object when done with the Reader.
func Load(ctx context.Context, s Store, id string) (*Reader, Object, error) {
	o, err := s.Open(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	r, err := NewReader(o, o.Size())
	if err != nil {
		return nil, nil, errors.Join(err, o.Close())
	}
	return r, o, nil
}

// errSinkDone is returned by a Sink used after Close or Abort.
var errSinkDone = errors.New("snapshot: sink already closed or aborted")
