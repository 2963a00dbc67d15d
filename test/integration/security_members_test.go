package integration

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/cluster"
	"github.com/cepcluster/cep/cluster/gossip"
	"github.com/cepcluster/cep/cluster/meta"
	"github.com/cepcluster/cep/cluster/secret"
	"github.com/cepcluster/cep/internal/testutil"
)

// Attacks by someone who reaches a node's gossip and Raft ports on the
// loopback but does not hold the cluster secret.

// gossipNode is a cluster node started as one that joins through the
// gossip (as in membership_test.go), with the test cluster's secret.
func (tc *testCluster) gossipNode(id string, join []string) *cluster.Node {
	tc.t.Helper()
	return tc.nodes[tc.add(cluster.Config{NodeID: id, DataDir: filepath.Join(tc.base, id), RaftAddr: "127.0.0.1:0", APIAddr: "127.0.0.1:0",
		NATSURL: tc.natsURL(), Shards: 1, Join: join, Testing: &cluster.Testing{FastGossip: true}, Raft: testRaft(), Logger: testutil.EnvLogger()})]
}

// rogueMember joins seed's gossip as a plain memberlist member without any
// key, announcing api as its API (and a closed Raft port); it leaves when
// the test ends.
func rogueMember(t *testing.T, name, api, seed string) {
	t.Helper()
	md, _ := json.Marshal(gossip.Meta{Fresh: true, Started: time.Now().UnixMilli(), Raft: "127.0.0.1:1", API: api, Proto: 1 << 20})
	conf := memberlist.DefaultLocalConfig()
	conf.Name, conf.BindAddr, conf.BindPort, conf.AdvertisePort = name, "127.0.0.1", 0, 0
	conf.LogOutput = io.Discard
	conf.Delegate = rogueMeta(md)
	ml, err := memberlist.Create(conf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ml.Shutdown() })
	// refused with the secret; taken (and so the attack possible) without
	_, err = ml.Join([]string{seed})
	t.Logf("rogue member joins %s: %v", seed, err)
}

// rogueMeta is the rogue's memberlist.Delegate: its metadata, nothing else.
type rogueMeta []byte

func (m rogueMeta) NodeMeta(int) []byte           { return m }
func (rogueMeta) NotifyMsg([]byte)                {}
func (rogueMeta) GetBroadcasts(int, int) [][]byte { return nil }
func (rogueMeta) LocalState(bool) []byte          { return nil }
func (rogueMeta) MergeRemoteState([]byte, bool)   {}

// (a) A memberlist member without the gossip key, whose fake API answers
// every request with 200, is never registered and never called; a node
// with the secret joins as ever.
func TestRogueGossipMemberIsNotLearnt(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 2 nodes")
	}
	tc := newCluster(t, 2*time.Minute)
	n1 := tc.gossipNode("n1", nil)
	if err := n1.WaitReady(tc.ctx); err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int64
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(fake.Close)
	rogueMember(t, "rogue", fake.Listener.Addr().String(), n1.GossipAddr())

	// bounded wait: the fast gossip's push-pull runs every second, and the
	// metadata leader looks at each change of the gossip at once
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if n1.Meta().Node("rogue") != nil {
			t.Fatal("the rogue member is registered")
		}
		if c := calls.Load(); c != 0 {
			t.Fatalf("the rogue member's API was called %d times", c)
		}
		time.Sleep(poll)
	}

	// a real node with the secret joins
	tc.gossipNode("n2", []string{n1.GossipAddr()})
	testutil.EventuallyEvery(t, 30*time.Second, poll, func() error {
		if n1.Meta().Node("n2") == nil {
			return errors.New("n2 not registered")
		}
		return nil
	})
	if c := calls.Load(); c != 0 || n1.Meta().Node("rogue") != nil {
		t.Fatalf("rogue: %d calls, registered %v", c, n1.Meta().Node("rogue") != nil)
	}
}

// handLayer is a raft.StreamLayer that opens streams the way a client
// without the cluster secret can: hello writes a header (and whatever
// follows) on each new connection.
type handLayer struct {
	hello  func(net.Conn) error
	closed chan struct{}
	once   sync.Once
}

func newHandLayer(hello func(net.Conn) error) *handLayer {
	return &handLayer{hello: hello, closed: make(chan struct{})}
}

