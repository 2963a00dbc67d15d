package cluster

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
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
type TLS struct {
	Cert tls.Certificate
	CAs  *x509.CertPool
}

// LoadTLS reads a PEM certificate (with its chain) and its key, and a PEM
// bundle of CA certificates.
func LoadTLS(certFile, keyFile, caFile string) (*TLS, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("tls: certificate %s, key %s: %w", certFile, keyFile, err)
	}
	pool, err := LoadCAs(caFile)
	if err != nil {
		return nil, err
	}
	return &TLS{Cert: cert, CAs: pool}, nil
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

// peerServer is the Raft mux's side of mutual TLS.
func (t *TLS) peerServer() *tls.Config {
	return &tls.Config{
		Certificates: []tls.Certificate{t.Cert},
		ClientCAs:    t.CAs,
		ClientAuth:   tls.RequireAndVerifyClientCert,
		MinVersion:   tls.VersionTLS12,
	}
}

// apiServer serves the API: HTTP/2 (gRPC needs it) and HTTP/1.1.
func (t *TLS) apiServer() *tls.Config {
	return &tls.Config{
		Certificates: []tls.Certificate{t.Cert},
		ClientCAs:    t.CAs,
		ClientAuth:   tls.VerifyClientCertIfGiven,
		MinVersion:   tls.VersionTLS12,
		NextProtos:   []string{"h2", "http/1.1"},
	}
}

// client is the node's side when it dials a peer's mux or API.
func (t *TLS) client() *tls.Config {
	return &tls.Config{
		Certificates: []tls.Certificate{t.Cert},
		RootCAs:      t.CAs,
		MinVersion:   tls.VersionTLS12,
	}
}

// clientFor is client() with the server name set to address's host, for a
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
