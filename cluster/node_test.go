package cluster

import (
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/cepcluster/cep/cluster/transport"
)

// spawn counts the goroutines it starts until they end (Close waits for
// them), and starts none once Close has begun.
func TestSpawnCountsUntilClosing(t *testing.T) {
	n := &Node{}
	waited := func() bool {
		done := make(chan struct{})
		go func() {
			n.wg.Wait()
			close(done)
		}()
		select {
		case <-done:
			return true
		case <-time.After(10 * time.Second):
			return false
		}
	}
	release := make(chan struct{})
	if !n.spawn(func() { <-release }) {
		t.Fatal("spawn refused before closing")
	}
	wait := make(chan bool)
	go func() { wait <- waited() }()
	select {
	case <-wait:
		t.Fatal("Wait returned while a spawned goroutine ran")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	if !<-wait {
		t.Fatal("Wait did not return once the spawned goroutine ended")
	}
	n.closing = true
	if n.spawn(func() { t.Error("a goroutine ran after Close began") }) {
		t.Fatal("spawn started a goroutine after Close began")
	}
	if !waited() {
		t.Fatal("Wait did not return")
	}
}

// A quarantined metadata replica whose first open shut a Raft group down
// gets a transport of its own (openMeta): raft's Shutdown closes the
// transport it was given, which frees the mux's group 0 for another.
func TestMetaTransportMadeAgainOnceClosed(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := transport.NewMux(ln, nil, slog.New(slog.DiscardHandler))
	served := make(chan error, 1)
	go func() { served <- m.Serve() }()
	defer func() {
		m.Close()
		<-served
	}()
	l, err := m.Layer(0)
	if err != nil {
		t.Fatal(err)
	}
	first := transport.NewTransport(l, nil)
	if first.IsShutdown() {
		t.Fatal("a new transport is shut down")
	}
	first.Close() // as raft.Shutdown does
	if !first.IsShutdown() {
		t.Fatal("a closed transport is not shut down")
	}
	l, err = m.Layer(0)
	if err != nil {
		t.Fatalf("group 0 after its transport closed: %v", err)
	}
	transport.NewTransport(l, nil).Close()
}
