package snapshot

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// ObjectStore keeps files in a NATS JetStream object store bucket, one object
// per id. The object store publishes an object's chunks first and its meta
// message last, so a reader sees the previous object (or none) until a Put
// completes, and a failed Put purges its chunks: commits are atomic.
//
// JetStream objects are streamed, not randomly accessible, so Open copies the
// object to a local spool file (checking the object store's SHA-256 digest on
// the way) and serves ReadAt from it; closing the Object removes the copy.
//
// An ObjectStore is safe for concurrent use; so are several ObjectStores, in
// any processes, on one bucket. Concurrent Creates of one id each commit
// whole; the last to finish wins.
type ObjectStore struct {
	obs    jetstream.ObjectStore
	bucket string
	// SpoolDir is where Open copies objects; empty means os.TempDir(). Set
	// it before first use.
	SpoolDir string
}

var _ Store = (*ObjectStore)(nil)

// NewObjectStore binds to the object store bucket, creating it (file
// storage, one replica) if it does not exist. It waits at most 30 seconds;
// use OpenObjectStore to pass a context or a bucket configuration.
func NewObjectStore(js jetstream.JetStream, bucket string) (*ObjectStore, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return OpenObjectStore(ctx, js, jetstream.ObjectStoreConfig{Bucket: bucket})
}

// OpenObjectStore binds to the bucket cfg.Bucket, creating it with cfg if it
// does not exist. An existing bucket's configuration is left as it is.
func OpenObjectStore(ctx context.Context, js jetstream.JetStream, cfg jetstream.ObjectStoreConfig) (*ObjectStore, error) {
	for range 3 {
		obs, err := js.ObjectStore(ctx, cfg.Bucket)
		if err == nil {
			return &ObjectStore{obs: obs, bucket: cfg.Bucket}, nil
		}
		if !errors.Is(err, jetstream.ErrBucketNotFound) {
			return nil, fmt.Errorf("snapshot: object store %q: %w", cfg.Bucket, err)
		}
		obs, err = js.CreateObjectStore(ctx, cfg)
		if err == nil {
			return &ObjectStore{obs: obs, bucket: cfg.Bucket}, nil
		}
		if !errors.Is(err, jetstream.ErrBucketExists) {
			return nil, fmt.Errorf("snapshot: creating object store %q: %w", cfg.Bucket, err)
		}
		// Someone else created it in between: bind to theirs.
	}
	return nil, fmt.Errorf("snapshot: object store %q: could not bind or create", cfg.Bucket)
}

// Bucket returns the bucket name.
func (s *ObjectStore) Bucket() string { return s.bucket }

// Create starts an object under id. The returned Sink streams to the object
// store as it is written: a goroutine owned by the Sink runs the Put and ends
// when Close or Abort returns, so one of them must be called.
func (s *ObjectStore) Create(ctx context.Context, id string) (Sink, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	pr, pw := io.Pipe()
	sk := &objSink{id: id, pw: pw, done: make(chan struct{})}
	go func() {
		defer close(sk.done)
		_, err := s.obs.Put(ctx, jetstream.ObjectMeta{Name: id}, pr)
		// Unblock a writer still writing after Put gave up.
		pr.CloseWithError(errors.Join(errPutEnded, err))
		sk.putErr = err
	}()
	return sk, nil
}

var (
	errPutEnded = errors.New("snapshot: object upload ended")
	errAborted  = errors.New("snapshot: sink aborted")
)

type objSink struct {
	id     string
	pw     *io.PipeWriter
	done   chan struct{} // closed when the Put goroutine has returned
	putErr error         // written by the goroutine before done closes
	mu     sync.Mutex
	ended  bool
}

func (k *objSink) Write(p []byte) (int, error) { return k.pw.Write(p) }

// end marks the sink finished; it reports false if it already was.
func (k *objSink) end() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.ended {
		return false
	}
	k.ended = true
	return true
}

func (k *objSink) Close() error {
	if !k.end() {
		return errSinkDone
	}
	_ = k.pw.Close() // EOF: Put publishes the meta message
	<-k.done
	if k.putErr != nil {
		return fmt.Errorf("snapshot: committing %q: %w", k.id, k.putErr)
	}
	return nil
}

func (k *objSink) Abort() error {
	if !k.end() {
		return errSinkDone
	}
	_ = k.pw.CloseWithError(errAborted) // Put fails and purges its chunks
	<-k.done
	return nil
}

// Open copies the object under id to a spool file and returns it.
func (s *ObjectStore) Open(ctx context.Context, id string) (Object, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	// An object replaced while it is read loses its chunks under the
	// reader, which then waits for them until it times out; the new
	// version is whole, so read again (a few times).
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		var o Object
		if o, err = s.open(ctx, id); err == nil || errors.Is(err, ErrNotFound) || ctx.Err() != nil {
			return o, err
		}
	}
	return nil, err
}

func (s *ObjectStore) open(ctx context.Context, id string) (Object, error) {
	res, err := s.obs.Get(ctx, id)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil, fmt.Errorf("%w: %q in bucket %q", ErrNotFound, id, s.Bucket())
	}
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	defer res.Close()
	f, err := os.CreateTemp(s.SpoolDir, "ceps-spool-*")
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	// The object result checks the digest when it reaches EOF.
	n, err := io.Copy(f, res)
	if err != nil {
		_ = f.Close()
		_ = os.Remove(f.Name())
		return nil, fmt.Errorf("snapshot: reading %q: %w", id, err)
	}
	return &spoolObject{File: f, size: n}, nil
}

type spoolObject struct {
	*os.File
	size int64
}

func (o *spoolObject) Size() int64 { return o.size }

func (o *spoolObject) Close() error {
	err := o.File.Close()
	if rerr := os.Remove(o.Name()); err == nil {
		err = rerr
	}
	return err
}

// List returns the ids of the objects in the bucket, sorted. Objects whose
// names are not valid ids (not written through a Store) are left out.
func (s *ObjectStore) List(ctx context.Context) ([]string, error) {
	infos, err := s.obs.List(ctx)
	if errors.Is(err, jetstream.ErrNoObjectsFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	var ids []string
	for _, in := range infos {
		if !in.Deleted && ValidID(in.Name) {
			ids = append(ids, in.Name)
		}
	}
	sort.Strings(ids)
	return ids, nil
}

// Delete removes the object under id.
func (s *ObjectStore) Delete(ctx context.Context, id string) error {
	if err := checkID(id); err != nil {
		return err
	}
	err := s.obs.Delete(ctx, id)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return fmt.Errorf("%w: %q in bucket %q", ErrNotFound, id, s.Bucket())
	}
	if err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	return nil
}
