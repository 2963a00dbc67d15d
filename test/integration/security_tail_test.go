package integration

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cepcluster/cep/api"
	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/api/gen/cep/v1/cepv1connect"
	"github.com/cepcluster/cep/cluster"
	"github.com/cepcluster/cep/internal/testutil"
)

// outputConsumers is the number of consumers on the output stream.
func outputConsumers(t *testing.T, ctx context.Context, js jetstream.JetStream) int {
	t.Helper()
	st, err := js.Stream(ctx, cluster.OutputStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Consumers
}

// tailCall is a Tail call made in the background: the call returns only
// once the node sends the first record (or an error).
type tailCall struct {
	stream *connect.ServerStreamForClient[cepv1.Record]
	err    error
}

func startTail(ctx context.Context, c cepv1connect.MatchServiceClient, pattern string) <-chan tailCall {
	ch := make(chan tailCall, 1)
	go func() {
		s, err := c.Tail(ctx, req(&cepv1.TailRequest{Pattern: pattern}))
		ch <- tailCall{s, err}
	}()
	return ch
}

// Tail streams opened and dropped leave nothing behind: their handlers'
// goroutines end and their JetStream consumers are gone at once (not
// after the server's inactivity threshold).
func TestTailDroppedStreamsLeaveNothing(t *testing.T) {
	tc := newSingle(t, 2*time.Minute, cluster.Config{})
	c := tc.deployOnBank(0, lflSpec)
	js := tc.jetStream()
	ctx := tc.ctx
	consumers0 := outputConsumers(t, ctx, js)
	runtime.GC()
	goroutines0 := runtime.NumGoroutine()

	const rounds, perRound = 20, 10 // 200 streams, 10 at a time (under the per-caller limit)
	for round := range rounds {
		tctx, cancel := context.WithCancel(ctx)
		var calls []<-chan tailCall
		for range perRound {
			calls = append(calls, startTail(tctx, c.matches, "lfl"))
		}
		// every handler is running once its consumer exists
		testutil.EventuallyEvery(t, 10*time.Second, poll, func() error {
			if n := outputConsumers(t, ctx, js); n < consumers0+perRound {
				return fmt.Errorf("round %d: %d consumers on the output stream, want %d", round, n, consumers0+perRound)
			}
			return nil
		})
		cancel()
		for _, call := range calls {
			if r := <-call; r.err == nil {
				r.stream.Close()
			}
		}
		// gone at once: well within the server's inactivity threshold
		testutil.EventuallyEvery(t, 5*time.Second, poll, func() error {
			if n := outputConsumers(t, ctx, js); n != consumers0 {
				return fmt.Errorf("round %d: %d consumers on the output stream after its tails were dropped, %d before", round, n, consumers0)
			}
			return nil
		})
	}
	const tolerance = 40
	testutil.EventuallyEvery(t, 10*time.Second, poll, func() error {
		if n := runtime.NumGoroutine(); n > goroutines0+tolerance {
			return fmt.Errorf("%d goroutines after %d dropped tails, %d before", n, rounds*perRound, goroutines0)
		}
		return nil
	})
}

// tailReaders are three readers' tokens and an operator's.
func tailReaders(t *testing.T) *api.Tokens {
	t.Helper()
	tk, err := api.ParseTokens("tokens", strings.NewReader(`operator operator-0123456789abcdef
reader a-0123456789abcdef
reader b-0123456789abcdef
reader c-0123456789abcdef
`))
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

// tailProbe opens tails of lfl on a node and checks whether each is
// accepted or refused, counting those open by their consumers on the
// output stream.
type tailProbe struct {
	t          *testing.T
	tc         *testCluster
	js         jetstream.JetStream
	consumers0 int
	open       int
}

func newTailProbe(t *testing.T, tc *testCluster) *tailProbe {
	js := tc.jetStream()
	return &tailProbe{t: t, tc: tc, js: js, consumers0: outputConsumers(t, tc.ctx, js)}
}

func (p *tailProbe) tail(opt connect.ClientOption) (<-chan tailCall, context.CancelFunc) {
	tctx, cancel := context.WithCancel(p.tc.ctx)
	p.t.Cleanup(cancel)
	return startTail(tctx, p.tc.client(0, opt).matches, "lfl"), cancel
}

// accepted opens a tail that must stay open.
func (p *tailProbe) accepted(who string, opt connect.ClientOption) context.CancelFunc {
	p.t.Helper()
	call, cancel := p.tail(opt)
	p.open++
	testutil.EventuallyEvery(p.t, 10*time.Second, poll, func() error {
		select {
		case r := <-call:
			err := r.err
			if err == nil {
				r.stream.Receive()
				err = r.stream.Err()
			}
			p.t.Fatalf("tail %d (caller %s) ended: %v", p.open, who, err)
		default:
		}
		return p.wantOpen()
	})
	return cancel
}

// refused opens a tail that must be refused naming limit.
func (p *tailProbe) refused(who, limit string, opt connect.ClientOption) {
	p.t.Helper()
	call, cancel := p.tail(opt)
	defer cancel()
	r := <-call
	err := r.err
	if err == nil {
		if r.stream.Receive() {
			p.t.Fatalf("a tail of %s past the %s limit got a record", who, limit)
		}
		err = r.stream.Err()
	}
	if connect.CodeOf(err) != connect.CodeResourceExhausted || !strings.Contains(err.Error(), limit) {
		p.t.Fatalf("a tail of %s past the %s limit: %v, want resource exhausted naming the limit", who, limit, err)
	}
}

func (p *tailProbe) wantOpen() error {
	if n := outputConsumers(p.t, p.tc.ctx, p.js); n != p.consumers0+p.open {
		return fmt.Errorf("%d tails' consumers on the output stream, want %d", n-p.consumers0, p.open)
	}
	return nil
}

// Concurrent tails are bounded per caller (its verified bearer token)
// and per node: the one past a limit gets ResourceExhausted, and a place
// freed is taken again.
func TestTailConcurrencyLimits(t *testing.T) {
	tc := newSingle(t, time.Minute, cluster.Config{TailMaxStreams: 6, TailMaxStreamsPerCaller: 4, Tokens: tailReaders(t)})
	tc.createBank(tc.client(0, as("operator")))
	tc.deploy(tc.client(0, as("operator")), &cepv1.DeployPatternRequest{Spec: string(lflSpec)})
	p := newTailProbe(t, tc)
	var first context.CancelFunc
	for i := range 4 {
		if cancel := p.accepted("a", as("a")); i == 0 {
			first = cancel
		}
	}
	p.refused("a", "per caller", as("a"))
	p.accepted("b", as("b"))
	p.accepted("b", as("b"))
	p.refused("b", "per node", as("b"))
	p.refused("c", "per node", as("c"))
	first()
	p.open--
	testutil.EventuallyEvery(t, 10*time.Second, poll, p.wantOpen)
	p.accepted("b", as("b"))
}

// On an API that checks no token, a bearer token names no caller: tails
// sent with made-up tokens from one host are that host's, under its one
// limit (before, each made-up token was a caller of its own).
func TestTailMadeUpTokensAreOneCaller(t *testing.T) {
	tc := newSingle(t, time.Minute, cluster.Config{TailMaxStreams: 10, TailMaxStreamsPerCaller: 2})
	tc.deployOnBank(0, lflSpec)
	p := newTailProbe(t, tc)
	p.accepted("made-up token 1", api.WithClientToken("made-up-1"))
	p.accepted("made-up token 2", api.WithClientToken("made-up-2"))
	p.refused("made-up token 3", "per caller", api.WithClientToken("made-up-3"))
	p.refused("no token", "per caller", api.WithClientToken(""))
}

// A tail whose client does not read while output flows is cut off once
// its bounded buffer is full, as NATS cuts off a slow consumer: the node
// neither keeps the output for it nor its consumer, and its heap does not
// grow with the output.
func TestTailSlowClientIsCutOff(t *testing.T) {
	tc := newSingle(t, 2*time.Minute, cluster.Config{TailMaxStreamsPerCaller: 32})
	tc.deployOnBank(0, lflSpec)
	nc, js := tc.connect()
	defer nc.Close()
	ctx := tc.ctx
	consumers0 := outputConsumers(t, ctx, js)

	const clients = 20
	var calls []<-chan tailCall
	var cancels []context.CancelFunc
	for range clients {
		// each on a connection of its own, which it never reads, with a
		// small receive buffer (not the tens of MB the kernel would
		// otherwise take for it on loopback)
		hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if err == nil {
				err = c.(*net.TCPConn).SetReadBuffer(16 << 10)
			}
			return c, err
		}}}
		t.Cleanup(hc.CloseIdleConnections)
		sctx, cancel := context.WithCancel(ctx)
		t.Cleanup(cancel)
		cancels = append(cancels, cancel)
		calls = append(calls, startTail(sctx, clientsAt(hc, "http://"+tc.nodes[0].APIAddr()).matches, "lfl"))
	}
	testutil.EventuallyEvery(t, 10*time.Second, poll, func() error {
		if n := outputConsumers(t, ctx, js); n != consumers0+clients {
			return fmt.Errorf("%d tails' consumers, want %d", n-consumers0, clients)
		}
		return nil
	})
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	heap0 := ms.HeapInuse

	// 30 MB of records on the pattern's output subject
	const records, size = 300, 100 << 10
	for i := range records {
		// random, so that the API's compression does not shrink it
		pad := base64.StdEncoding.EncodeToString(randomBytes(size * 3 / 4))
		rec := fmt.Sprintf(`{"type":"match","id":"r%d","pattern":"lfl","key":"k","pad":%q}`, i, pad)
		if _, err := js.PublishAsync("cep.out.lfl", []byte(rec)); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-ctx.Done():
		t.Fatal("output not stored")
	}
	// the tails have taken what they will: each consumer has delivered all
	// (into the node) or is gone with its cut-off tail
	out, err := js.Stream(ctx, cluster.OutputStream)
	if err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyEvery(t, 30*time.Second, poll, func() error {
		// read to the end: the lister's goroutine blocks on a send
		// nobody takes otherwise (nats.go does not select on the context
		// there), as goleak found
		l := out.ListConsumers(ctx)
		var pending error
		for info := range l.Info() {
			if info.NumPending > 0 && pending == nil {
				pending = fmt.Errorf("consumer %s has %d records to deliver", info.Name, info.NumPending)
			}
		}
		if pending != nil {
			return pending
		}
		return l.Err()
	})
	runtime.GC()
	runtime.ReadMemStats(&ms)
	grown := int64(ms.HeapInuse) - int64(heap0)
	t.Logf("heap in use grew by %d MB with %d slow tails over %d MB of output", grown>>20, clients, records*size>>20)
	if grown > 100<<20 {
		t.Errorf("heap in use grew by %d MB with %d slow tails", grown>>20, clients)
	}
	// every slow tail is cut off: its consumer is gone
	testutil.EventuallyEvery(t, 30*time.Second, poll, func() error {
		if n := outputConsumers(t, ctx, js); n != consumers0 {
			return fmt.Errorf("%d of %d slow tails still have their consumer after %d records", n-consumers0, clients, records)
		}
		return nil
	})
	// what a cut-off client reads ends short of the output (with an
	// error, or, its connection broken off, when the test gives up)
	for _, cancel := range cancels {
		giveUp := time.AfterFunc(5*time.Second, cancel)
		defer giveUp.Stop()
	}
	for i, call := range calls {
		r := <-call
		if r.err != nil {
			continue // cut off before the response began
		}
		s := r.stream
		defer s.Close()
		got := 0
		for s.Receive() {
			got++
		}
		if s.Err() == nil || got >= records {
			t.Fatalf("slow tail %d read %d of %d records, then %v; want it cut off with an error", i, got, records, s.Err())
		}
		if i == 0 {
			t.Logf("a slow tail read %d records, then %v", got, s.Err())
		}
	}
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}
