package transport

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"go.uber.org/goleak"

	"github.com/cepcluster/cep/cluster/secret"
	"github.com/cepcluster/cep/internal/hclogslog"
	"github.com/cepcluster/cep/internal/testutil"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// newTestMux serves a Mux on a loopback port until the test ends, and checks
// that Serve returns nil after Close; setup runs on the Mux before Serve.
func newTestMux(t testing.TB, logger *slog.Logger, handshake time.Duration, setup ...func(*Mux)) *Mux {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := NewMux(ln, nil, logger)
	m.handshakeTimeout = handshake
	for _, f := range setup {
		f(m)
	}
	served := make(chan error, 1)
	go func() { served <- m.Serve() }()
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Errorf("Mux.Close: %v", err)
		}
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return m
}

func mustLayer(t testing.TB, m *Mux, group uint64) *Layer {
	t.Helper()
	l, err := m.Layer(group)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

type acceptResult struct {
	conn net.Conn
	err  error
}

// acceptAsync calls l.Accept in a goroutine that ends when Accept returns;
// closing l (or its Mux) guarantees that.
func acceptAsync(l *Layer) <-chan acceptResult {
	ch := make(chan acceptResult, 1)
	go func() {
		c, err := l.Accept()
		ch <- acceptResult{c, err}
	}()
	return ch
}

func acceptWithin(t testing.TB, l *Layer, d time.Duration) net.Conn {
	t.Helper()
	select {
	case r := <-acceptAsync(l):
		if r.err != nil {
			t.Fatalf("group %d: Accept: %v", l.group, r.err)
		}
		return r.conn
	case <-time.After(d):
		t.Fatalf("group %d: nothing accepted within %v", l.group, d)
		return nil
	}
}

// expectClosed fails unless the peer closes c within d.
func expectClosed(t testing.TB, c net.Conn, d time.Duration) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(d))
	var buf [1]byte
	n, err := c.Read(buf[:])
	var ne net.Error
	switch {
	case err == nil:
		t.Fatalf("read %d bytes from a connection expected to be closed", n)
	case errors.As(err, &ne) && ne.Timeout():
		t.Fatalf("connection not closed within %v", d)
	}
}

func rawDial(t testing.TB, m *Mux, payload []byte) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", m.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if len(payload) > 0 {
		if _, err := c.Write(payload); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// roundTrip sends msg from client to server and back over a routed stream.
func roundTrip(t testing.TB, client, server net.Conn, msg string) {
	t.Helper()
	for _, p := range [][2]net.Conn{{client, server}, {server, client}} {
		if _, err := p[0].Write([]byte(msg)); err != nil {
			t.Fatal(err)
		}
		p[1].SetReadDeadline(time.Now().Add(5 * time.Second))
		buf := make([]byte, len(msg))
		if _, err := io.ReadFull(p[1], buf); err != nil {
			t.Fatal(err)
		}
		if string(buf) != msg {
			t.Fatalf("got %q, want %q", buf, msg)
		}
	}
}