func (l *handLayer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	c, err := net.DialTimeout("tcp", string(addr), timeout)
	if err != nil {
		return nil, err
	}
	c.SetDeadline(time.Now().Add(timeout))
	if err := l.hello(c); err != nil {
		c.Close()
		return nil, err
	}
	c.SetDeadline(time.Time{})
	return c, nil
}

func (l *handLayer) Accept() (net.Conn, error) { <-l.closed; return nil, net.ErrClosed }
func (l *handLayer) Close() error              { l.once.Do(func() { close(l.closed) }); return nil }
func (l *handLayer) Addr() net.Addr            { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1} }

// oldHeader is the unauthenticated header (version 1) for group.
func oldHeader(group uint64) []byte { return binary.AppendUvarint([]byte("CEPR\x01"), group) }

// wrongSecretHello runs the authenticated header (version 2) for group
// with key, whatever the acceptor proves: the acceptor must close.
func wrongSecretHello(group uint64, key secret.Secret) func(net.Conn) error {
	return func(c net.Conn) error {
		nonce := make([]byte, 32)
		if _, err := c.Write(append(binary.AppendUvarint([]byte("CEPR\x02"), group), nonce...)); err != nil {
			return err
		}
		reply := make([]byte, 64)
		if _, err := io.ReadFull(c, reply); err != nil {
			return err
		}
		g := binary.BigEndian.AppendUint64(nil, group)
		_, err := c.Write(key.MAC(secret.Raft, []byte("dialer"), g, nonce, reply[:32]))
		return err
	}
}

// (b) A raw Raft client speaking to the metadata group (0) as a leader of
// a higher term, with an AppendEntries that deletes a pattern, and then
// heartbeats that would hold the group under its leadership: nothing is
// deleted, and the node keeps leading. Through the old header and through
// the new one with a wrong secret.
func TestRawRaftAppendEntriesIsRefused(t *testing.T) {
	tc := newSingle(t, 2*time.Minute, cluster.Config{})
	n := tc.nodes[0]
	c := tc.client(0)
	tc.createBank(c)
	tc.deploy(c, &cepv1.DeployPatternRequest{Spec: string(lflSpec)})
	if n.Meta().Patterns["lfl"] == nil {
		t.Fatal("pattern lfl not deployed")
	}
	target := raft.ServerAddress(n.Config().RaftAddr)
	del, err := meta.Encode(meta.DeletePattern{Name: "lfl"})
	if err != nil {
		t.Fatal(err)
	}

	for _, v := range []struct {
		name  string
		hello func(net.Conn) error
	}{
		{"old header", func(c net.Conn) error { _, err := c.Write(oldHeader(0)); return err }},
		{"wrong secret", wrongSecretHello(0, secret.Generate())},
	} {
		t.Run(v.name, func(t *testing.T) {
			trans := raft.NewNetworkTransport(newHandLayer(v.hello), 1, 2*time.Second, io.Discard)
			defer trans.Close()
			hdr := raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("rogue"), Addr: []byte("127.0.0.1:1")}
			// heartbeats of the rogue leader for 2 s: the node must keep
			// its leadership and the pattern all along
			forgeAppend(t, trans, "n1", target, hdr, del, 2*time.Second, func() {
				if n.Meta().Patterns["lfl"] == nil {
					t.Fatal("the pattern was deleted by a raw AppendEntries")
				}
				if !n.IsMetaLeader() {
					t.Fatalf("the node lost the metadata group's leadership (leader now %q)", n.MetaLeader())
				}
			})
			// and the group still takes changes
			if _, err := c.patterns.GetPattern(tc.ctx, req(&cepv1.GetPatternRequest{Name: "lfl"})); err != nil {
				t.Fatalf("get the pattern: %v", err)
			}
		})
	}
}

