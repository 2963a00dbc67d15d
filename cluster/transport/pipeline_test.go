package transport

import (
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/cepcluster/cep/cluster/secret"
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

// Stream throughput over the loopback: one stream, the dialer writing
// chunks of size bytes (raft's transport flushes a 256 KiB buffer) and the
// acceptor reading them, without a secret, with one (sealed frames), and
// with TLS and a secret.
func BenchmarkStreamThroughput(b *testing.B) {
	s := secret.Generate()
	certs := testTLS(b, "cluster", "n1", "n2")
	for _, mode := range []struct {
		name  string
		setup func(i int) func(*Mux)
	}{
		{"plain", func(int) func(*Mux) { return func(*Mux) {} }},
		{"sealed", func(int) func(*Mux) { return withSecret(s) }},
		{"tls", func(i int) func(*Mux) {
			return func(m *Mux) { m.UseTLS(certs[i].PeerServer(), certs[i].Client()); m.UseSecret(s) }
		}},
	} {
		for _, size := range []int{4 << 10, 256 << 10} {
			b.Run(fmt.Sprintf("%s/%dKiB", mode.name, size>>10), func(b *testing.B) {
				a := newTestMux(b, nil, 5*time.Second, mode.setup(0))
				m := newTestMux(b, nil, 5*time.Second, mode.setup(1))
				la, lm := mustLayer(b, a, 1), mustLayer(b, m, 1)
				c, err := la.Dial(raft.ServerAddress(m.Addr().String()), 5*time.Second)
				if err != nil {
					b.Fatal(err)
				}
				defer c.Close()
				srv := acceptWithin(b, lm, 5*time.Second)
				defer srv.Close()
				total := int64(b.N) * int64(size)
				done := make(chan error, 1)
				go func() {
					_, err := io.CopyN(io.Discard, srv, total)
					done <- err
				}()
				chunk := make([]byte, size)
				b.SetBytes(int64(size))
				b.ResetTimer()
				for range b.N {
					if _, err := c.Write(chunk); err != nil {
						b.Fatal(err)
					}
				}
				if err := <-done; err != nil {
					b.Fatal(err)
				}
			})
		}
	}
}