func TestMuxRouting(t *testing.T) {
	log := testutil.Logger(t, slog.LevelDebug)
	a := newTestMux(t, log.With("mux", "a"), time.Minute)
	b := newTestMux(t, log.With("mux", "b"), time.Minute)
	groups := []uint64{1, 2, 1 << 40} // a multi-byte uvarint too
	la, lb := map[uint64]*Layer{}, map[uint64]*Layer{}
	for _, g := range groups {
		la[g], lb[g] = mustLayer(t, a, g), mustLayer(t, b, g)
	}
	bAddr := raft.ServerAddress(b.Addr().String())

	for _, g := range groups {
		c, err := la[g].Dial(bAddr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		s := acceptWithin(t, lb[g], 5*time.Second)
		roundTrip(t, c, s, fmt.Sprintf("hello group %d", g))
		for _, h := range groups {
			if n := len(lb[h].connCh) + len(la[h].connCh); n != 0 {
				t.Errorf("dial to group %d: %d conns queued for group %d", g, n, h)
			}
		}
	}

	t.Run("unknown group", func(t *testing.T) {
		c := rawDial(t, b, appendHeader(nil, muxVersion, 99))
		expectClosed(t, c, 5*time.Second)

		l4 := mustLayer(t, a, 4) // registered on a, not on b
		defer l4.Close()
		c, err := l4.Dial(bAddr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		expectClosed(t, c, 5*time.Second)
	})
	t.Run("bad magic", func(t *testing.T) {
		expectClosed(t, rawDial(t, b, []byte("XEPR\x01\x01")), 5*time.Second)
	})
	t.Run("bad version", func(t *testing.T) {
		expectClosed(t, rawDial(t, b, []byte("CEPR\x03\x01")), 5*time.Second)
	})
	t.Run("varint overflow", func(t *testing.T) {
		hdr := append([]byte("CEPR\x01"), slices.Repeat([]byte{0xff}, 11)...)
		expectClosed(t, rawDial(t, b, hdr), 5*time.Second)
	})
	t.Run("data after header", func(t *testing.T) {
		// Header and payload in one write: the mux must not eat the payload.
		c := rawDial(t, b, append(appendHeader(nil, muxVersion, 2), "payload"...))
		s := acceptWithin(t, lb[2], 5*time.Second)
		buf := make([]byte, len("payload"))
		s.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.ReadFull(s, buf); err != nil || string(buf) != "payload" {
			t.Fatalf("got %q, %v", buf, err)
		}
		roundTrip(t, c, s, "more")
	})
	t.Run("silent clients", func(t *testing.T) {
		// b waits a minute for headers: silent clients must not delay others.
		for range 5 {
			rawDial(t, b, nil)
		}
		rawDial(t, b, []byte("CE")) // partial header
		c, err := la[1].Dial(bAddr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		roundTrip(t, c, acceptWithin(t, lb[1], 5*time.Second), "not blocked")

		// A mux with a short deadline drops them.
		short := newTestMux(t, log.With("mux", "short"), 100*time.Millisecond)
		silent := rawDial(t, short, nil)
		partial := rawDial(t, short, []byte("CEPR\x01"))
		expectClosed(t, silent, 5*time.Second)
		expectClosed(t, partial, 5*time.Second)
	})
}

func TestLayerLifecycle(t *testing.T) {
	log := testutil.Logger(t, slog.LevelDebug)
	a := newTestMux(t, log.With("mux", "a"), time.Minute)
	b := newTestMux(t, log.With("mux", "b"), time.Minute)
	bAddr := raft.ServerAddress(b.Addr().String())

	la := mustLayer(t, a, 1)
	if _, err := a.Layer(1); !errors.Is(err, ErrGroupRegistered) {
		t.Fatalf("second Layer(1): %v, want ErrGroupRegistered", err)
	}
	if got := la.Addr().String(); got != a.Addr().String() {
		t.Fatalf("Layer.Addr = %s, want %s", got, a.Addr())
	}
	testutil.EventuallyEvery(t, 5*time.Second, time.Millisecond, func() error {
		b.mu.Lock()
		defer b.mu.Unlock()
		if !b.serving {
			return errors.New("b not serving yet")
		}
		return nil
	})
	if err := b.Serve(); !errors.Is(err, ErrMuxServing) {
		t.Fatalf("second Serve: %v, want ErrMuxServing", err)
	}

	lb := mustLayer(t, b, 1)
	pending := acceptAsync(lb)
	c, err := la.Dial(bAddr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	r := <-pending
	if r.err != nil {
		t.Fatal(r.err)
	}
	s := r.conn
	roundTrip(t, c, s, "ping")

	// Closing b's layer fails its pending Accept, closes the conns it handed
	// out and frees the group; the Mux keeps running.
	pending = acceptAsync(lb)
	if err := lb.Close(); err != nil {
		t.Fatal(err)
	}
	if r := <-pending; !errors.Is(r.err, net.ErrClosed) || !errors.Is(r.err, ErrLayerClosed) {
		t.Fatalf("Accept after Close: %v, want ErrLayerClosed", r.err)
	}
	if _, err := lb.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept after Close: %v", err)
	}
	if _, err := lb.Dial(raft.ServerAddress(a.Addr().String()), time.Second); !errors.Is(err, ErrLayerClosed) {
		t.Fatalf("Dial after Close: %v", err)
	}
	if err := lb.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	expectClosed(t, c, 5*time.Second) // b closed its end
	if _, err := s.Write([]byte("x")); err == nil {
		t.Fatal("write on a conn of a closed layer succeeded")
	}
	// The group is unregistered: b drops new streams for it...
	c2, err := la.Dial(bAddr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	expectClosed(t, c2, 5*time.Second)
	// ...until it is registered again.
	lb = mustLayer(t, b, 1)
	c3, err := la.Dial(bAddr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	roundTrip(t, c3, acceptWithin(t, lb, 5*time.Second), "again")

	// Closing a's layer closes the conns it dialed too.
	if err := la.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c3.Write([]byte("x")); err == nil {
		t.Fatal("write on a dialed conn of a closed layer succeeded")
	}

	// A refused dial is an error, not a hang.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	lx := mustLayer(t, a, 7)
	if _, err := lx.Dial(raft.ServerAddress(dead), time.Second); err == nil {
		t.Fatal("Dial to a closed port succeeded")
	}
	lx.Close()
}

func TestMuxClose(t *testing.T) {
	log := testutil.Logger(t, slog.LevelDebug)
	peer := newTestMux(t, log.With("mux", "peer"), time.Minute)
	peerLayer := mustLayer(t, peer, 1)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := NewMux(ln, nil, log.With("mux", "m"))
	m.handshakeTimeout = time.Minute // Close must not wait for it
	served := make(chan error, 1)
	go func() { served <- m.Serve() }()
	t.Cleanup(func() { m.Close() }) // in case of an early failure

	var accepts []<-chan acceptResult
	var layers []*Layer
	for g := uint64(1); g <= 3; g++ {
		l := mustLayer(t, m, g)
		layers = append(layers, l)
		accepts = append(accepts, acceptAsync(l))
	}
	// A conn handshaken but never accepted, waiting in group 4's backlog.
	l4 := mustLayer(t, m, 4)
	queued := rawDial(t, m, appendHeader(nil, muxVersion, 4))
	testutil.EventuallyEvery(t, 5*time.Second, time.Millisecond, func() error {
		if n := len(l4.connCh); n != 1 {
			return fmt.Errorf("group 4 backlog: %d", n)
		}
		return nil
	})
	// A stream dialed out to a peer.
	out, err := layers[0].Dial(raft.ServerAddress(peer.Addr().String()), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	in := acceptWithin(t, peerLayer, 5*time.Second)
	// Clients stuck in the handshake.
	var silent []net.Conn
	for range 10 {
		silent = append(silent, rawDial(t, m, []byte("CEP")))
	}
	testutil.EventuallyEvery(t, 5*time.Second, time.Millisecond, func() error {
		m.mu.Lock()
		defer m.mu.Unlock()
		if n := len(m.pending); n != len(silent) {
			return fmt.Errorf("%d conns handshaking, want %d", n, len(silent))
		}
		return nil
	})

	start := time.Now()
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Close took %v", d)
	}
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(5 * time.Second): // Close waited for it: it has returned
		t.Fatal("Serve did not return after Close")
	}
	for i, ch := range accepts {
		select {
		case r := <-ch:
			if !errors.Is(r.err, net.ErrClosed) {
				t.Errorf("group %d: Accept returned %v, want net.ErrClosed", i+1, r.err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("group %d: Accept did not return after Close", i+1)
		}
	}
	for _, c := range silent {
		expectClosed(t, c, 5*time.Second)
	}
	expectClosed(t, queued, 5*time.Second)
	expectClosed(t, in, 5*time.Second) // m closed the stream it dialed
	if _, err := out.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Errorf("write on a conn dialed by a closed mux: %v, want net.ErrClosed", err)
	}

	if err := m.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := m.Serve(); err != nil {
		t.Fatalf("Serve after Close: %v", err)
	}
	if _, err := m.Layer(9); !errors.Is(err, ErrMuxClosed) {
		t.Fatalf("Layer after Close: %v, want ErrMuxClosed", err)
	}
	if _, err := l4.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept after Mux.Close: %v", err)
	}
	if _, err := layers[1].Dial(raft.ServerAddress(peer.Addr().String()), time.Second); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Dial after Mux.Close: %v", err)
	}
	if err := l4.Close(); err != nil {
		t.Fatalf("Layer.Close after Mux.Close: %v", err)
	}
}

// testFSM records applied commands in order. Raft calls Apply, Snapshot and
// Restore from one goroutine; the mutex is for the test's reads.
type testFSM struct {
	mu   sync.Mutex
	cmds []string
}

func (f *testFSM) Apply(l *raft.Log) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cmds = append(f.cmds, string(l.Data))
	return len(f.cmds)
}

func (f *testFSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return fsmSnapshot(slices.Clone(f.cmds)), nil
}

func (f *testFSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	var cmds []string
	if err := json.NewDecoder(rc).Decode(&cmds); err != nil {
		return err
	}
	f.mu.Lock()
	f.cmds = cmds
	f.mu.Unlock()
	return nil
}

func (f *testFSM) applied() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.cmds)
}

