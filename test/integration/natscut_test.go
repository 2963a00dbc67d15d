package integration

import (
	"fmt"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/internal/testutil"
)

// cutLink is a TCP relay to a NATS server that the test can cut as a
// partition does: connections stay open, and nothing goes through either
// way (what is sent meanwhile waits) until the link heals. A cut node's
// NATS client notices nothing by itself for minutes (its pings are two
// minutes apart), which is what makes the cut hard to see.
type cutLink struct {
	t      *testing.T
	ln     net.Listener
	target string
	mu     sync.Mutex
	cond   *sync.Cond
	cut    bool
	closed bool
	conns  []net.Conn
	wg     sync.WaitGroup
}

// newCutLink relays a loopback port to the NATS server at natsURL until the
// test ends.
func newCutLink(t *testing.T, natsURL string) *cutLink {
	t.Helper()
	u, err := url.Parse(natsURL)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &cutLink{t: t, ln: ln, target: u.Host}
	l.cond = sync.NewCond(&l.mu)
	l.wg.Add(1)
	go l.accept()
	t.Cleanup(l.close)
	return l
}

func (l *cutLink) url() string { return "nats://" + l.ln.Addr().String() }

// setCut cuts the link (true) or heals it (false).
func (l *cutLink) setCut(cut bool) {
	l.mu.Lock()
	l.cut = cut
	l.mu.Unlock()
	l.cond.Broadcast()
}

func (l *cutLink) accept() {
	defer l.wg.Done()
	for {
		in, err := l.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", l.target)
		if err != nil {
			in.Close()
			continue
		}
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			in.Close()
			out.Close()
			return
		}
		l.conns = append(l.conns, in, out)
		l.mu.Unlock()
		l.wg.Add(2)
		go l.relay(out, in)
		go l.relay(in, out)
	}
}

// relay copies from src to dst, holding what it read while the link is
// cut.
func (l *cutLink) relay(dst, src net.Conn) {
	defer l.wg.Done()
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		k, err := src.Read(buf)
		l.mu.Lock()
		for l.cut && !l.closed {
			l.cond.Wait()
		}
		closed := l.closed
		l.mu.Unlock()
		if closed {
			return
		}
		if k > 0 {
			if _, werr := dst.Write(buf[:k]); werr != nil {
				return
			}
		}
		if err != nil {
			if err != io.EOF {
				return
			}
			return
		}
	}
}

func (l *cutLink) close() {
	l.mu.Lock()
	l.closed = true
	conns := l.conns
	l.mu.Unlock()
	l.cond.Broadcast()
	l.ln.Close()
	for _, c := range conns {
		c.Close()
	}
	l.wg.Wait()
}

// A shard leader whose node cannot reach NATS (its link cut, connections
// left open) reads and publishes nothing while its Raft group is healthy.
// It must hand its shards to a replica that reaches NATS after
// NATSHandOverAfter, so events published during the cut are matched and
// published while it lasts; status and metrics must say which node cannot
// reach NATS, leadership must not go back to it while it cannot, and once
// the link heals the output must still be the offline engine's, no record
// twice.
func TestLeaderCutOffFromNATSHandsOver(t *testing.T) {
	tc := newPeers(t, 3, 4*time.Minute)
	link := newCutLink(t, tc.nats.ClientURL())
	tc.cfgs[0].NATSURL = link.url()
	const handOverAfter = 2 * time.Second
	for i := range tc.cfgs {
		tc.cfgs[i].NATSHandOverAfter = handOverAfter
	}
	tc.startAll()
	c := tc.deployOnBank(1, lflSpec)

	ledBy := func(i int) []uint64 {
		var ids []uint64
		for _, sh := range tc.nodes[i].Shards() {
			if sh.Raft().State() == raft.Leader {
				ids = append(ids, sh.ID())
			}
		}
		return ids
	}
	var led []uint64
	testutil.EventuallyEvery(t, 30*time.Second, poll, func() error {
		if led = ledBy(0); len(led) == 0 {
			return fmt.Errorf("n1 leads no shard yet")
		}
		return nil
	})
	if v := tc.metric(0, "cep_nats_reachable"); v != 1 {
		t.Fatalf("cep_nats_reachable on n1 is %v before the cut", v)
	}

	link.setCut(true)
	cut := time.Now()
	testutil.EventuallyEvery(t, 10*time.Second, poll, func() error {
		if v := tc.metric(0, "cep_nats_reachable"); v != 0 {
			return fmt.Errorf("cep_nats_reachable on n1 is %v during the cut", v)
		}
		return nil
	})
	testutil.EventuallyEvery(t, handOverAfter+15*time.Second, poll, func() error {
		if now := ledBy(0); len(now) > 0 {
			return fmt.Errorf("n1 still leads shards %v, %v after its NATS link was cut", now, time.Since(cut).Round(time.Millisecond))
		}
		return nil
	})
	took := time.Since(cut)
	t.Logf("n1 gave up shards %v %v after the cut (hand-over after %v)", led, took.Round(time.Millisecond), handOverAfter)
	if took < handOverAfter {
		t.Fatalf("n1 gave up its shards %v after the cut, before the hand-over time %v: not because of NATS", took, handOverAfter)
	}

	// the status names the replica that cannot reach NATS
	res, err := c.cluster.ListShards(tc.ctx, req(&cepv1.ListShardsRequest{ClusterWide: true}))
	if err != nil {
		t.Fatal(err)
	}
	flagged := 0
	for _, s := range res.Msg.Shards {
		for _, r := range s.Replicas {
			if r.NatsUnreachable != (r.NodeId == "n1") {
				t.Errorf("shard %d replica %s: nats_unreachable %v during n1's cut", s.Id, r.NodeId, r.NatsUnreachable)
			}
			if r.NatsUnreachable {
				flagged++
			}
		}
		if s.NatsUnreachableMs != 0 {
			t.Errorf("shard %d: its leader %s reports NATS unreachable for %d ms, yet it is not n1", s.Id, s.LeaderNodeId, s.NatsUnreachableMs)
		}
	}
	if flagged == 0 {
		t.Fatal("no replica of n1 is flagged as unable to reach NATS")
	}

	// events of every key, published during the cut, are all matched
	lines := bankEvents(41, 400)
	tc.publish("bank", func(e map[string]any) string { return fmt.Sprint(e["account"]) }, lines)
	tc.sameAsOffline("lfl", lflSpec, lines)
	if now := ledBy(0); len(now) > 0 {
		t.Fatalf("n1 leads shards %v again while it cannot reach NATS", now)
	}

	// healed: n1 reaches NATS again, leads its preferred shard again, and
	// nothing is published twice
	link.setCut(false)
	testutil.EventuallyEvery(t, 30*time.Second, poll, func() error {
		if v := tc.metric(0, "cep_nats_reachable"); v != 1 {
			return fmt.Errorf("cep_nats_reachable on n1 is %v after the link healed", v)
		}
		if now := ledBy(0); len(now) == 0 {
			return fmt.Errorf("n1 leads no shard after the link healed")
		}
		for _, id := range ledBy(0) {
			if v := tc.metric(0, "cep_outbox_records", "shard", fmt.Sprint(id)); v != 0 {
				return fmt.Errorf("n1's shard %d holds %v unpublished records", id, v)
			}
		}
		return nil
	})
	want := len(offline(t, lflSpec, lines))
	if got := tc.outputCount("cep.out.lfl"); got != want {
		t.Fatalf("%d records on NATS after the link healed, the offline engine makes %d", got, want)
	}
}
