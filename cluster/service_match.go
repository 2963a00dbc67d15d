package cluster

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cepcluster/cep/api"
	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/cluster/meta"
	"github.com/cepcluster/cep/keygroup"
	"github.com/cepcluster/cep/shard"
)

type matchBackend struct{ s *Service }

const (
	// tailInactive is how long the server keeps a tail's consumer once
	// nobody pulls from it: the fallback for a node that stopped without
	// deleting its consumers (a tail deletes its own when it ends).
	tailInactive = 30 * time.Second
	// tailPull bounds the records (and bytes) a tail asks JetStream for
	// at a time, before its own buffer.
	tailPullRecords = 64
	tailPullBytes   = 256 << 10
	// tailCleanup bounds deleting a tail's consumer when it ends.
	tailCleanup = 5 * time.Second
)

// errSlowConsumer ends a tail whose client does not take its records.
var errSlowConsumer = errors.New("slow consumer")

// errPatternDeleted ends a pattern's tail, without error, once the
// pattern is deleted: nothing more comes.
var errPatternDeleted = errors.New("pattern deleted")

// errEndReached ends a tail asked to stop at the end, without error, once
// it has sent the last record stored.
var errEndReached = errors.New("end of the stored records")

// Tail streams a pattern's records from an ephemeral JetStream consumer of
// its own on the output stream. JetStream's records go into a buffer
// bounded in records and bytes (Config.TailBuffer*), which the request's
// goroutine sends from; a client that lets the buffer fill is cut off (its
// blocked send aborted) as NATS cuts off a slow consumer, so that a tail
// never holds more than its buffer. When the tail ends, however it ends,
// its consumer is deleted and its goroutines return.
func (b matchBackend) Tail(ctx context.Context, r *cepv1.TailRequest, send func(*cepv1.Record) error) error {
	n := b.s.n
	stream, filters, what, err := tailTarget(n.Meta(), r)
	if err != nil {
		return err
	}
	release, err := b.s.tails.acquire(api.CallerKey(ctx))
	if err != nil {
		return err
	}
	defer release()

	// named here, so that it is deleted even when the call ends while the
	// server creates it
	cfg := jetstream.ConsumerConfig{
		Name:              "cep_tail_" + rand.Text(),
		DeliverPolicy:     jetstream.DeliverNewPolicy,
		AckPolicy:         jetstream.AckNonePolicy,
		InactiveThreshold: tailInactive,
		MemoryStorage:     true,
		Replicas:          1,
	}
	switch len(filters) {
	case 0: // the whole stream
	case 1:
		cfg.FilterSubject = filters[0]
	default:
		cfg.FilterSubjects = filters
	}
	switch r.Start {
	case cepv1.TailStart_TAIL_START_ALL:
		cfg.DeliverPolicy = jetstream.DeliverAllPolicy
	case cepv1.TailStart_TAIL_START_SEQUENCE:
		cfg.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
		cfg.OptStartSeq = r.StartSequence
	case cepv1.TailStart_TAIL_START_TIME:
		t := time.UnixMilli(r.StartTimeMs)
		cfg.DeliverPolicy = jetstream.DeliverByStartTimePolicy
		cfg.OptStartTime = &t
	}
	defer func() {
		release() // the place is free once the tail has stopped reading
		dctx, cancel := context.WithTimeout(context.Background(), tailCleanup)
		defer cancel()
		if err := n.JetStream().DeleteConsumer(dctx, stream, cfg.Name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			n.log.Warn("tail: delete its consumer (the server drops it once inactive)", "pattern", what, "consumer", cfg.Name, "err", err)
		}
	}()
	cons, err := n.JetStream().CreateConsumer(ctx, stream, cfg)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("%w: tail %s: %v", api.ErrUnavailable, what, err)
	}
	if r.StopAtEnd && cons.CachedInfo().NumPending == 0 {
		return nil // nothing stored from there
	}
	it, err := cons.Messages(jetstream.PullMaxMessagesWithBytesLimit(tailPullRecords, tailPullBytes))
	if err != nil {
		return fmt.Errorf("%w: tail %s: %v", api.ErrUnavailable, what, err)
	}
	defer it.Stop()
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()

	buf := newTailBuffer(n.cfg.TailBufferRecords, n.cfg.TailBufferBytes)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer it.Stop() // (before the wait: the reader returns once it is stopped)
	wg.Go(func() {
		var next uint64 // the consumer sequence expected next; 0: any
		for {
			msg, err := it.Next()
			if err != nil {
				buf.close(err)
				return
			}
			rec := tailRecord(msg, r)
			end := false
			if md, err := msg.Metadata(); err == nil {
				if next != 0 && md.Sequence.Consumer != next {
					buf.close(fmt.Errorf("%w: records were missed after stream sequence %d; tail again from there", api.ErrUnavailable, rec.Sequence))
					return
				}
				next = md.Sequence.Consumer + 1
				end = r.StopAtEnd && md.NumPending == 0 // the last stored when it was delivered
			}
			if !buf.put(rec) {
				n.log.Warn("tail: cut off a slow consumer", "pattern", what, "caller", api.CallerKey(ctx))
				buf.close(errSlowConsumer)
				it.Stop()
				if err := api.AbortResponse(ctx); err != nil { // unblock its send
					n.log.Warn("tail: cannot abort the response of a slow consumer", "err", err)
				}
				return
			}
			if end {
				buf.close(errEndReached)
				it.Stop()
				return
			}
		}
	})
	if !r.DeadLetters && r.Source == "" {
		done := make(chan struct{})
		defer close(done) // (runs before the wait)
		wg.Go(func() {
			for {
				var gone bool
				changed := n.meta.fsm.Watch(func(m *meta.Meta) {
					p := m.Patterns[r.Pattern]
					gone = p == nil || p.Deleted
				})
				if gone {
					buf.close(errPatternDeleted)
					it.Stop()
					return
				}
				select {
				case <-changed:
				case <-done:
					return
				}
			}
		})
	}
	for {
		rec, err := buf.take()
		if rec == nil {
			switch {
			case errors.Is(err, errPatternDeleted), errors.Is(err, errEndReached):
				return nil
			case errors.Is(err, errSlowConsumer):
				return fmt.Errorf("%w: tail %s: slow consumer: the client fell %d records or %d bytes behind, cut off", api.ErrResourceExhausted, what, n.cfg.TailBufferRecords, n.cfg.TailBufferBytes)
			case ctx.Err() != nil:
				return nil
			case errors.Is(err, api.ErrUnavailable):
				return err
			}
			return fmt.Errorf("%w: tail %s: %v", api.ErrUnavailable, what, err)
		}
		if err := send(rec); err != nil {
			if buf.err() != nil && errors.Is(buf.err(), errSlowConsumer) {
				return fmt.Errorf("%w: tail %s: slow consumer: the client fell %d records or %d bytes behind, cut off", api.ErrResourceExhausted, what, n.cfg.TailBufferRecords, n.cfg.TailBufferBytes)
			}
			return err
		}
	}
}

