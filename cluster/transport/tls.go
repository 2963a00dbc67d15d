package transport

import (
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
// A TLS made by LoadTLS follows its certificate and key files: when they
// change (a renewal), new connections use the new pair, checked at most
// every few seconds; a pair that does not load is logged and the previous
// one kept. The CAs are read once.
type TLS struct {
	Cert tls.Certificate // used as it is when the TLS has no files
	CAs  *x509.CertPool

	certFile, keyFile string
	reloadEvery       time.Duration
	logger            *slog.Logger

	mu      sync.Mutex
	cur     *tls.Certificate
	modTime time.Time // the files' latest modification when cur was read
	checked time.Time
}

// certReloadEvery bounds how often a TLS looks at its files.
const certReloadEvery = 5 * time.Second

// LoadTLS reads a PEM certificate (with its chain) and its key, and a PEM
// bundle of CA certificates. A nil logger discards.
func LoadTLS(certFile, keyFile, caFile string, logger *slog.Logger) (*TLS, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("tls: certificate %s, key %s: %w", certFile, keyFile, err)
	}
	pool, err := LoadCAs(caFile)
	if err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	t := &TLS{Cert: cert, CAs: pool, certFile: certFile, keyFile: keyFile, reloadEvery: certReloadEvery, logger: logger, cur: &cert}
	t.modTime, _ = t.filesModTime()
	t.checked = time.Now()
	return t, nil
}

func (t *TLS) filesModTime() (time.Time, error) {
	var latest time.Time
	for _, f := range []string{t.certFile, t.keyFile} {
		st, err := os.Stat(f)
		if err != nil {
			return time.Time{}, err
		}
		if st.ModTime().After(latest) {
			latest = st.ModTime()
		}
	}
	return latest, nil
}

// certificate is the pair to present now (reloaded when the files changed).
func (t *TLS) certificate() (*tls.Certificate, error) {
	if t.certFile == "" {
		return &t.Cert, nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if time.Since(t.checked) < t.reloadEvery {
		return t.cur, nil
	}
	t.checked = time.Now()
	mod, err := t.filesModTime()
	if err != nil || mod.Equal(t.modTime) {
		return t.cur, nil
	}
	cert, err := tls.LoadX509KeyPair(t.certFile, t.keyFile)
	if err != nil {
		t.logger.Warn("tls: the changed certificate does not load; keeping the previous one", "cert", t.certFile, "key", t.keyFile, "err", err)
		return t.cur, nil
	}
	t.cur, t.modTime = &cert, mod
	t.logger.Info("tls: certificate reloaded", "cert", t.certFile)
	return t.cur, nil
}

func (t *TLS) getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) { return t.certificate() }

func (t *TLS) getClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	return t.certificate()
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

// server is a listener's side, verifying client certificates as auth says.
func (t *TLS) server(auth tls.ClientAuthType) *tls.Config {
	return &tls.Config{GetCertificate: t.getCertificate, ClientCAs: t.CAs, ClientAuth: auth, MinVersion: tls.VersionTLS12}
}

// PeerServer is the Raft mux's side of mutual TLS; exported for the node,
// which hands it to Mux.UseTLS.
func (t *TLS) PeerServer() *tls.Config { return t.server(tls.RequireAndVerifyClientCert) }

// APIServer serves the API: HTTP/2 (gRPC needs it) and HTTP/1.1. The node
// serves its API itself, so it takes the config from here.
func (t *TLS) APIServer() *tls.Config {
	c := t.server(tls.VerifyClientCertIfGiven)
	c.NextProtos = []string{"h2", "http/1.1"}
	return c
}

// Client is the node's side when it dials a peer's mux or API; exported
// for Mux.UseTLS and for the node's HTTP client of its peers' APIs.
func (t *TLS) Client() *tls.Config {
	return &tls.Config{
		GetClientCertificate: t.getClientCertificate,
		RootCAs:              t.CAs,
		MinVersion:           tls.VersionTLS12,
	}
}

// clientFor is Client() with the server name set to address's host, for a
// connection dialled without crypto/tls's own dialer.
func clientFor(cfg *tls.Config, address string) *tls.Config {
	c := cfg.Clone()
	if c.ServerName == "" {
		host, _, err := net.SplitHostPort(address)
		if err != nil {
			host = address
		}
		c.ServerName = host
	}
	return c
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
