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
