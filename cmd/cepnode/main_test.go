package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// Flags that cannot work together are refused with one line, before
// anything starts (no data directory, no listener, no NATS).
func TestRunRefusesBadFlags(t *testing.T) {
	dir := t.TempDir()
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
		{[]string{"--id", "n9", "--peers", "n1=127.0.0.1:1=127.0.0.1:2"}, "--peers does not list this node (n9)"},
		{[]string{"--log-level", "loud"}, "--log-level"},
		{[]string{"extra"}, `unexpected argument "extra"`},
	} {
		var stderr bytes.Buffer
		err := Run(context.Background(), append([]string{"--data", dir + "/data"}, c.args...), &stderr)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: %v, want one line with %q", c.args, err, c.want)
		}
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"1": 1, "512": 512, "2K": 2048, "512M": 512 << 20, "10G": 10 << 30, "10GB": 10 << 30, "10gib": 10 << 30, "3T": 3 << 40, " 7 ": 7} {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "G", "-1", "1.5G", "1P", "0K", "9223372036854775807K"} {
		if got, err := parseSize(in); err == nil {
			t.Errorf("parseSize(%q) = %d, want an error", in, got)
		}
	}
}
