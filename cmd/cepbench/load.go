package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cepcluster/cep/internal/fbom"
	"github.com/cepcluster/cep/keygroup"
)

// The workload is benchmark 3 of nfa/bench_test.go (FollowedByOneOrMore):
// keys k00000.., 1 % of the events of type A, 20 % of type B, the rest N,
// every event with an int v in [0, 100). Event i of the run (counted over
// every phase) has ts = i+1, so timestamps are strictly increasing, the
// watermark moves with every event, and a match's "end" names its last
// event: index end-1.
const genSeed = 3

// patternSpec is benchmark 3's pattern reading source "bench": within is a
// window of windowEvents events of one key (with nkeys uniform keys and ts
// growing by one per event).
func patternSpec(name, source string, nkeys, windowEvents int) string {
	return fbom.Spec(name, source, windowEvents*nkeys)
}

func keyName(i int) string { return fmt.Sprintf("k%05d", i) }

// subjects returns, per key, the subject "<prefix>.<key token>".
func subjects(prefix string, nkeys int) []string {
	out := make([]string, nkeys)
	for i := range out {
		out[i] = prefix + "." + keygroup.KeyToken(keyName(i))
	}
	return out
}

// events is a block of pre-generated, pre-encoded events with consecutive
// global indexes first, first+1, ...
type events struct {
	first int
	key   []uint16
	off   []int // payload i is data[off[i]:off[i+1]]
	data  []byte
}

func (e *events) len() int                         { return len(e.key) }
func (e *events) payload(i int) []byte             { return e.data[e.off[i]:e.off[i+1]:e.off[i+1]] }
func (e *events) subject(s []string, i int) string { return s[e.key[i]] }

// generator produces the run's events in order from one seeded source, so a
// run is the same whatever the phases' sizes.
type generator struct {
	r     *rand.Rand
	next  int
	nkeys int
	names []string
}

func newGenerator(nkeys int) *generator {
	g := &generator{r: rand.New(rand.NewPCG(genSeed, 0x9e3779b97f4a7c15)), nkeys: nkeys}
	for i := 0; i < nkeys; i++ {
		g.names = append(g.names, keyName(i))
	}
	return g
}

// reserve skips n global indexes (for events built elsewhere) and returns
// the first.
func (g *generator) reserve(n int) int {
	first := g.next
	g.next += n
	return first
}

// gen returns the next n events.
func (g *generator) gen(n int) *events {
	e := &events{first: g.next, key: make([]uint16, n), off: make([]int, n+1), data: make([]byte, 0, n*48)}
	for i := 0; i < n; i++ {
		k := g.r.IntN(g.nkeys)
		typ := fbom.Type(g.r)
		v := g.r.IntN(100)
		e.key[i] = uint16(k)
		b := e.data
		b = append(b, `{"k":"`...)
		b = append(b, g.names[k]...)
		b = append(b, `","type":"`...)
		b = append(b, typ)
		b = append(b, `","ts":`...)
		b = strconv.AppendInt(b, int64(g.next+i+1), 10)
		b = append(b, `,"v":`...)
		b = strconv.AppendInt(b, int64(v), 10)
		b = append(b, '}')
		e.data = b
		e.off[i+1] = len(b)
	}
	g.next += n
	return e
}

// maxStall bounds the wait for a free slot among the publishes in flight.
const maxStall = 2 * time.Minute

// publisher publishes asynchronously with a bounded number of messages
// awaiting their JetStream acknowledgement.
type publisher struct {
	js    jetstream.JetStream
	acked atomic.Int64
	mu    sync.Mutex
	err   error
}

func newPublisher(nc *nats.Conn, inflight int) (*publisher, error) {
	p := &publisher{}
	js, err := jetstream.New(nc,
		jetstream.WithPublishAsyncMaxPending(inflight),
		jetstream.WithPublishAsyncAckHandler(func(jetstream.JetStream, *nats.Msg, *jetstream.PubAck) { p.acked.Add(1) }),
		jetstream.WithPublishAsyncErrHandler(func(_ jetstream.JetStream, m *nats.Msg, err error) {
			p.fail(fmt.Errorf("publish to %s: %w", m.Subject, err))
		}),
	)
	if err != nil {
		return nil, err
	}
	p.js = js
	return p, nil
}

