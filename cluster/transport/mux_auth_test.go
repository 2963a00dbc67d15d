package transport

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/cepcluster/cep/cluster/secret"
	"github.com/cepcluster/cep/internal/testutil"
)

func withSecret(s secret.Secret) func(*Mux) { return func(m *Mux) { m.UseSecret(s) } }

// hello is the dialer's opening of the authenticated header, meaning to
// reach target from from.
func hello(group uint64, dn []byte, target, from string) []byte {
	b := append(binary.AppendUvarint([]byte("CEPR\x03"), group), dn...)
	b = append(append(b, byte(len(target))), target...)
	b = append(append(b, byte(len(from))), from...)
	return append(b, 0) // no node id
}

// handClient runs the dialer's side of the authenticated header by hand,
// as the package doc describes it, with key as the secret it claims: it
// returns the conn after sending its proof, sealed with the keys the doc
// gives, and whether the acceptor's proof was right.
func handClient(t *testing.T, m *Mux, group uint64, key secret.Secret) (net.Conn, bool) {
	t.Helper()
	var dn [32]byte
	copy(dn[:], "a nonce the test picked, 32 byte")
	target, from := m.Addr().String(), "127.0.0.1:1"
	c := rawDial(t, m, hello(group, dn[:], target, from))
	c.SetDeadline(time.Now().Add(5 * time.Second))
	var reply [64]byte
	if _, err := io.ReadFull(c, reply[:]); err != nil {
		t.Fatalf("reading the acceptor's nonce and proof: %v", err)
	}
	g := binary.BigEndian.AppendUint64(nil, group)
	an := reply[:32]
	acceptorOK := string(reply[32:]) == string(key.MAC(secret.Raft, []byte("acceptor"), g, dn[:], an, []byte(target), []byte(from), []byte{}, nil))
	if _, err := c.Write(key.MAC(secret.Raft, []byte("dialer"), g, dn[:], an, []byte(target), []byte(from), []byte{}, nil)); err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Time{})
	sc := &sealedConn{Conn: c}
	k := func(dir string) []byte {
		return key.MAC(secret.RaftStream, []byte(dir), g, dn[:], an, []byte(target), []byte(from), []byte{})
	}
	if err := sc.setKeys(k("dialer to acceptor"), k("acceptor to dialer")); err != nil {
		t.Fatal(err)
	}
	return sc, acceptorOK
}

// expectNothingAccepted fails if l accepts a stream within d.
func expectNothingAccepted(t *testing.T, l *Layer, d time.Duration) {
	t.Helper()
	select {
	case r := <-acceptAsync(l):
		if r.err == nil {
			t.Fatalf("group %d accepted a stream it should have refused", l.group)
		}
	case <-time.After(d):
	}
}

