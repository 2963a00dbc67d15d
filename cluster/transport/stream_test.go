package transport

import (
	"bytes"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/cepcluster/cep/cluster/secret"
	"github.com/cepcluster/cep/internal/testutil"
)

// proxy is a TCP relay on the loopback between a dialer and upstream: it
// forwards both ways and records what goes each way; while hold is set it
// records what the dialer sends without forwarding it, and inject writes
// to upstream as if the dialer had sent it.
type proxy struct {
	ln       net.Listener
	upstream string

	mu     sync.Mutex
	hold   bool
	toUp   bytes.Buffer // what the dialer sent
	toDown bytes.Buffer // what upstream sent
	up     net.Conn
}

func newProxy(t *testing.T, upstream string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, upstream: upstream}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			down, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", p.upstream)
			if err != nil {
				down.Close()
				continue
			}
			t.Cleanup(func() { down.Close(); up.Close() })
			p.mu.Lock()
			p.up = up
			p.mu.Unlock()
			go p.pipe(down, up, true)
			go p.pipe(up, down, false)
		}
	}()
	return p
}

func (p *proxy) pipe(from, to net.Conn, toUp bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := from.Read(buf)
		if n > 0 {
			p.mu.Lock()
			hold := toUp && p.hold
			if toUp {
				p.toUp.Write(buf[:n])
			} else {
				p.toDown.Write(buf[:n])
			}
			p.mu.Unlock()
			if !hold {
				if _, err := to.Write(buf[:n]); err != nil {
					return
				}
			}
		}
		if err != nil {
			to.Close()
			return
		}
	}
}

// recorded returns what went each way so far.
func (p *proxy) recorded() (toUp, toDown []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return bytes.Clone(p.toUp.Bytes()), bytes.Clone(p.toDown.Bytes())
}

func (p *proxy) setHold(h bool) { p.mu.Lock(); p.hold = h; p.mu.Unlock() }

func (p *proxy) inject(b []byte) error {
	p.mu.Lock()
	up := p.up
	p.mu.Unlock()
	_, err := up.Write(b)
	return err
}

