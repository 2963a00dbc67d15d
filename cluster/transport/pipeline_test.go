package transport

import (
	"errors"
	"net"
	"testing"

	"github.com/hashicorp/raft"
)

// Raft asks every transport for a pipeline first; this one must say it has
// none, so that raft replicates without one (see Transport).
func TestTransportReplicatesWithoutPipeline(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := NewMux(ln, nil, nil)
	go m.Serve()
	defer m.Close()
	l, err := m.Layer(1)
	if err != nil {
		t.Fatal(err)
	}
	tr := NewTransport(l, nil)
	defer tr.Close()
	var _ raft.WithClose = tr
	var _ raft.WithPreVote = tr
	if p, err := tr.AppendEntriesPipeline("n2", raft.ServerAddress(ln.Addr().String())); p != nil || !errors.Is(err, raft.ErrPipelineReplicationNotSupported) {
		t.Fatalf("pipeline %v, %v", p, err)
	}
}
