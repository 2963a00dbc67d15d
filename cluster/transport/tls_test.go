package transport

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
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

// files copies a certificate, its key and a CA bundle of the given CA
// files into dir as cert.pem, key.pem and ca.pem, replacing what is there.
func placeFiles(t *testing.T, dir string, f testcerts.Files, cas ...string) testcerts.Files {
	t.Helper()
	var bundle []byte
	for _, ca := range cas {
		b, err := os.ReadFile(ca)
		if err != nil {
			t.Fatal(err)
		}
		bundle = append(bundle, b...)
	}
	out := testcerts.Files{Cert: dir + "/cert.pem", Key: dir + "/key.pem", CA: dir + "/ca.pem"}
	for _, p := range [][2]string{{f.Cert, out.Cert}, {f.Key, out.Key}} {
		b, err := os.ReadFile(p[0])
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p[1], b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(out.CA, bundle, 0o600); err != nil {
		t.Fatal(err)
	}
	return out
}

// A CA rotated in the files (the new CA's certificate for the node, and
// the old CA removed from the bundle) is what the running node trusts,
// both ways, without a restart: a peer with a certificate of the new CA
// opens streams to it and is dialled by it; a peer with one of the
// removed CA is refused as a client and as a server, even though it
// trusts both CAs itself. Its HTTPS client of the peers' APIs follows
// too.
func TestTLSReloadsRotatedCA(t *testing.T) {
	oldCA, err := testcerts.NewAuthority(t.TempDir(), "old")
	if err != nil {
		t.Fatal(err)
	}
	newCA, err := testcerts.NewAuthority(t.TempDir(), "new")
	if err != nil {
		t.Fatal(err)
	}
	issue := func(a *testcerts.Authority, name string) testcerts.Files {
		f, err := a.Issue(name)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	load := func(f testcerts.Files) *TLS {
		c, err := LoadTLS(f.Cert, f.Key, f.CA, testutil.Logger(t, -4))
		if err != nil {
			t.Fatal(err)
		}
		c.reloadEvery = 0
		return c
	}
	dir := t.TempDir()
	nodeFiles := placeFiles(t, dir, issue(oldCA, "node"), oldCA.CA)
	node := load(nodeFiles)
	// peers that trust both CAs: what refuses them is the node alone
	oldPeer := load(placeFiles(t, t.TempDir(), issue(oldCA, "old-peer"), oldCA.CA, newCA.CA))
	newPeer := load(placeFiles(t, t.TempDir(), issue(newCA, "new-peer"), oldCA.CA, newCA.CA))

	mn, mo, mw := newTLSMux(t, node), newTLSMux(t, oldPeer), newTLSMux(t, newPeer)
	ln, lo, lw := mustLayer(t, mn, 7), mustLayer(t, mo, 7), mustLayer(t, mw, 7)
	dials := func(from, to *Layer) error {
		t.Helper()
		c, err := from.Dial(raft.ServerAddress(to.Addr().String()), 5*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		s := acceptWithin(t, to, 5*time.Second)
		defer s.Close()
		roundTrip(t, c, s, "hello")
		return nil
	}
	// refused: the dial fails, or the stream is closed unaccepted (with
	// TLS 1.3 the client's handshake ends before the server checks it)
	refused := func(from, to *Layer) bool {
		t.Helper()
		c, err := from.Dial(raft.ServerAddress(to.Addr().String()), 5*time.Second)
		if err != nil {
			return true
		}
		defer c.Close()
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		var buf [1]byte
		_, err = c.Read(buf[:])
		var ne net.Error
		return err != nil && !(errors.As(err, &ne) && ne.Timeout())
	}
	if err := dials(lo, ln); err != nil {
		t.Fatalf("before the rotation a peer of the old CA is refused: %v", err)
	}
	if !refused(lw, ln) {
		t.Fatal("before the rotation a peer of the new CA opened a stream")
	}

	// the rotation: the node's certificate of the new CA, the new CA alone
	placeFiles(t, dir, issue(newCA, "node-rotated"), newCA.CA)
	if err := dials(lw, ln); err != nil {
		t.Errorf("a peer of the new CA is refused after the rotation: %v", err)
	}
	if err := dials(ln, lw); err != nil {
		t.Errorf("the node does not dial a peer of the new CA after the rotation: %v", err)
	}
	if !refused(lo, ln) {
		t.Error("a peer of the removed CA opened a stream after the rotation")
	}
	if !refused(ln, lo) {
		t.Error("the node dialled a peer of the removed CA after the rotation")
	}

	// the API: the node's HTTPS client and server follow the rotation too
	srv := func(cfg *TLS) string {
		l, err := tls.Listen("tcp", "127.0.0.1:0", cfg.APIServer())
		if err != nil {
			t.Fatal(err)
		}
		hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, r.Proto) })}
		go hs.Serve(l)
		t.Cleanup(func() { hs.Close() })
		return "https://" + l.Addr().String()
	}
	get := func(from *TLS, url string) (string, error) {
		tr := &http.Transport{DialTLSContext: from.DialTLSContext, ForceAttemptHTTP2: true}
		defer tr.CloseIdleConnections()
		res, err := (&http.Client{Transport: tr, Timeout: 5 * time.Second}).Get(url)
		if err != nil {
			return "", err
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		return string(b), err
	}
	if proto, err := get(node, srv(newPeer)); err != nil || proto != "HTTP/2.0" {
		t.Errorf("the node's API client to a peer of the new CA: %q, %v", proto, err)
	}
	if _, err := get(node, srv(oldPeer)); err == nil {
		t.Error("the node's API client accepted a peer of the removed CA")
	}
	if proto, err := get(newPeer, srv(node)); err != nil || proto != "HTTP/2.0" {
		t.Errorf("a peer of the new CA to the node's API: %q, %v", proto, err)
	}
}

// Client() verifies the server itself (crypto/tls's check is off, as it
// knows only fixed CAs), for the name clientFor sets: used without it,
// dialling an IP address (for which crypto/tls reports no server name),
// the handshake fails rather than accept any certificate of the CAs; a
// name the certificate does not hold is refused.
func TestTLSClientNeedsAServerName(t *testing.T) {
	certs := testTLS(t, "cluster", "n1", "n2")
	l, err := tls.Listen("tcp", "127.0.0.1:0", certs[0].PeerServer())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.(*tls.Conn).Handshake()
			c.Close()
		}
	}()
	if c, err := tls.Dial("tcp", l.Addr().String(), certs[1].Client()); err == nil {
		c.Close()
		t.Fatal("a handshake without a server name succeeded")
	}
	c, err := tls.Dial("tcp", l.Addr().String(), clientFor(certs[1].Client(), l.Addr().String()))
	if err != nil {
		t.Fatalf("with the address's host as the name: %v", err)
	}
	c.Close()
	// a name the certificate does not hold is refused
	wrong := certs[1].Client()
	wrong.ServerName = "elsewhere.example"
	if c, err := tls.Dial("tcp", l.Addr().String(), wrong); err == nil {
		c.Close()
		t.Fatal("a certificate was accepted for a name it does not hold")
	}
}
