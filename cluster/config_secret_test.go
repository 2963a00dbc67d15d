package cluster

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cepcluster/cep/cluster/secret"
	"github.com/cepcluster/cep/cluster/transport"
)

func logTo(b *bytes.Buffer) *slog.Logger { return slog.New(slog.NewTextHandler(b, nil)) }

// The cluster secret at start: a given one is kept, a kept one used, a
// single node makes one, a node of several without one is refused.
func TestResolveSecret(t *testing.T) {
	three := []Peer{{ID: "n1"}, {ID: "n2"}, {ID: "n3"}}
	cfg := func(dir string, peers []Peer, join []string) Config {
		c := Config{NodeID: "n1", DataDir: dir, Peers: peers, Join: join, NATSURL: "nats://127.0.0.1:1"}
		c.setDefaults()
		return c
	}

	t.Run("given, kept", func(t *testing.T) {
		dir, s := t.TempDir(), secret.Generate()
		c := cfg(dir, three, nil)
		c.Secret = s
		var log bytes.Buffer
		if err := c.resolveSecret(logTo(&log)); err != nil {
			t.Fatal(err)
		}
		got, ok, err := secret.Load(dir)
		if err != nil || !ok || got != s {
			t.Fatalf("kept %v %v %v", got == s, ok, err)
		}
		if fi, _ := os.Stat(filepath.Join(dir, secret.File)); fi.Mode().Perm() != 0o600 {
			t.Errorf("mode %v", fi.Mode())
		}
		// another one given later is refused, naming the file
		c2 := cfg(dir, three, nil)
		c2.Secret = secret.Generate()
		err = c2.resolveSecret(logTo(&log))
		if !errors.Is(err, secret.ErrOtherCluster) || !strings.Contains(err.Error(), filepath.Join(dir, secret.File)) {
			t.Fatalf("another secret: %v", err)
		}
		// none given: the kept one
		c3 := cfg(dir, three, nil)
		if err := c3.resolveSecret(logTo(&log)); err != nil || c3.Secret != s {
			t.Fatalf("kept one not used: %v", err)
		}
		if strings.Contains(log.String(), s.String()) {
			t.Fatal("the secret is in the log")
		}
	})
	t.Run("single node makes one", func(t *testing.T) {
		dir := t.TempDir()
		c := cfg(dir, nil, nil)
		var log bytes.Buffer
		if err := c.resolveSecret(logTo(&log)); err != nil {
			t.Fatal(err)
		}
		got, ok, _ := secret.Load(dir)
		if c.Secret.IsZero() || !ok || got != c.Secret {
			t.Fatal("no secret made and kept")
		}
		if l := log.String(); !strings.Contains(l, filepath.Join(dir, secret.File)) || !strings.Contains(l, "--cluster-secret-file") || strings.Contains(l, got.String()) {
			t.Fatalf("log: %s", l)
		}
		// once: the next start uses it and says nothing
		log.Reset()
		c2 := cfg(dir, nil, nil)
		if err := c2.resolveSecret(logTo(&log)); err != nil || c2.Secret != got || log.Len() != 0 {
			t.Fatalf("second start: %v, same %v, log %q", err, c2.Secret == got, log.String())
		}
	})
	for name, c := range map[string]Config{
		"peers": cfg(t.TempDir(), three, nil),
		"join":  cfg(t.TempDir(), nil, []string{"127.0.0.1:7946"}),
	} {
		t.Run(name+" without a secret", func(t *testing.T) {
			var ce *ConfigError
			if err := c.resolveSecret(logTo(&bytes.Buffer{})); !errors.As(err, &ce) || ce.Field != "Secret" {
				t.Fatalf("got %v, want a ConfigError for Secret", err)
			}
			if _, ok, _ := secret.Load(c.DataDir); ok {
				t.Fatal("a secret was made")
			}
			c.Insecure = true
			var log bytes.Buffer
			if err := c.resolveSecret(logTo(&log)); err != nil || !c.Secret.IsZero() {
				t.Fatalf("insecure: %v", err)
			}
			if !strings.Contains(log.String(), "INSECURE") {
				t.Fatalf("no warning: %s", log.String())
			}
		})
	}
	t.Run("insecure with a secret", func(t *testing.T) {
		c := cfg(t.TempDir(), three, nil)
		c.Secret, c.Insecure = secret.Generate(), true
		var ce *ConfigError
		if err := c.Validate(); !errors.As(err, &ce) || ce.Field != "Insecure" {
			t.Fatalf("got %v", err)
		}
	})
}

// A listener other machines reach needs TLS or a secret, or Insecure; a
// secret without TLS warns that the API is in clear.
func TestCheckExposure(t *testing.T) {
	tlsCfg := &transport.TLS{}
	for _, tc := range []struct {
		name            string
		raft, api, goss string
		secret, tls     bool
		insecure        bool
		refused         bool
		warn            string
	}{
		{name: "loopback", raft: "127.0.0.1:0", api: "localhost:0", goss: "[::1]:0"},
		{name: "raft exposed", raft: "0.0.0.0:7000", api: "127.0.0.1:0", goss: "127.0.0.1:0", refused: true},
		{name: "api exposed", raft: "127.0.0.1:0", api: ":7070", goss: "127.0.0.1:0", refused: true},
		{name: "gossip exposed", raft: "127.0.0.1:0", api: "127.0.0.1:0", goss: "10.1.2.3:7946", refused: true},
		{name: "host name", raft: "node1.example:7000", api: "127.0.0.1:0", goss: "127.0.0.1:0", refused: true},
		{name: "insecure", raft: "0.0.0.0:7000", api: "0.0.0.0:7070", goss: "0.0.0.0:7946", insecure: true, warn: "INSECURE"},
		{name: "tls", raft: "0.0.0.0:7000", api: "0.0.0.0:7070", goss: "0.0.0.0:7946", tls: true},
		{name: "secret", raft: "0.0.0.0:7000", api: "127.0.0.1:7070", goss: "0.0.0.0:7946", secret: true},
		{name: "secret, api in clear", raft: "0.0.0.0:7000", api: "0.0.0.0:7070", goss: "0.0.0.0:7946", secret: true, warn: "travel in clear"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Config{RaftAddr: tc.raft, APIAddr: tc.api, GossipAddr: tc.goss, Insecure: tc.insecure}
			if tc.secret {
				c.Secret = secret.Generate()
			}
			if tc.tls {
				c.TLS = tlsCfg
			}
			var log bytes.Buffer
			err := c.checkExposure(logTo(&log))
			if (err != nil) != tc.refused {
				t.Fatalf("refused: %v, want %v", err, tc.refused)
			}
			if tc.warn == "" && log.Len() != 0 || !strings.Contains(log.String(), tc.warn) {
				t.Fatalf("log %q, want %q", log.String(), tc.warn)
			}
		})
	}
}