// tailTarget is the stream and subjects a tail reads (none: all of it)
// and what its errors call it: a pattern's records, the dead letters (of
// a source), or a source's events.
func tailTarget(m *meta.Meta, r *cepv1.TailRequest) (stream string, filters []string, what string, err error) {
	if r.Start == cepv1.TailStart_TAIL_START_TIME && r.StartTimeMs <= 0 {
		return "", nil, "", fmt.Errorf("%w: start TAIL_START_TIME needs start_time_ms", api.ErrInvalidArgument)
	}
	if r.Source == "" {
		if r.SourceKey != "" {
			return "", nil, "", fmt.Errorf("%w: source_key %q without source", api.ErrInvalidArgument, r.SourceKey)
		}
		subject, what, err := tailSubject(m, r)
		return OutputStream, []string{subject}, what, err
	}
	switch {
	case r.Pattern != "" || r.DeadLetters:
		return "", nil, "", fmt.Errorf("%w: a tail of source %q reads its events, not a pattern's records or dead letters", api.ErrInvalidArgument, r.Source)
	case m.Sources[r.Source] == nil:
		return "", nil, "", fmt.Errorf("%w: source %q", api.ErrNotFound, r.Source)
	}
	src := m.Sources[r.Source]
	what = "events of source " + r.Source
	switch {
	case src.Unpartitioned:
		// stored by subject, not by key: the whole source, whatever the key
		filters = src.Filter
	case r.SourceKey != "":
		// the key's block, as a shard leader reads it (keygroup.BlockFilters)
		k := m.KeyGroups
		if k < 1 {
			return "", nil, "", fmt.Errorf("%w: the cluster's key groups are not known yet", api.ErrUnavailable)
		}
		filters = []string{r.Source + "." + strconv.Itoa(keygroup.BlockOf(keygroup.OfKey(r.SourceKey, k), k))}
		what += " of key " + r.SourceKey
	}
	for _, f := range filters {
		if err := keygroup.CheckSubjectBounds(f); err != nil {
			return "", nil, "", fmt.Errorf("%w: source %q: %v", api.ErrInvalidArgument, r.Source, err)
		}
	}
	return src.Stream, filters, what, nil
}

