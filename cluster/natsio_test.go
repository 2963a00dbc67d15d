package cluster

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cepcluster/cep/cluster/secret"
)

// A member dialing the embedded NATS of a cluster with a secret (its own,
// or another member's through --nats) is the node user, with every
// permission, and takes its replies where publishers cannot subscribe; a
// member of another cluster, or without a secret, is refused.
func TestSecureEmbeddedNATSNodeUser(t *testing.T) {
	sec := secret.Generate()
	ns, err := StartSecureEmbeddedNATS(t.TempDir(), "127.0.0.1", -1, nil, sec)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { ns.Shutdown(); ns.WaitForShutdown() }()
	url := ns.ClientURL()

	nc, err := dialNATS(url, "", "", "test", sec)
	if err != nil {
		t.Fatalf("the node user: %v", err)
	}
	defer nc.Close()
	if !strings.HasPrefix(nc.NewInbox(), nodeInboxPrefix+".") {
		t.Errorf("the node's inbox %s is not under %s", nc.NewInbox(), nodeInboxPrefix)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := EnsureOutputStream(ctx, js, OutputLimits{}); err != nil {
		t.Fatalf("the node user manages streams: %v", err)
	}
	if _, err := js.Publish(ctx, "cep.out.p", []byte(`{}`)); err != nil {
		t.Fatalf("the node user publishes output: %v", err)
	}

	for name, s := range map[string]secret.Secret{"another cluster's secret": secret.Generate(), "no secret": {}} {
		bad, err := nats.Connect(url, nats.MaxReconnects(0))
		if name != "no secret" {
			bad, err = dialNATS(url, "", "", "test", s)
		}
		if err == nil {
			bad.Close()
			t.Errorf("%s: connected", name)
		}
	}
}

// A taken client port fails the embedded server's start at once, with the
// bind error and the port, not after the readiness wait.
func TestEmbeddedNATSPortTaken(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	began := time.Now()
	s, err := StartEmbeddedNATS(t.TempDir(), "127.0.0.1", port, nil)
	if err == nil {
		s.Shutdown()
		t.Fatal("started on a taken port")
	}
	if took := time.Since(began); took > time.Second {
		t.Errorf("took %v", took)
	}
	var le *natsListenError
	if !errors.As(err, &le) || !strings.Contains(err.Error(), strconv.Itoa(port)) || !strings.Contains(err.Error(), "address already in use") {
		t.Errorf("error %q (%T): want the port and the bind error", err, err)
	}
}

// A starting node waits for an external NATS server that is not up yet,
// and only for that: an embedded one, or a server that answers and
// refuses (a wrong user), fails at once; a server still down when the
// wait ends fails naming the flag.
func TestDialNATSWaiting(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	refused := errors.New("nats: authorization violation")
	dialer := func(errs ...error) (func() (*nats.Conn, error), *int) {
		calls := 0
		return func() (*nats.Conn, error) {
			calls++
			if calls <= len(errs) {
				return nil, errs[calls-1]
			}
			return nil, nil
		}, &calls
	}
	ctx := context.Background()
	dial, calls := dialer(nats.ErrNoServers, nats.ErrNoServers)
	if _, err := dialNATSWaiting(ctx, dial, true, 10*time.Second, log); err != nil || *calls != 3 {
		t.Fatalf("a server up on the third try: %v after %d dials", err, *calls)
	}
	dial, calls = dialer(nats.ErrNoServers, refused)
	if _, err := dialNATSWaiting(ctx, dial, true, 10*time.Second, log); !errors.Is(err, refused) || *calls != 2 {
		t.Fatalf("a server that refuses the user: %v after %d dials, want the refusal at once", err, *calls)
	}
	dial, calls = dialer(nats.ErrNoServers)
	if _, err := dialNATSWaiting(ctx, dial, false, 10*time.Second, log); !errors.Is(err, nats.ErrNoServers) || *calls != 1 {
		t.Fatalf("the embedded server: %v after %d dials, want no wait", err, *calls)
	}
	dial, calls = dialer(nats.ErrNoServers, nats.ErrNoServers, nats.ErrNoServers, nats.ErrNoServers, nats.ErrNoServers)
	if _, err := dialNATSWaiting(ctx, dial, true, 300*time.Millisecond, log); !errors.Is(err, nats.ErrNoServers) || !strings.Contains(err.Error(), "--nats-connect-wait") || *calls > 3 {
		t.Fatalf("a server down for longer than the wait: %v after %d dials", err, *calls)
	}
}
