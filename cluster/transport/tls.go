package transport

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"
)

// TLS is a node's certificate and the certificate authorities it trusts.
// With it a node secures both of its ports:
//
//   - the Raft mux with mutual TLS: a peer must present a certificate
//     signed by one of the CAs, and the node verifies the peer's server
//     certificate the same way when it dials (against the host of the
//     peer's Raft address, which must be among the certificate's names);
//   - the API with HTTPS: a client certificate is verified against the CAs
//     when a client presents one (the bearer token, if set, is what
//     authorises API calls); nodes calling each other's API present theirs.
//
// A certificate therefore serves as both server and client certificate
// (extended key usages serverAuth and clientAuth, or none).
//
// A TLS made by LoadTLS follows its files — certificate, key and CAs,
// re-read together: when they change (a renewal, a CA rotated in or out),
// new connections use what they hold, checked at most every few seconds;
// files that do not load are logged and the previous ones kept.
// Connections already open stay as they are.
//
// The files are polled, not watched (fsnotify): a Kubernetes Secret volume
// replaces them by swapping a symlink to a new directory, which a watch on
// the files misses, and reading three small files every few seconds costs
// nothing. Their contents are compared, not their times, which a copy may
// keep.
type TLS struct {
	Cert tls.Certificate // used as it is when the TLS has no files
	CAs  *x509.CertPool  // as loaded first; what is trusted now is cur's

	certFile, keyFile, caFile string
	reloadEvery               time.Duration
	logger                    *slog.Logger

	mu      sync.Mutex
	cur     material
	seen    [3][]byte // the files' contents when last read, good or not
	checked time.Time
}

// material is what a TLS presents and trusts, replaced as a whole.
type material struct {
	cert *tls.Certificate
	cas  *x509.CertPool
}

// certReloadEvery bounds how often a TLS looks at its files.
const certReloadEvery = 5 * time.Second

// LoadTLS reads a PEM certificate (with its chain) and its key, and a PEM
// bundle of CA certificates. A nil logger discards.
func LoadTLS(certFile, keyFile, caFile string, logger *slog.Logger) (*TLS, error) {
	files, err := readFiles(certFile, keyFile, caFile)
	if err != nil {
		return nil, err
	}
	m, err := parseMaterial(files, certFile, keyFile, caFile)
	if err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &TLS{Cert: *m.cert, CAs: m.cas, certFile: certFile, keyFile: keyFile, caFile: caFile, reloadEvery: certReloadEvery, logger: logger,
		cur: m, seen: files, checked: time.Now()}, nil
}

func readFiles(certFile, keyFile, caFile string) ([3][]byte, error) {
	var out [3][]byte
	for i, f := range []string{certFile, keyFile, caFile} {
		b, err := os.ReadFile(f)
		switch {
		case err != nil && i < 2:
			return out, fmt.Errorf("tls: certificate %s, key %s: %w", certFile, keyFile, err)
		case err != nil:
			return out, fmt.Errorf("tls: CA file: %w", err)
		}
		out[i] = b
	}
	return out, nil
}

func parseMaterial(files [3][]byte, certFile, keyFile, caFile string) (material, error) {
	cert, err := tls.X509KeyPair(files[0], files[1])
	if err != nil {
		return material{}, fmt.Errorf("tls: certificate %s, key %s: %w", certFile, keyFile, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(files[2]) {
		return material{}, fmt.Errorf("tls: CA file %s holds no PEM certificate", caFile)
	}
	return material{cert: &cert, cas: pool}, nil
}

// current is the certificate to present and the CAs to trust now,
// reloaded when the files changed.
func (t *TLS) current() material {
	if t.certFile == "" {
		return material{cert: &t.Cert, cas: t.CAs}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if time.Since(t.checked) < t.reloadEvery {
		return t.cur
	}
	t.checked = time.Now()
	files, err := readFiles(t.certFile, t.keyFile, t.caFile)
	if err != nil || sameFiles(files, t.seen) {
		return t.cur // missing for a moment (a swap), or unchanged
	}
	t.seen = files
	m, err := parseMaterial(files, t.certFile, t.keyFile, t.caFile)
	if err != nil {
		t.logger.Warn("tls: the changed files do not load; keeping the previous certificate and CAs", "cert", t.certFile, "key", t.keyFile, "ca", t.caFile, "err", err)
		return t.cur
	}
	t.cur = m
	t.logger.Info("tls: certificate and CAs reloaded", "cert", t.certFile, "ca", t.caFile)
	return t.cur
}

func sameFiles(a, b [3][]byte) bool {
	return bytes.Equal(a[0], b[0]) && bytes.Equal(a[1], b[1]) && bytes.Equal(a[2], b[2])
}

func (t *TLS) getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return t.current().cert, nil
}

func (t *TLS) getClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	return t.current().cert, nil
}

// verifyServer checks a server's chain against the CAs trusted now, for
// its name, as crypto/tls would against a fixed RootCAs.
func (t *TLS) verifyServer(cs tls.ConnectionState) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("tls: the server presented no certificate")
	}
	if cs.ServerName == "" {
		return errors.New("tls: no server name to verify the server's certificate for")
	}
	opts := x509.VerifyOptions{Roots: t.current().cas, DNSName: cs.ServerName, Intermediates: x509.NewCertPool()}
	for _, c := range cs.PeerCertificates[1:] {
		opts.Intermediates.AddCert(c)
	}
	_, err := cs.PeerCertificates[0].Verify(opts)
	return err
}