type fsmSnapshot []string

func (s fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	if err := json.NewEncoder(sink).Encode([]string(s)); err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

func (fsmSnapshot) Release() {}

type raftNode struct {
	id    raft.ServerID
	mux   *Mux
	rafts map[uint64]*raft.Raft
	fsms  map[uint64]*testFSM
	down  bool
}

func TestRaftOverMux(t *testing.T) {
	t.Run("insecure", func(t *testing.T) { raftOverMux(t) })
	// every stream authenticated, and streams quiet for 300 ms closed
	// (raft's pooled connections among them) while raft keeps working
	s := secret.Generate()
	t.Run("secret", func(t *testing.T) {
		raftOverMux(t, func(m *Mux) { m.UseSecret(s); m.idleTimeout = 300 * time.Millisecond })
	})
}

func raftOverMux(t *testing.T, setup ...func(*Mux)) {
	log := testutil.Logger(t, slog.LevelInfo)
	groups := []uint64{1, 2}

	nodes := make([]*raftNode, 3)
	var servers []raft.Server
	for i := range nodes {
		id := raft.ServerID(fmt.Sprintf("n%d", i))
		n := &raftNode{
			id:    id,
			mux:   newTestMux(t, log.With("node", id), time.Second, setup...),
			rafts: map[uint64]*raft.Raft{},
			fsms:  map[uint64]*testFSM{},
		}
		nodes[i] = n
		servers = append(servers, raft.Server{
			Suffrage: raft.Voter,
			ID:       id,
			Address:  raft.ServerAddress(n.mux.Addr().String()),
		})
	}
	for _, n := range nodes {
		for _, g := range groups {
			glog := log.With("node", n.id, "group", g)
			trans := NewTransport(mustLayer(t, n.mux, g), log.With("node", n.id)) // adds "group"
			conf := raft.DefaultConfig()
			conf.LocalID = n.id
			conf.HeartbeatTimeout = 200 * time.Millisecond
			conf.ElectionTimeout = 200 * time.Millisecond
			conf.LeaderLeaseTimeout = 100 * time.Millisecond
			conf.CommitTimeout = 5 * time.Millisecond
			conf.Logger = hclogslog.New(glog)
			store := raft.NewInmemStore()
			fsm := &testFSM{}
			r, err := raft.NewRaft(conf, fsm, store, store, raft.NewInmemSnapshotStore(), trans)
			if err != nil {
				t.Fatal(err)
			}
			// Cleanups run in reverse: every raft shuts down (closing its
			// transport and layer) before the muxes close.
			t.Cleanup(func() {
				if err := r.Shutdown().Error(); err != nil {
					t.Errorf("node %s group %d: shutdown: %v", n.id, g, err)
				}
			})
			if err := r.BootstrapCluster(raft.Configuration{Servers: servers}).Error(); err != nil {
				t.Fatal(err)
			}
			n.rafts[g], n.fsms[g] = r, fsm
		}
	}

	// leader waits until exactly one live node leads group g and every live
	// node knows it.
	leader := func(g uint64) *raftNode {
		t.Helper()
		var l *raftNode
		testutil.EventuallyEvery(t, 10*time.Second, 10*time.Millisecond, func() error {
			l = nil
			for _, n := range nodes {
				if !n.down && n.rafts[g].State() == raft.Leader {
					if l != nil {
						return fmt.Errorf("group %d: %s and %s both lead", g, l.id, n.id)
					}
					l = n
				}
			}
			if l == nil {
				return fmt.Errorf("group %d: no leader", g)
			}
			for _, n := range nodes {
				if _, id := n.rafts[g].LeaderWithID(); !n.down && id != l.id {
					return fmt.Errorf("group %d: %s sees leader %q, not %s", g, n.id, id, l.id)
				}
			}
			return nil
		})
		return l
	}
	var want = map[uint64][]string{}
	apply := func(g uint64, count int) {
		t.Helper()
		l := leader(g)
		futures := make([]raft.ApplyFuture, count)
		for i := range futures {
			cmd := fmt.Sprintf("g%d-%04d", g, len(want[g]))
			want[g] = append(want[g], cmd)
			futures[i] = l.rafts[g].Apply([]byte(cmd), 5*time.Second)
		}
		for _, f := range futures {
			if err := f.Error(); err != nil {
				t.Fatalf("group %d: apply on %s: %v", g, l.id, err)
			}
		}
		testutil.EventuallyEvery(t, 10*time.Second, 10*time.Millisecond, func() error {
			for _, n := range nodes {
				if n.down {
					continue
				}
				if got := n.fsms[g].applied(); !slices.Equal(got, want[g]) {
					return fmt.Errorf("group %d: %s applied %d commands, want %d in order", g, n.id, len(got), len(want[g]))
				}
			}
			return nil
		})
	}

	for _, g := range groups {
		apply(g, 100)
	}

	// Lose the leader of group 1 (and everything else on its node).
	old := leader(1)
	t.Logf("closing the mux of %s, leader of group 1", old.id)
	if err := old.mux.Close(); err != nil {
		t.Fatal(err)
	}
	old.down = true
	if l := leader(1); l == old {
		t.Fatalf("group 1 still led by %s", old.id)
	}
	for _, g := range groups {
		apply(g, 100)
	}
}