// Peers holding the same secret open streams to each other; a peer with
// another secret is refused whichever side it is on, and so are the old
// unauthenticated header and a mux without a secret.
func TestMuxSecret(t *testing.T) {
	log := testutil.Logger(t, slog.LevelDebug)
	s, other := secret.Generate(), secret.Generate()
	a := newTestMux(t, log.With("mux", "a"), 2*time.Second, withSecret(s))
	b := newTestMux(t, log.With("mux", "b"), 2*time.Second, withSecret(s))
	x := newTestMux(t, log.With("mux", "x"), 2*time.Second, withSecret(other))
	plain := newTestMux(t, log.With("mux", "plain"), 2*time.Second)
	la, lb, lx, lp := mustLayer(t, a, 3), mustLayer(t, b, 3), mustLayer(t, x, 3), mustLayer(t, plain, 3)
	addr := func(m *Mux) raft.ServerAddress { return raft.ServerAddress(m.Addr().String()) }

	c, err := la.Dial(addr(b), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	roundTrip(t, c, acceptWithin(t, lb, 5*time.Second), "same secret")

	t.Run("the spec by hand", func(t *testing.T) {
		c, ok := handClient(t, b, 3, s)
		if !ok {
			t.Fatal("the acceptor's proof differs from the documented one")
		}
		roundTrip(t, c, acceptWithin(t, lb, 5*time.Second), "by hand")
	})
	t.Run("dialer with another secret", func(t *testing.T) {
		if _, err := lx.Dial(addr(b), 5*time.Second); err == nil {
			t.Fatal("a dialer with another secret opened a stream")
		}
		// one that ignores the acceptor's proof and sends its own
		c, ok := handClient(t, b, 3, other)
		if ok {
			t.Fatal("the acceptor's proof checks out under another secret")
		}
		c.Write([]byte("payload"))
		expectClosed(t, c, 5*time.Second)
		expectNothingAccepted(t, lb, 200*time.Millisecond)
	})
	t.Run("acceptor with another secret", func(t *testing.T) {
		_, err := la.Dial(addr(x), 5*time.Second)
		if err == nil {
			t.Fatal("dialled a peer with another secret")
		}
		t.Log(err)
		expectNothingAccepted(t, lx, 200*time.Millisecond)
	})
	t.Run("old header", func(t *testing.T) {
		c := rawDial(t, b, append(appendHeader(nil, muxVersion, 3), "payload"...))
		expectClosed(t, c, 5*time.Second)
		expectNothingAccepted(t, lb, 200*time.Millisecond)
	})
	t.Run("without a secret", func(t *testing.T) {
		// (version 1 waits for no answer: the stream opens, and is closed)
		if c, err := lp.Dial(addr(b), 5*time.Second); err == nil {
			expectClosed(t, c, 5*time.Second)
		}
		if _, err := la.Dial(addr(plain), 5*time.Second); err == nil {
			t.Fatal("a mux with a secret opened a stream to one without")
		}
		expectNothingAccepted(t, lb, 100*time.Millisecond)
		expectNothingAccepted(t, lp, 100*time.Millisecond)
	})
	t.Run("unknown group", func(t *testing.T) {
		c := rawDial(t, b, append(appendHeader(nil, muxVersionAuth, 99), make([]byte, 32)...))
		expectClosed(t, c, 5*time.Second) // closed, not answered
	})
}

// With TLS the handshake runs inside it: both are needed.
func TestMuxSecretOverTLS(t *testing.T) {
	certs := testTLS(t, "cluster", "n1", "n2")
	s := secret.Generate()
	tlsMux := func(c *TLS, k secret.Secret) *Mux {
		return newTestMux(t, testutil.Logger(t, -4), 2*time.Second, func(m *Mux) { m.UseTLS(c.PeerServer(), c.Client()); m.UseSecret(k) })
	}
	m1, m2, m3 := tlsMux(certs[0], s), tlsMux(certs[1], s), tlsMux(certs[1], secret.Generate())
	l1, l2, l3 := mustLayer(t, m1, 7), mustLayer(t, m2, 7), mustLayer(t, m3, 7)
	c, err := l1.Dial(raft.ServerAddress(m2.Addr().String()), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	roundTrip(t, c, acceptWithin(t, l2, 5*time.Second), "tls and secret")
	if _, err := l1.Dial(raft.ServerAddress(m3.Addr().String()), 5*time.Second); err == nil {
		t.Fatal("a certificate of the cluster's CA without the secret opened a stream")
	}
	expectNothingAccepted(t, l3, 200*time.Millisecond)
}

// Clients that say nothing, stop after the header or trickle it byte by
// byte are closed once the handshake timeout has passed since they
// connected.
func TestMuxSlowClients(t *testing.T) {
	m := newTestMux(t, testutil.Logger(t, slog.LevelDebug), 300*time.Millisecond, withSecret(secret.Generate()))
	l := mustLayer(t, m, 1)
	silent := rawDial(t, m, nil)
	header := rawDial(t, m, appendHeader(nil, muxVersionAuth, 1))
	nonce := rawDial(t, m, hello(1, make([]byte, 32), m.Addr().String(), "x"))
	trickle := rawDial(t, m, nil)
	start := time.Now()
	go func() {
		// a byte every 50 ms: more than the timeout in all
		for _, b := range append(appendHeader(nil, muxVersionAuth, 1), make([]byte, 32)...) {
			if _, err := trickle.Write([]byte{b}); err != nil {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	// the one that sent its nonce is answered, and then gives no proof
	nonce.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(nonce, make([]byte, 64)); err != nil {
		t.Fatalf("no answer to the nonce: %v", err)
	}
	for _, c := range []net.Conn{silent, header, nonce, trickle} {
		expectClosed(t, c, 5*time.Second)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("slow clients closed after %v, the handshake timeout is 300ms", d)
	}
	expectNothingAccepted(t, l, 100*time.Millisecond)
}

// A stream on which nothing moves for the idle timeout is closed; one in
// use is not.
func TestMuxIdleStreams(t *testing.T) {
	s := secret.Generate()
	const idle = 300 * time.Millisecond
	setup := func(m *Mux) { m.UseSecret(s); m.idleTimeout = idle }
	a := newTestMux(t, testutil.Logger(t, slog.LevelDebug), time.Second, setup)
	b := newTestMux(t, testutil.Logger(t, slog.LevelDebug), time.Second, setup)
	la, lb := mustLayer(t, a, 1), mustLayer(t, b, 1)
	dial := func() (net.Conn, net.Conn) {
		c, err := la.Dial(raft.ServerAddress(b.Addr().String()), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return c, acceptWithin(t, lb, 5*time.Second)
	}

	busyC, busyS := dial()
	quietC, quietS := dial()
	start := time.Now()
	// the busy stream goes back and forth every 50 ms for 4 idle timeouts
	for time.Since(start) < 4*idle {
		roundTrip(t, busyC, busyS, "busy")
		time.Sleep(50 * time.Millisecond)
	}
	// the quiet one: the accepted end's next read fails once idle has
	// passed, and the raft transport then closes it, as here
	quietS.SetReadDeadline(time.Time{}) // the idle deadline still applies
	if _, err := quietS.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("read on an idle stream: %v, want io.EOF (a peer gone quiet)", err)
	}
	quietS.Close()
	expectClosed(t, quietC, 5*time.Second)
	// a user's deadline sooner than the idle one is kept
	busyS.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	t0 := time.Now()
	var ne net.Error
	if _, err := busyS.Read(make([]byte, 1)); !errors.As(err, &ne) || !ne.Timeout() || time.Since(t0) > idle {
		t.Fatalf("read with a 50ms deadline: %v after %v, want a timeout", err, time.Since(t0))
	}
}

// Raft's transport recovers from a pooled connection that the peer closed
// as idle: an RPC on it may fail once, and the next opens a new stream.
func TestTransportAfterIdleClose(t *testing.T) {
	s := secret.Generate()
	setup := func(m *Mux) { m.UseSecret(s); m.idleTimeout = 200 * time.Millisecond }
	a := newTestMux(t, testutil.Logger(t, slog.LevelDebug), time.Second, setup)
	b := newTestMux(t, testutil.Logger(t, slog.LevelDebug), time.Second, setup)
	ta, tb := NewTransport(mustLayer(t, a, 1), nil), NewTransport(mustLayer(t, b, 1), nil)
	t.Cleanup(func() { ta.Close(); tb.Close() })
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	go func() { // b answers every AppendEntries with its term
		for {
			select {
			case rpc := <-tb.Consumer():
				rpc.Respond(&raft.AppendEntriesResponse{Term: rpc.Command.(*raft.AppendEntriesRequest).Term, Success: true}, nil)
			case <-done:
				return
			}
		}
	}()
	call := func(term uint64) error {
		var resp raft.AppendEntriesResponse
		err := ta.AppendEntries("b", raft.ServerAddress(b.Addr().String()), &raft.AppendEntriesRequest{Term: term}, &resp)
		if err == nil && resp.Term != term {
			return fmt.Errorf("answer for term %d, want %d", resp.Term, term)
		}
		return err
	}
	if err := call(1); err != nil {
		t.Fatal(err)
	}
	// b's end of the pooled stream is closed once idle
	b.mu.Lock()
	bl := b.layers[1]
	b.mu.Unlock()
	testutil.Eventually(t, 5*time.Second, func() error {
		bl.mu.Lock()
		defer bl.mu.Unlock()
		if n := len(bl.conns); n != 0 {
			return fmt.Errorf("b holds %d streams", n)
		}
		return nil
	})
	// the RPC that finds it closed may fail; the one after succeeds
	if err := call(2); err != nil {
		t.Logf("first RPC on the closed stream: %v", err)
		if err := call(3); err != nil {
			t.Fatalf("transport did not recover: %v", err)
		}
	}
}

// Beyond maxHandshakes connections in their handshake, a new one is closed
// at once; once they are gone, streams open again.
func TestMuxHandshakeBound(t *testing.T) {
	s := secret.Generate()
	const max = 4
	m := newTestMux(t, testutil.Logger(t, slog.LevelDebug), time.Minute, func(m *Mux) { m.UseSecret(s); m.maxHandshakes = max })
	peer := newTestMux(t, testutil.Logger(t, slog.LevelDebug), time.Minute, withSecret(s))
	l, lp := mustLayer(t, m, 1), mustLayer(t, peer, 1)
	var silent []net.Conn
	for range max {
		silent = append(silent, rawDial(t, m, nil))
	}
	testutil.Eventually(t, 5*time.Second, func() error {
		m.mu.Lock()
		defer m.mu.Unlock()
		if n := len(m.pending); n != max {
			return fmt.Errorf("%d in their handshake, want %d", n, max)
		}
		return nil
	})
	start := time.Now()
	expectClosed(t, rawDial(t, m, nil), 5*time.Second)
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("the connection over the bound was closed after %v, not at once (the handshake timeout is a minute)", d)
	}
	for _, c := range silent {
		c.Close()
	}
	testutil.Eventually(t, 5*time.Second, func() error {
		m.mu.Lock()
		defer m.mu.Unlock()
		if n := len(m.pending); n != 0 {
			return fmt.Errorf("%d in their handshake", n)
		}
		return nil
	})
	c, err := lp.Dial(raft.ServerAddress(m.Addr().String()), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	roundTrip(t, c, acceptWithin(t, l, 5*time.Second), "after the flood")
}
