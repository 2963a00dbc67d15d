// Package testutil holds what the tests of several packages share: waiting
// for a condition, an embedded JetStream server, a logger into the test's
// output. Only tests import it (internal/lint checks that).
package testutil

import (
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Eventually calls f every 10ms until it returns nil, failing the test
// with f's last error once total has passed.
func Eventually(t testing.TB, total time.Duration, f func() error) {
	t.Helper()
	EventuallyEvery(t, total, 10*time.Millisecond, f)
}

// EventuallyEvery is Eventually calling f every every.
func EventuallyEvery(t testing.TB, total, every time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(total)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met after %v: %v", total, err)
		}
		time.Sleep(every)
	}
}

// NATSOptions are the embedded server's options that tests vary.
type NATSOptions struct {
	StoreDir   string // default: a temporary directory of the test
	MaxPayload int32  // default: the server's
}

// StartNATS runs a real NATS server with JetStream in process on a free
// loopback port, the way nats-server's own tests do (Start, then
// ReadyForConnections). Cleanup shuts it down and waits for it, so that
// goleak sees no goroutine of it left.
func StartNATS(t testing.TB, o NATSOptions) *server.Server {
	t.Helper()
	if o.StoreDir == "" {
		o.StoreDir = t.TempDir()
	}
	s, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true, StoreDir: o.StoreDir,
		NoLog: true, NoSigs: true, MaxPayload: o.MaxPayload,
	})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		t.Fatal("embedded NATS server did not start")
	}
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	return s
}

// JetStream connects to s; cleanup closes the connection (before the
// server's own cleanup, which was registered first).
func JetStream(t testing.TB, s *server.Server) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

// EnvLogger logs to stderr at info when CEP_TEST_LOG is set, else
// nowhere: the integration tests' nodes log a lot.
func EnvLogger() *slog.Logger {
	if os.Getenv("CEP_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	return slog.New(slog.DiscardHandler)
}

// Logger returns a logger writing to t.Log at level. Lines logged after
// the test and its cleanups have finished are dropped (t.Log would panic).
func Logger(t testing.TB, level slog.Level) *slog.Logger {
	w := &testWriter{t: t}
	t.Cleanup(func() { w.mu.Lock(); w.done = true; w.mu.Unlock() }) // registered first, so it runs last
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
}

type testWriter struct {
	mu   sync.Mutex
	t    testing.TB
	done bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimSuffix(string(p), "\n"))
	}
	return len(p), nil
}
