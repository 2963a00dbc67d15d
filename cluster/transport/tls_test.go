package transport

import (
	"crypto/tls"
	"os"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/cepcluster/cep/internal/testcerts"
	"github.com/cepcluster/cep/internal/testutil"
)

// newTLSMux serves a Mux with cfg's certificate on a loopback port until
// the test ends.
func newTLSMux(tb testing.TB, cfg *TLS) *Mux {
	tb.Helper()
	return newTestMux(tb, testutil.Logger(tb, -4), 2*time.Second, func(m *Mux) { m.UseTLS(cfg.PeerServer(), cfg.Client()) })
}

// testTLS makes a CA in a temporary directory and returns a node
// certificate of it for each name.
func testTLS(tb testing.TB, ca string, names ...string) []*TLS {
	tb.Helper()
	a, err := testcerts.NewAuthority(tb.TempDir(), ca)
	if err != nil {
		tb.Fatal(err)
	}
	var out []*TLS
	for _, n := range names {
		f, err := a.Issue(n)
		if err != nil {
			tb.Fatal(err)
		}
		c, err := LoadTLS(f.Cert, f.Key, f.CA, nil)
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, c)
	}
	return out
}

// Peers with certificates of the same CA open streams to each other's
// groups over mutual TLS; a peer of another CA, a client without a
// certificate and plain TCP are refused.
func TestMuxTLS(t *testing.T) {
	certs := testTLS(t, "cluster", "n1", "n2")
	other := testTLS(t, "other", "intruder")[0]
	m1, m2 := newTLSMux(t, certs[0]), newTLSMux(t, certs[1])
	l1, l2 := mustLayer(t, m1, 7), mustLayer(t, m2, 7)

	c, err := l1.Dial(raft.ServerAddress(l2.Addr().String()), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	s := acceptWithin(t, l2, 5*time.Second)
	roundTrip(t, c, s, "over tls")
	if _, ok := c.(*layerConn).Conn.(*idleConn).Conn.(*tls.Conn); !ok {
		t.Fatalf("dialled stream is a %T, not TLS", c.(*layerConn).Conn)
	}

	// a peer whose certificate another CA signed: each side refuses the other
	mo := newTLSMux(t, other)
	lo := mustLayer(t, mo, 7)
	if _, err := lo.Dial(raft.ServerAddress(l2.Addr().String()), 5*time.Second); err == nil {
		t.Fatal("a peer of another CA opened a stream")
	}
	if _, err := l1.Dial(raft.ServerAddress(lo.Addr().String()), 5*time.Second); err == nil {
		t.Fatal("dialled a peer of another CA")
	}

	// TLS without a client certificate: the handshake fails on the server
	noCert := &tls.Config{RootCAs: certs[0].CAs, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
	tc, err := tls.Dial("tcp", m2.Addr().String(), noCert)
	if err == nil {
		t.Cleanup(func() { tc.Close() })
		tc.Write(appendHeader(nil, muxVersion, 7))
		expectClosed(t, tc, 5*time.Second)
	}

	// plain TCP with a valid header
	expectClosed(t, rawDial(t, m2, appendHeader(nil, muxVersion, 7)), 5*time.Second)

	select {
	case r := <-acceptAsync(l2):
		t.Fatalf("group 7 accepted a refused connection: %v %v", r.conn, r.err)
	case <-time.After(200 * time.Millisecond):
	}
}

// A renewed certificate (new files in place of the old) is what new
// connections get, once the reload interval has passed; files that do not
// load leave the previous certificate in use.
func TestTLSReloadsRenewedCertificate(t *testing.T) {
	dir := t.TempDir()
	a, err := testcerts.NewAuthority(dir, "cep")
	if err != nil {
		t.Fatal(err)
	}
	first, err := a.Issue("n1")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadTLS(first.Cert, first.Key, first.CA, testutil.Logger(t, -4))
	if err != nil {
		t.Fatal(err)
	}
	cfg.reloadEvery = 0
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg.PeerServer())
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.(*tls.Conn).Handshake()
			c.Close()
		}
	}()
	// serial of the certificate the server presents, dialling with cfg's
	// own client side (which presents cfg's certificate too)
	served := func() string {
		t.Helper()
		c, err := tls.Dial("tcp", ln.Addr().String(), clientFor(cfg.Client(), ln.Addr().String()))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
	was := served()
	if want := cfg.Cert.Leaf.SerialNumber.String(); was != want {
		t.Fatalf("served serial %s, want %s", was, want)
	}

	renewed, err := a.Issue("n1-renewed")
	if err != nil {
		t.Fatal(err)
	}
	// the renewal arrives in place of the old files, with a later time
	later := time.Now().Add(time.Minute)
	for _, p := range [][2]string{{renewed.Cert, first.Cert}, {renewed.Key, first.Key}} {
		b, _ := os.ReadFile(p[0])
		if err := os.WriteFile(p[1], b, 0o600); err != nil {
			t.Fatal(err)
		}
		os.Chtimes(p[1], later, later)
	}
	now := served()
	if now == was {
		t.Fatal("the renewed certificate was not picked up")
	}

	// a broken renewal keeps the last good certificate
	os.WriteFile(first.Key, []byte("not a key"), 0o600)
	later = later.Add(time.Minute)
	os.Chtimes(first.Key, later, later)
	if got := served(); got != now {
		t.Fatalf("after a broken renewal the server presents %s, want the last good %s", got, now)
	}
}