// A stream whose dialer means to reach one node but is relayed to another
// member is refused by that member, whether the relay passes the
// handshake on as it is or puts the member's own address in it: the
// proofs bind the address dialled.
func TestMuxRelayToAnotherMemberIsRefused(t *testing.T) {
	log := testutil.Logger(t, slog.LevelDebug)
	s := secret.Generate()
	a := newTestMux(t, log.With("mux", "a"), 2*time.Second, withSecret(s))
	b := newTestMux(t, log.With("mux", "b"), 2*time.Second, withSecret(s))
	la, lb := mustLayer(t, a, 0), mustLayer(t, b, 0)
	relay := newProxy(t, b.Addr().String()) // at an address a member dials

	// the member itself, dialled at its address, takes streams (first:
	// expectNothingAccepted leaves an Accept waiting)
	c, err := la.Dial(raft.ServerAddress(b.Addr().String()), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	roundTrip(t, c, acceptWithin(t, lb, 5*time.Second), "direct")

	if c, err := la.Dial(raft.ServerAddress(relay.ln.Addr().String()), 5*time.Second); err == nil {
		c.Close()
		t.Fatal("a stream relayed to another member was opened")
	} else {
		t.Log(err)
	}
	expectNothingAccepted(t, lb, 300*time.Millisecond)

	// the relay rewrites the address dialled to the member's own: the
	// dialer's proof, over the address it dialled, no longer checks out
	rewrite := &rewriteRelay{from: relay.ln.Addr().String(), to: b.Addr().String()}
	rw := rewrite.start(t, b.Addr().String())
	if c, err := la.Dial(raft.ServerAddress(rw), 5*time.Second); err == nil {
		c.Close()
		t.Fatal("a stream relayed with the target rewritten was opened")
	} else {
		t.Log(err)
	}
	expectNothingAccepted(t, lb, 300*time.Millisecond)

}

// rewriteRelay forwards one connection to upstream, replacing the first
// occurrence of the address dialled in the dialer's opening with to's
// (lengths equal on the loopback: both 127.0.0.1 with 5-digit ports, or
// the test is skipped).
type rewriteRelay struct{ from, to string }

func (r *rewriteRelay) start(t *testing.T, upstream string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	self := ln.Addr().String()
	if len(self) != len(r.to) {
		t.Skipf("addresses %s and %s differ in length", self, r.to)
	}
	go func() {
		down, err := ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", upstream)
		if err != nil {
			down.Close()
			return
		}
		t.Cleanup(func() { down.Close(); up.Close() })
		go func() { io.Copy(down, up); down.Close() }()
		buf := make([]byte, 32<<10)
		var seen []byte
		rewritten := false
		for {
			n, err := down.Read(buf)
			if n > 0 {
				chunk := buf[:n]
				if !rewritten {
					seen = append(seen, chunk...)
					if i := bytes.Index(seen, []byte(self)); i >= 0 {
						copy(seen[i:], r.to)
						rewritten = true
						chunk = seen
					} else if len(seen) < 64 {
						continue // not all of the opening yet
					}
				}
				if _, err := up.Write(chunk); err != nil {
					return
				}
			}
			if err != nil {
				up.Close()
				return
			}
		}
	}()
	return self
}

// What the dialer's opening of the header takes on the wire before the
// first frame: header, nonce, both addresses, no node id, proof.
func openingLen(group uint64, target, from string) int {
	return len(appendHeader(nil, muxVersionAuth, group)) + nonceSize + 1 + len(target) + 1 + len(from) + 1 + proofSize
}

// frames splits b into its whole frames (a partial one at the end left out).
func frames(b []byte) [][]byte {
	var out [][]byte
	for len(b) >= frameHeader {
		n := frameHeader + int(binary.BigEndian.Uint32(b)) + frameTag
		if len(b) < n {
			break
		}
		out = append(out, b[:n])
		b = b[n:]
	}
	return out
}

// After the handshake, a frame replayed, sent back to its sender,
// reordered or with a bit flipped is refused: the reading end reads
// nothing of it, fails and closes the stream. The same bytes injected
// unchanged read as sent, so the injection itself is sound. (The bytes are
// taken as the relay saw them, whatever their format: the writes after
// the header, the answer after the acceptor's nonce and proof.)
func TestSealedStreamRefusesForgedFrames(t *testing.T) {
	s := secret.Generate()
	log := testutil.Logger(t, slog.LevelDebug)
	// split cuts the two held writes apart: at the frame boundary, or
	// for bytes that are no frames after the first write's
	split := func(held []byte) ([]byte, []byte) {
		if f := frames(held); len(f) == 2 {
			return f[0], f[1]
		}
		return held[:len("second")], held[len("second"):]
	}
	for _, c := range []struct {
		name   string
		forged func(sent, answer, held []byte) []byte
		ok     bool
	}{
		{"unchanged", func(sent, answer, held []byte) []byte { return held }, true},
		{"replayed", func(sent, answer, held []byte) []byte { return sent }, false},
		{"reflected", func(sent, answer, held []byte) []byte { return answer }, false},
		{"reordered", func(sent, answer, held []byte) []byte {
			first, second := split(held)
			return append(bytes.Clone(second), first...)
		}, false},
		{"tampered", func(sent, answer, held []byte) []byte {
			first, second := split(held)
			f := bytes.Clone(first)
			f[len(f)-1] ^= 0x01 // the first write's last byte
			return append(f, second...)
		}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			// b advertises the proxy's address: dialled there, it is
			// the node meant
			var relay *proxy
			b := newTestMux(t, log.With("mux", "b"), 2*time.Second, withSecret(s), func(m *Mux) {
				relay = newProxy(t, m.ln.Addr().String())
				m.advertise = relay.ln.Addr()
			})
			a := newTestMux(t, log.With("mux", "a"), 2*time.Second, withSecret(s))
			la, lb := mustLayer(t, a, 5), mustLayer(t, b, 5)
			dc, err := la.Dial(raft.ServerAddress(b.Addr().String()), 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			ac := acceptWithin(t, lb, 5*time.Second)
			roundTrip(t, dc, ac, "first")

			relay.setHold(true)
			toUp, toDown := relay.recorded()
			sent := toUp[openingLen(5, b.Addr().String(), a.Addr().String()):]
			answer := toDown[nonceSize+proofSize:]
			dc.Write([]byte("second"))
			dc.Write([]byte("third"))
			var held []byte
			testutil.Eventually(t, 5*time.Second, func() error {
				all, _ := relay.recorded()
				held = all[len(toUp):]
				if f := frames(held); len(f) < 2 && len(held) != len("secondthird") {
					return fmt.Errorf("%d bytes held", len(held))
				}
				return nil
			})
			if err := relay.inject(c.forged(sent, answer, held)); err != nil {
				t.Fatal(err)
			}
			ac.SetReadDeadline(time.Now().Add(5 * time.Second))
			if c.ok {
				buf := make([]byte, len("secondthird"))
				if _, err := io.ReadFull(ac, buf); err != nil || string(buf) != "secondthird" {
					t.Fatalf("the bytes injected unchanged read %q, %v", buf, err)
				}
				return
			}
			buf := make([]byte, 64)
			n, err := ac.Read(buf)
			if n > 0 {
				t.Fatalf("%s bytes were read: %q", c.name, buf[:n])
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatalf("%s bytes: the stream neither read nor refused them", c.name)
			}
			t.Log(err)
			expectClosed(t, dc, 5*time.Second) // the acceptor closed the stream
		})
	}
}

// With TLS, a process holding a certificate of the cluster's CA (but not
// the secret) that sits between two members, ending the dialer's TLS and
// opening its own to the acceptor, passes the handshake on byte for byte:
// the proofs cover what each TLS session exports, which differs on its
// two sessions, so both sides refuse.
func TestMuxTLSHandshakeBoundToTheSession(t *testing.T) {
	certs := testTLS(t, "cluster", "n1", "n2", "mitm")
	s := secret.Generate()
	log := testutil.Logger(t, slog.LevelDebug)
	a := newTestMux(t, log.With("mux", "a"), 2*time.Second, func(m *Mux) { m.UseTLS(certs[0].PeerServer(), certs[0].Client()); m.UseSecret(s) })
	var mitm net.Listener
	b := newTestMux(t, log.With("mux", "b"), 2*time.Second, func(m *Mux) {
		m.UseTLS(certs[1].PeerServer(), certs[1].Client())
		m.UseSecret(s)
		// b is reached at the man in the middle's address
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		mitm = tls.NewListener(ln, certs[2].PeerServer())
		m.advertise = ln.Addr()
	})
	t.Cleanup(func() { mitm.Close() })
	la, lb := mustLayer(t, a, 2), mustLayer(t, b, 2)
	bAt := b.ln.Addr().String()
	go func() {
		down, err := mitm.Accept()
		if err != nil {
			return
		}
		defer down.Close()
		up, err := tls.Dial("tcp", bAt, clientFor(certs[2].Client(), bAt))
		if err != nil {
			return
		}
		defer up.Close()
		go io.Copy(down, up)
		io.Copy(up, down)
	}()
	c, err := la.Dial(raft.ServerAddress(b.Addr().String()), 5*time.Second)
	if err == nil {
		c.Close()
		t.Fatal("a stream through a man in the middle with a certificate of the CA was opened")
	}
	t.Log(err)
	expectNothingAccepted(t, lb, 300*time.Millisecond)
}

// A dialer that knows the id of the node at an address states it, and a
// node of another id there refuses the stream: a member that now holds a
// removed member's address is not taken for it.
func TestMuxRefusesAStreamMeantForAnotherNodeID(t *testing.T) {
	s := secret.Generate()
	log := testutil.Logger(t, slog.LevelDebug)
	ids := map[string]string{}
	a := newTestMux(t, log.With("mux", "a"), 2*time.Second, withSecret(s), func(m *Mux) {
		m.SetNodeID("n1")
		m.ResolveID(func(addr string) string { return ids[addr] })
	})
	n3 := newTestMux(t, log.With("mux", "n3"), 2*time.Second, withSecret(s), func(m *Mux) { m.SetNodeID("n3") })
	la, l3 := mustLayer(t, a, 1), mustLayer(t, n3, 1)
	at := n3.Addr().String()

	ids[at] = "n3" // (set before each dial: the resolver runs in Dial)
	c, err := la.Dial(raft.ServerAddress(at), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	roundTrip(t, c, acceptWithin(t, l3, 5*time.Second), "the node meant")

	ids[at] = "n2"
	if c, err := la.Dial(raft.ServerAddress(at), 5*time.Second); err == nil {
		c.Close()
		t.Fatal("a node opened a stream meant for another node id")
	} else {
		t.Log(err)
	}
	expectNothingAccepted(t, l3, 300*time.Millisecond)
}