// (c) Connections that stop after the header, or send nothing, are closed
// once the handshake deadline has passed; the old header at once; beyond
// the bound on handshakes new ones are closed at once.
func TestSilentRaftConnectionsAreClosed(t *testing.T) {
	tc := newSingle(t, time.Minute, cluster.Config{})
	addr := tc.nodes[0].Config().RaftAddr
	dial := func(payload []byte) net.Conn {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if _, err := c.Write(payload); err != nil {
			t.Fatal(err)
		}
		return c
	}
	// closedWithin reports whether the node closed c within d.
	closedWithin := func(c net.Conn, d time.Duration) error {
		c.SetReadDeadline(time.Now().Add(d))
		_, err := io.Copy(io.Discard, c) // the acceptor's answer, if any, then EOF
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return fmt.Errorf("still open after %v", d)
		}
		return nil
	}

	old := dial(oldHeader(0))
	start := time.Now()
	silent := dial(nil)
	header := dial(append(binary.AppendUvarint([]byte("CEPR\x02"), 0), make([]byte, 32)...)) // answered, then no proof
	if err := closedWithin(old, 2*time.Second); err != nil {
		t.Fatalf("old header: %v", err)
	}
	for name, c := range map[string]net.Conn{"silent": silent, "after the header": header} {
		if err := closedWithin(c, 10*time.Second-time.Since(start)); err != nil {
			t.Fatalf("%s: %v (the handshake deadline is 5 s)", name, err)
		}
	}

	// a flood of silent connections: beyond the bound (256) closed at once
	const flood = 300
	conns := make([]net.Conn, flood)
	for i := range conns {
		conns[i] = dial(nil)
	}
	var closedAtOnce atomic.Int64
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if closedWithin(c, time.Second) == nil {
				closedAtOnce.Add(1)
			}
		}()
	}
	wg.Wait()
	if n := closedAtOnce.Load(); n < flood-256 {
		t.Fatalf("%d of %d silent connections closed within a second, want at least %d", n, flood, flood-256)
	}
}

// A node run without a secret on request says so: a warning at start and
// its status; it keeps no secret. A node with one says nothing of the kind.
func TestInsecureNodeSaysSo(t *testing.T) {
	for _, insecure := range []bool{true, false} {
		t.Run(fmt.Sprintf("insecure=%v", insecure), func(t *testing.T) {
			var logs lockedBuffer
			tc := newSingle(t, time.Minute, cluster.Config{Insecure: insecure, Logger: logs.warnings()})
			st, err := tc.client(0).cluster.GetStatus(tc.ctx, req(&cepv1.GetStatusRequest{}))
			if err != nil {
				t.Fatal(err)
			}
			if got := st.Msg.GetSummary().GetInsecure(); got != insecure {
				t.Errorf("status says insecure %v", got)
			}
			if got := strings.Contains(logs.String(), "INSECURE"); got != insecure {
				t.Errorf("warned %v of insecurity:\n%s", got, logs.String())
			}
			_, kept, err := secret.Load(tc.cfgs[0].DataDir)
			if err != nil || kept == insecure {
				t.Errorf("secret kept: %v, %v", kept, err)
			}
		})
	}
}

// forgeAppend plays a leader of a term above target's over trans, as any
// process that got a stream could: it learns target's term and last
// index, appends one entry of data at the next term, then sends that
// leader's heartbeats for d, calling check after each.
func forgeAppend(t *testing.T, trans *raft.NetworkTransport, id raft.ServerID, target raft.ServerAddress, hdr raft.RPCHeader, data []byte, d time.Duration, check func()) {
	t.Helper()
	var probe raft.AppendEntriesResponse
	err := trans.AppendEntries(id, target, &raft.AppendEntriesRequest{RPCHeader: hdr}, &probe)
	t.Logf("probe: term %d, last log %d, %v", probe.Term, probe.LastLog, err)
	term := probe.Term + 1
	var resp raft.AppendEntriesResponse
	err = trans.AppendEntries(id, target, &raft.AppendEntriesRequest{RPCHeader: hdr, Term: term,
		PrevLogEntry: probe.LastLog, PrevLogTerm: probe.Term, LeaderCommitIndex: probe.LastLog + 1,
		Entries: []*raft.Log{{Index: probe.LastLog + 1, Term: term, Type: raft.LogCommand, Data: data}}}, &resp)
	t.Logf("forged append: success %v, %v", resp.Success, err)
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		trans.AppendEntries(id, target, &raft.AppendEntriesRequest{RPCHeader: hdr, Term: term, PrevLogEntry: probe.LastLog + 1,
			PrevLogTerm: term, LeaderCommitIndex: probe.LastLog + 1}, &resp)
		check()
	}
}