func (p *publisher) fail(err error) {
	p.mu.Lock()
	if p.err == nil {
		p.err = err
	}
	p.mu.Unlock()
}

// Err returns the first asynchronous publish error.
func (p *publisher) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// publish sends one message, waiting (at most maxStall) while the maximum
// is in flight.
func (p *publisher) publish(ctx context.Context, subject string, data []byte) error {
	var stalled time.Time
	for {
		_, err := p.js.PublishMsgAsync(&nats.Msg{Subject: subject, Data: data}, jetstream.WithStallWait(time.Second))
		if err == nil {
			return nil
		}
		if !errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if stalled.IsZero() {
			stalled = time.Now()
		} else if time.Since(stalled) > maxStall {
			return fmt.Errorf("no publish acknowledged for %s (%d in flight)", maxStall, p.js.PublishAsyncPending())
		}
		if err := p.Err(); err != nil {
			return err
		}
	}
}

// drain waits until every published message is acknowledged.
func (p *publisher) drain(ctx context.Context, timeout time.Duration) error {
	select {
	case <-p.js.PublishAsyncComplete():
		return p.Err()
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(timeout):
		return fmt.Errorf("%d publishes still unacknowledged after %s", p.js.PublishAsyncPending(), timeout)
	}
}

// publishAll publishes every event as fast as the in-flight bound allows,
// then waits for the acknowledgements; it returns the time that took.
func (p *publisher) publishAll(ctx context.Context, evs *events, subj []string) (time.Duration, error) {
	start := time.Now()
	for i := 0; i < evs.len(); i++ {
		if err := p.publish(ctx, evs.subject(subj, i), evs.payload(i)); err != nil {
			return 0, fmt.Errorf("event %d: %w", evs.first+i, err)
		}
		if i&4095 == 0 {
			if err := p.Err(); err != nil {
				return 0, err
			}
		}
	}
	if err := p.drain(ctx, 2*time.Minute); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// pacer publishes a block of events at a fixed rate, stamping each event's
// publish time (since base) and counting what it sent, so that other
// goroutines can relate outputs to publish times.
type pacer struct {
	evs   *events
	subj  []string
	rate  float64
	base  time.Time
	stamp []atomic.Int64 // ns since base, 0: not published
	sent  atomic.Int64   // events published so far
}

func newPacer(evs *events, subj []string, rate float64, base time.Time) *pacer {
	return &pacer{evs: evs, subj: subj, rate: rate, base: base, stamp: make([]atomic.Int64, evs.len())}
}

// published returns the publish time of global event index idx.
func (pc *pacer) published(idx int) (time.Duration, bool) {
	i := idx - pc.evs.first
	if i < 0 || i >= len(pc.stamp) {
		return 0, false
	}
	ns := pc.stamp[i].Load()
	return time.Duration(ns), ns != 0
}

// contains reports whether the global index belongs to this block.
func (pc *pacer) contains(idx int) bool {
	return idx >= pc.evs.first && idx < pc.evs.first+pc.evs.len()
}

// run publishes until every event is sent or ctx ends (not an error): the
// events due by now are sent, then it sleeps a millisecond.
func (pc *pacer) run(ctx context.Context, p *publisher) (sent int, elapsed time.Duration, err error) {
	start := time.Now()
	n := pc.evs.len()
	i := 0
	for i < n {
		if ctx.Err() != nil {
			break
		}
		due := min(n, int(time.Since(start).Seconds()*pc.rate)+1)
		for ; i < due; i++ {
			pc.stamp[i].Store(int64(time.Since(pc.base)) | 1)
			if err := p.publish(ctx, pc.evs.subject(pc.subj, i), pc.evs.payload(i)); err != nil {
				if ctx.Err() != nil {
					break
				}
				return i, time.Since(start), err
			}
			pc.sent.Store(int64(i + 1))
		}
		if err := p.Err(); err != nil {
			return i, time.Since(start), err
		}
		if i < n {
			select {
			case <-ctx.Done():
			case <-time.After(time.Millisecond):
			}
		}
	}
	return i, time.Since(start), nil
}
