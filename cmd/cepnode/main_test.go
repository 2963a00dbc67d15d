package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/cepcluster/cep/cluster"
	"github.com/cepcluster/cep/cluster/secret"
)

// Flags that cannot work together are refused with one line, before
// anything starts (no data directory, no listener, no NATS).
func TestRunRefusesBadFlags(t *testing.T) {
	dir := t.TempDir()
	good, bad := dir+"/secret", dir+"/bad-secret"
	os.WriteFile(good, []byte(secret.Generate().String()+"\n"), 0o600)
	os.WriteFile(bad, []byte("not a secret"), 0o600)
	two := "n1=127.0.0.1:1=127.0.0.1:2=127.0.0.1:3,n2=127.0.0.1:4=127.0.0.1:5=127.0.0.1:6"
	badTokens := dir + "/tokens"
	if err := os.WriteFile(badTokens, []byte("# users\nadmin tok-a-secret\nroot tok-b-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	goodTokens := dir + "/good-tokens"
	if err := os.WriteFile(goodTokens, []byte("reader tok-r-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--tls-cert", "n1.pem"}, "--tls-cert, --tls-key and --tls-ca go together"},
		{[]string{"--tls-key", "k.pem", "--tls-ca", "ca.pem"}, "--tls-cert, --tls-key and --tls-ca go together"},
		{[]string{"--tls-cert", dir + "/no.pem", "--tls-key", dir + "/no-key.pem", "--tls-ca", dir + "/ca.pem"}, "tls: certificate " + dir + "/no.pem"},
		{[]string{"--outbox-limit", "0"}, "--outbox-limit must be at least 1"},
		{[]string{"--deploy-wait", "0s"}, "--deploy-wait must be positive"},
		{[]string{"--output-max-age", "10m"}, "--output-max-age 10m0s: at least 30m0s"},
		{[]string{"--output-max-bytes", "lots"}, `--output-max-bytes: "lots" is not a positive size in bytes`},
		{[]string{"--output-max-bytes", "0"}, `--output-max-bytes: "0" is not a positive size in bytes`},
		{[]string{"--output-max-bytes", "9000000T"}, `--output-max-bytes: "9000000T" is not a positive size in bytes`},
		{[]string{"--deploy-wait", "soon"}, "invalid value \"soon\" for flag -deploy-wait"},
		{[]string{"--nats-ca", "ca.pem"}, "--nats-ca is for an external NATS server (--nats)"},
		{[]string{"--id", "n9", "--peers", "n1=127.0.0.1:1=127.0.0.1:2"}, "--peers does not list this node (n9); to join a running cluster give --join"},
		{[]string{"--id", "n9", "--peers", "n1=127.0.0.1:1=127.0.0.1:2=127.0.0.1:3"}, "--join needs --nats"},
		{[]string{"--id", "n1", "--peers", "n1=127.0.0.1:1=127.0.0.1:2=127.0.0.1:3=x"}, "--peers: \"n1=127.0.0.1:1=127.0.0.1:2=127.0.0.1:3=x\" is not id=raftaddr=apiaddr[=gossipaddr]"},
		{[]string{"--join", "127.0.0.1:7946"}, "--join needs --nats"},
		{[]string{"--join", "seed", "--nats", "nats://127.0.0.1:1"}, `--join: "seed" is not host:port`},
		{[]string{"--dead-after", "1s"}, "--dead-after must be at least 10s"},
		{[]string{"--nats-handover-after", "10ms"}, "--nats-handover-after must be at least 1s"},
		{[]string{"--cors-origin", "example.com"}, "--cors-origin"},
		{[]string{"--replicas", "0"}, "--replicas must be at least 1"},
		{[]string{"--gossip-key", "c2hvcnQ="}, "--gossip-key: not the base64 of a 16, 24 or 32-byte key"},
		{[]string{"--raft-addr", "nohost"}, `--raft-addr "nohost"`},
		{[]string{"--log-level", "loud"}, "--log-level"},
		{[]string{"extra"}, `unexpected argument "extra"`},
		{[]string{"--id", "n1", "--peers", two, "--nats", "nats://127.0.0.1:1"}, "--cluster-secret-file (or CEPNODE_CLUSTER_SECRET) is needed by a node of a cluster of several"},
		{[]string{"--id", "n4", "--join", "127.0.0.1:7946", "--nats", "nats://127.0.0.1:1"}, "--cluster-secret-file (or CEPNODE_CLUSTER_SECRET) is needed"},
		{[]string{"--cluster-secret-file", dir + "/none"}, "--cluster-secret-file: open " + dir + "/none"},
		{[]string{"--cluster-secret-file", bad}, "--cluster-secret-file: " + bad + ": cluster secret: want 64 hex digits"},
		{[]string{"--cluster-secret-file", good, "--insecure"}, "--insecure with a cluster secret"},
		{[]string{"--raft-addr", "0.0.0.0:0", "--insecure=false", "--cluster-secret-file", good, "--api-addr", "127.0.0.1:0", "--nats", "nats://127.0.0.1:1", "--nats-connect-wait", "0"}, "connect to NATS"}, // exposed, with a secret: starts
		{[]string{"--token-file", badTokens}, "--token-file: " + badTokens + `:3: unknown role "root"`},
		{[]string{"--token-file", dir + "/none"}, "--token-file: token file: open " + dir + "/none"},
		{[]string{"--metrics-auth"}, "--metrics-auth needs --token or --token-file"},
		{[]string{"--token", "tok-r-secret", "--token-file", goodTokens}, "--token is in --token-file as well"},
		{[]string{"--token", "two words"}, "--token: a token with white space"},
		{[]string{"--raft-snapshot-threshold", "0"}, "--raft-snapshot-threshold must be at least 1 (got 0)"},
		{[]string{"--raft-snapshot-interval", "50ms"}, "--raft-snapshot-interval must be at least 100ms (got 50ms)"},
		{[]string{"--raft-snapshot-interval", "often"}, `invalid value "often" for flag -raft-snapshot-interval`},
	} {
		var stderr bytes.Buffer
		err := Run(context.Background(), append([]string{"--data", dir + "/data"}, c.args...), &stderr)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: %v, want one line with %q", c.args, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "tok-") || strings.Contains(stderr.String(), "tok-") {
			t.Errorf("%v: a token shown: %v %s", c.args, err, stderr.String())
		}
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"1": 1, "512": 512, "2K": 2048, "512M": 512 << 20, "10G": 10 << 30, "10GB": 10 << 30, "10gib": 10 << 30, "3T": 3 << 40, " 7 ": 7, "1.5G": 3 << 29, "1P": 1 << 50} {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "G", "-1", "0K", "9223372036854775807K"} {
		if got, err := parseSize(in); err == nil {
			t.Errorf("parseSize(%q) = %d, want an error", in, got)
		}
	}
}

