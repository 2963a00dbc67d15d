package main

import (
	"crypto/tls"
	"crypto/x509"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cepcluster/cep/api"
	"github.com/cepcluster/cep/internal/testcerts"
)

// A server with a certificate of a private CA that requires client
// certificates: cepctl needs --tls-ca to trust it and --tls-cert/--tls-key to be let
// in, from flags, the environment or the config file; a server given as
// HOST:PORT is then https.
func TestTLS(t *testing.T) {
	dir := t.TempDir()
	ca, err := testcerts.NewAuthority(dir, "cep")
	if err != nil {
		t.Fatal(err)
	}
	srvFiles, err := ca.Issue("server")
	if err != nil {
		t.Fatal(err)
	}
	cli, err := ca.Issue("cepctl")
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.LoadX509KeyPair(srvFiles.Cert, srvFiles.Key)
	if err != nil {
		t.Fatal(err)
	}
	pem, _ := os.ReadFile(ca.CA)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	srv := httptest.NewUnstartedServer(api.NewHandler(api.Backends{Cluster: statusCluster()}))
	srv.EnableHTTP2 = true
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	hostPort := strings.TrimPrefix(srv.URL, "https://")

	for _, c := range []struct {
		name    string
		env     map[string]string
		args    []string
		wantErr string // "" : succeeds
	}{
		{"untrusted", nil, []string{"--server", srv.URL}, "certificate"},
		{"plain HTTP", nil, []string{"--server", "http://" + hostPort}, "if the cluster serves HTTPS: --server https://HOST:PORT"},
		{"no client certificate", nil, []string{"--server", srv.URL, "--tls-ca", ca.CA}, "certificate"},
		{"cert without key", nil, []string{"--server", srv.URL, "--tls-ca", ca.CA, "--tls-cert", cli.Cert}, "--tls-cert and --tls-key go together"},
		{"key without cert", nil, []string{"--server", srv.URL, "--tls-ca", ca.CA, "--tls-key", cli.Key}, "--tls-cert and --tls-key go together"},
		{"flags", nil, []string{"--server", hostPort, "--tls-ca", ca.CA, "--tls-cert", cli.Cert, "--tls-key", cli.Key}, ""},
		{"environment", map[string]string{"CEPCTL_SERVER": hostPort, "CEPCTL_TLS_CA": ca.CA, "CEPCTL_TLS_CERT": cli.Cert, "CEPCTL_TLS_KEY": cli.Key}, nil, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := cepctlEnv(t, c.env, "", append(c.args, "status")...)
			switch {
			case c.wantErr == "" && r.code != 0:
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			case c.wantErr != "" && (r.code == 0 || !strings.Contains(r.stderr, c.wantErr) || strings.Count(strings.TrimSpace(r.stderr), "\n") > 0):
				t.Fatalf("exit %d, stderr %q: want one line with %q", r.code, r.stderr, c.wantErr)
			case c.wantErr == "" && !strings.Contains(r.stdout, "meta leader n1"):
				t.Fatalf("status output:\n%s", r.stdout)
			}
		})
	}

	// the config file
	cfg := filepath.Join(dir, "cepctl.yaml")
	os.WriteFile(cfg, []byte("server: "+hostPort+"\ntls-ca: "+ca.CA+"\ntls-cert: "+cli.Cert+"\ntls-key: "+cli.Key+"\n"), 0o600)
	if r := cepctlEnv(t, nil, "", "--config", cfg, "status"); r.code != 0 {
		t.Fatalf("with the config file: exit %d: %s", r.code, r.stderr)
	}
}
