package snapshot_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cepcluster/cep/snapshot"
)

// runJetStream starts an embedded NATS server with JetStream on a random
// loopback port and a temporary store directory, the way nats-server's
// test/test.go RunServer does (go s.Start(), then ReadyForConnections), and
// connects to it. Cleanup closes the connection and shuts the server down,
// waiting for it, so that goleak sees no leftover goroutine.
func runJetStream(t *testing.T) jetstream.JetStream {
	t.Helper()
	opts := &server.Options{
		Host:      "127.0.0.1",
		Port:      server.RANDOM_PORT,
		JetStream: true,
		StoreDir:  t.TempDir(),
		NoLog:     true,
		NoSigs:    true,
	}
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		t.Fatal("embedded NATS server did not start")
	}
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		s.Shutdown()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		nc.Close()
		s.Shutdown()
		s.WaitForShutdown()
	})
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

func TestObjectStore(t *testing.T) {
	js := runJetStream(t)
	s, err := snapshot.NewObjectStore(js, "savepoints")
	if err != nil {
		t.Fatal(err)
	}
	if s.Bucket() != "savepoints" {
		t.Errorf("Bucket() = %q", s.Bucket())
	}
	s.SpoolDir = t.TempDir()
	testStore(t, s)

	// A second store on the same bucket binds to it and sees the same files.
	s2, err := snapshot.OpenStore(context.Background(), "nats://savepoints", js)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := list(t, s2), list(t, s); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("second store lists %v, first %v", got, want)
	}
	// Spool files are removed when objects are closed.
	if ents, _ := readDirNames(s.SpoolDir); len(ents) != 0 {
		t.Errorf("spool files left: %v", ents)
	}
}