// tailSubject is the output subject a tail of records reads and what its
// errors call it: a pattern's, or the dead letters (of a source).
func tailSubject(m *meta.Meta, r *cepv1.TailRequest) (subject, what string, err error) {
	if !r.DeadLetters {
		if r.DeadLetterSource != "" {
			return "", "", fmt.Errorf("%w: dead_letter_source %q without dead_letters", api.ErrInvalidArgument, r.DeadLetterSource)
		}
		p := m.Patterns[r.Pattern]
		if p == nil || p.Deleted {
			return "", "", fmt.Errorf("%w: pattern %q", api.ErrNotFound, r.Pattern)
		}
		if err := keygroup.CheckSubjectBounds(p.OutputSubject); err != nil {
			// metadata from before the bound: the subject would go into a
			// JetStream API request NATS closes the connection for
			return "", "", fmt.Errorf("%w: pattern %q: its output subject %v", api.ErrFailedPrecondition, r.Pattern, err)
		}
		return p.OutputSubject, r.Pattern, nil
	}
	switch src := r.DeadLetterSource; {
	case r.Pattern != "":
		return "", "", fmt.Errorf("%w: dead letters are tailed by source, not by pattern (%q): each names the pattern that refused it", api.ErrInvalidArgument, r.Pattern)
	case src == "":
		return keygroup.DeadLetterRoot + ">", "dead letters", nil
	case strings.ContainsAny(src, "*> \t\r\n") || strings.HasPrefix(src, ".") || strings.HasSuffix(src, ".") || strings.Contains(src, ".."):
		// a wildcard would widen the filter past one source
		return "", "", fmt.Errorf("%w: dead_letter_source %q is not a source name", api.ErrInvalidArgument, src)
	default:
		// a deleted source's dead letters stay in the stream: any name is
		// tailed, known or not; the name goes into the subject of a
		// JetStream API request, which NATS bounds
		subject := shard.DeadLetterSubject(src)
		if err := keygroup.CheckSubjectBounds(subject); err != nil {
			return "", "", fmt.Errorf("%w: field dead_letter_source: %v", api.ErrInvalidArgument, err)
		}
		return subject, "dead letters of " + src, nil
	}
}

func tailRecord(msg jetstream.Msg, r *cepv1.TailRequest) *cepv1.Record {
	var rec *cepv1.Record
	if r.Source != "" {
		// an event: its fields are the publisher's, none of them the record's
		rec = &cepv1.Record{Type: "event", Json: msg.Data()}
	} else {
		var head struct {
			Type, ID, Pattern, Key string
		}
		_ = json.Unmarshal(msg.Data(), &head)
		rec = &cepv1.Record{Type: head.Type, Id: head.ID, Pattern: head.Pattern, Key: head.Key, Json: msg.Data()}
	}
	if r.DeadLetters {
		// a dead letter's JSON has no type or id: the id is its message id
		rec.Type, rec.Id, rec.Key = "deadletter", msg.Headers().Get(jetstream.MsgIDHeader), ""
	}
	if md, err := msg.Metadata(); err == nil {
		rec.Sequence = md.Sequence.Stream
		rec.StoredAtMs = md.Timestamp.UnixMilli()
	}
	return rec
}

// tailBuffer is a tail's records between JetStream and its client,
// bounded in records and bytes; put refuses a record beyond them.
type tailBuffer struct {
	mu         sync.Mutex
	cond       *sync.Cond
	q          []*cepv1.Record
	bytes      int
	maxRecords int
	maxBytes   int
	closed     error
}

func newTailBuffer(maxRecords, maxBytes int) *tailBuffer {
	b := &tailBuffer{maxRecords: maxRecords, maxBytes: maxBytes}
	b.cond = sync.NewCond(&b.mu)
	return b
}

// put adds rec, or reports false when the buffer is full (a record larger
// than the whole buffer goes in alone).
func (b *tailBuffer) put(rec *cepv1.Record) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	size := len(rec.Json)
	if len(b.q) >= b.maxRecords || len(b.q) > 0 && b.bytes+size > b.maxBytes {
		return false
	}
	b.q = append(b.q, rec)
	b.bytes += size
	b.cond.Signal()
	return true
}

// close ends the buffer with err once its records are taken.
func (b *tailBuffer) close(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed == nil {
		b.closed = err
	}
	b.cond.Signal()
}

func (b *tailBuffer) err() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closed
}

// take waits for the next record; nil and the error once closed and
// empty. A slow-consumer close drops what is left.
func (b *tailBuffer) take() (*cepv1.Record, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for len(b.q) == 0 && b.closed == nil {
		b.cond.Wait()
	}
	if len(b.q) == 0 || errors.Is(b.closed, errSlowConsumer) {
		b.q = nil
		return nil, b.closed
	}
	rec := b.q[0]
	b.q[0] = nil
	b.q = b.q[1:]
	b.bytes -= len(rec.Json)
	return rec, nil
}

// tailLimits counts the tails a node serves, in all and per caller.
type tailLimits struct {
	mu        sync.Mutex
	max       int
	perCaller int
	total     int
	byCaller  map[string]int
}

func newTailLimits(max, perCaller int) *tailLimits {
	return &tailLimits{max: max, perCaller: perCaller, byCaller: map[string]int{}}
}

// acquire takes a place for a tail of caller, or says which limit is
// reached; release gives it back.
func (l *tailLimits) acquire(caller string) (release func(), err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.byCaller[caller] >= l.perCaller:
		return nil, fmt.Errorf("%w: too many tails: %d open by this caller, the most allowed per caller (cepnode --tail-max-per-caller); close one", api.ErrResourceExhausted, l.perCaller)
	case l.total >= l.max:
		return nil, fmt.Errorf("%w: too many tails: %d open on this node, the most allowed per node (cepnode --tail-max-streams); retry later or on another node", api.ErrResourceExhausted, l.max)
	}
	l.total++
	l.byCaller[caller]++
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.total--
			if l.byCaller[caller]--; l.byCaller[caller] == 0 {
				delete(l.byCaller, caller)
			}
		})
	}, nil
}