// A node that cannot start (its gossip port is taken) says why in one
// line and leaves nothing running.
// The secret's value comes from the environment, never the command line;
// a file and the variable together are refused.
func TestClusterSecretFromTheEnvironment(t *testing.T) {
	s := secret.Generate()
	t.Setenv("CEPNODE_CLUSTER_SECRET", s.String())
	got, err := clusterSecret("")
	if err != nil || got != s {
		t.Fatalf("from the environment: %v", err)
	}
	if _, err := clusterSecret(t.TempDir() + "/f"); err == nil || !strings.Contains(err.Error(), "both given") {
		t.Fatalf("file and variable: %v", err)
	}
	t.Setenv("CEPNODE_CLUSTER_SECRET", "short")
	if _, err := clusterSecret(""); err == nil || strings.Contains(err.Error(), "short") {
		t.Fatalf("a bad value: %v (must not echo it)", err)
	}
}

// cepnode secret prints a new secret each time, in the form the flag reads.
func TestPrintSecret(t *testing.T) {
	var a, b bytes.Buffer
	if err := printSecret(nil, &a); err != nil {
		t.Fatal(err)
	}
	printSecret(nil, &b)
	if err := Run(context.Background(), []string{"secret", "x"}, &b); err == nil || !strings.Contains(err.Error(), "takes no argument") {
		t.Fatalf("cepnode secret x: %v", err)
	}
	sa, err := secret.Parse(a.String())
	if err != nil || sa.IsZero() || a.String() == b.String() {
		t.Fatalf("%q, %q: %v", a.String(), b.String(), err)
	}
}

func TestRunReportsAStartFailure(t *testing.T) {
	taken, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	var stderr bytes.Buffer
	err = Run(context.Background(), []string{"--data", t.TempDir(), "--raft-addr", "127.0.0.1:0", "--api-addr", "127.0.0.1:0",
		"--nats-port", "-1", "--gossip-addr", taken.LocalAddr().String()}, &stderr)
	if err == nil || !strings.Contains(err.Error(), "gossip") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("start with the gossip port taken: %v", err)
	}
}

// Every CEPNODE_ variable the Kubernetes manifest sets is one cepnode
// reads (its --help names it).
func TestManifestVariablesAreRead(t *testing.T) {
	b, err := os.ReadFile("../../deploy/k8s/base/cepnode.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	if err := Run(context.Background(), []string{"--help"}, &stderr); err == nil {
		t.Fatal("--help did not return flag.ErrHelp")
	}
	help := stderr.String()
	vars := regexp.MustCompile(`(?m)^\s+- name: (CEPNODE_[A-Z_]+)`).FindAllStringSubmatch(string(b), -1)
	if len(vars) < 5 {
		t.Fatalf("found %d CEPNODE_ variables in the manifest", len(vars))
	}
	for _, v := range vars {
		if !strings.Contains(help, "env "+v[1]+")") {
			t.Errorf("the manifest sets %s, which cepnode does not read", v[1])
		}
	}
}

// cepnode nats-config writes the configuration of the secret it is
// given, readable by the owner only, and refuses to run without one.
func TestNATSConfig(t *testing.T) {
	dir := t.TempDir()
	sec := secret.Generate()
	file := dir + "/secret"
	if err := os.WriteFile(file, []byte(sec.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	out := dir + "/nats.conf"
	var stderr bytes.Buffer
	if err := natsConfig([]string{"--cluster-secret-file", file, "--out", out}, io.Discard, &stderr); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	fi, _ := os.Stat(out)
	// the same configuration but for the salts of the passwords' bcrypt
	// hashes (cluster's TestNATSServerConfig checks the hashes)
	hashes := regexp.MustCompile(`"\$2[aby]?\$\d\d\$[./A-Za-z0-9]{53}"`)
	want := cluster.NATSServerConfig(sec, "/data", 8222, cluster.DefaultPublisherLimits)
	if err != nil || fi.Mode().Perm() != 0o600 || hashes.ReplaceAllString(string(b), "HASH") != hashes.ReplaceAllString(want, "HASH") || len(hashes.FindAll(b, -1)) != 3 {
		t.Fatalf("%s (%v, %v):\n%s", out, err, fi.Mode(), b)
	}
	t.Setenv("CEPNODE_CLUSTER_SECRET_FILE", "")
	if err := natsConfig(nil, io.Discard, &stderr); err == nil || !strings.Contains(err.Error(), "needs the cluster secret") {
		t.Fatalf("without a secret: %v", err)
	}
}