// LoadCAs reads a PEM bundle of CA certificates.
func LoadCAs(caFile string) (*x509.CertPool, error) {
	b, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("tls: CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("tls: CA file %s holds no PEM certificate", caFile)
	}
	return pool, nil
}

// server is a listener's side, verifying client certificates as auth says
// against the CAs trusted at each handshake.
func (t *TLS) server(auth tls.ClientAuthType, protos ...string) *tls.Config {
	base := &tls.Config{GetCertificate: t.getCertificate, ClientAuth: auth, MinVersion: tls.VersionTLS12, NextProtos: protos}
	c := base.Clone()
	c.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		cfg := base.Clone()
		cfg.ClientCAs = t.current().cas
		return cfg, nil
	}
	return c
}

// PeerServer is the Raft mux's side of mutual TLS; exported for the node,
// which hands it to Mux.UseTLS.
func (t *TLS) PeerServer() *tls.Config { return t.server(tls.RequireAndVerifyClientCert) }

// APIServer serves the API: HTTP/2 (gRPC needs it) and HTTP/1.1. The node
// serves its API itself, so it takes the config from here.
func (t *TLS) APIServer() *tls.Config {
	return t.server(tls.VerifyClientCertIfGiven, "h2", "http/1.1")
}

// Client is the node's side when it dials a peer's mux or API; exported
// for Mux.UseTLS and for the node's HTTP client of its peers' APIs. The
// server's certificate is verified by verifyServer, against the CAs of
// the moment (crypto/tls's own check knows only a fixed RootCAs, so it is
// replaced, not skipped: a handshake without verifyServer's success
// fails).
func (t *TLS) Client() *tls.Config {
	return &tls.Config{
		GetClientCertificate: t.getClientCertificate,
		InsecureSkipVerify:   true, // verified by VerifyConnection
		VerifyConnection:     t.verifyServer,
		MinVersion:           tls.VersionTLS12,
	}
}

// clientFor is Client() with the server name set to address's host, for a
// connection dialled without crypto/tls's own dialer. The name is also
// what verifyServer checks the certificate for: crypto/tls reports no
// server name for an IP address (it sends none).
func clientFor(cfg *tls.Config, address string) *tls.Config {
	c := cfg.Clone()
	if c.ServerName == "" {
		host, _, err := net.SplitHostPort(address)
		if err != nil {
			host = address
		}
		c.ServerName = host
	}
	if verify := c.VerifyConnection; verify != nil {
		name := c.ServerName
		c.VerifyConnection = func(cs tls.ConnectionState) error {
			if cs.ServerName == "" {
				cs.ServerName = name
			}
			return verify(cs)
		}
	}
	return c
}

// DialTLSContext dials address with Client() for it, offering HTTP/2: the
// node's HTTP client of its peers' APIs dials with it (an
// http.Transport's TLSClientConfig would verify servers against one fixed
// set of CAs).
func (t *TLS) DialTLSContext(ctx context.Context, network, address string) (net.Conn, error) {
	c := t.Client()
	c.NextProtos = []string{"h2", "http/1.1"}
	d := tls.Dialer{Config: clientFor(c, address)}
	return d.DialContext(ctx, network, address)
}

// handshakeFailed reports whether err ended a TLS handshake: a peer with
// no certificate or an untrusted one, or one speaking plain TCP.
func handshakeFailed(conn net.Conn, err error) bool {
	tc, ok := conn.(*tls.Conn)
	if !ok || err == nil {
		return false
	}
	var alert tls.AlertError
	var verify *tls.CertificateVerificationError
	var header tls.RecordHeaderError
	return !tc.ConnectionState().HandshakeComplete || errors.As(err, &alert) || errors.As(err, &verify) || errors.As(err, &header)
}
