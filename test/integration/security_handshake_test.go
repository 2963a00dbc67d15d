package integration

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/cepcluster/cep/cluster"
	"github.com/cepcluster/cep/cluster/gossip"
	"github.com/cepcluster/cep/cluster/meta"
	"github.com/cepcluster/cep/cluster/secret"
	"github.com/cepcluster/cep/internal/testutil"
)

// Attacks by a process that sits at an address members dial, or that
// holds the gossip key but not the cluster secret.

// relay listens where a stopped member's Raft port was, so that the live
// members' streams to that member reach it; each stream of the metadata
// group (group 0) it takes is held for relay.handshake, the others closed.
type relay struct {
	ln      net.Listener
	dialled chan net.Conn
	opened  atomic.Int64 // streams of group 0 taken from the members
}

func startRelay(t *testing.T, addr string) *relay {
	t.Helper()
	var ln net.Listener
	var err error
	// the stopped node's port, free again in a moment
	testutil.Eventually(t, 5*time.Second, func() error {
		ln, err = net.Listen("tcp", addr)
		return err
	})
	r := &relay{ln: ln, dialled: make(chan net.Conn, 16)}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
			select {
			case r.dialled <- c:
			default:
				c.Close()
			}
		}
	}()
	return r
}

// opening reads what a member sends first on a stream it opened: the
// header with its nonce (and whatever else it sends before waiting for
// the answer), all written at once.
func opening(c net.Conn) ([]byte, error) {
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	buf := make([]byte, 512)
	n, err := c.Read(buf)
	if err != nil {
		return nil, err
	}
	return buf[:n], nil
}

// handshake runs on victim (a fresh connection to another member) the
// handshake of the next stream of group 0 a member opened to the relay:
// its opening to the victim, the victim's answer back, the member's proof
// on to the victim. Then the member's side is dropped, and the victim's
// connection is the relay's to write on.
func (r *relay) handshake(victim net.Conn) error {
	deadline := time.After(10 * time.Second)
	for {
		var m net.Conn
		select {
		case m = <-r.dialled:
		case <-deadline:
			return errors.New("no member opened a stream of the metadata group to the relay within 10 s")
		}
		open, err := opening(m)
		if err != nil || len(open) < 6 || string(open[:4]) != "CEPR" || open[5] != 0 {
			m.Close() // another group's stream
			continue
		}
		r.opened.Add(1)
		defer m.Close()
		victim.SetDeadline(time.Now().Add(5 * time.Second))
		m.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := victim.Write(open); err != nil {
			return err
		}
		answer := make([]byte, 64) // the victim's nonce and proof
		if _, err := io.ReadFull(victim, answer); err != nil {
			return fmt.Errorf("the victim refused the relayed handshake: %w", err)
		}
		if _, err := m.Write(answer); err != nil {
			return err
		}
		proof := make([]byte, 32)
		if _, err := io.ReadFull(m, proof); err != nil {
			return fmt.Errorf("the member gave no proof: %w", err)
		}
		if _, err := victim.Write(proof); err != nil {
			return err
		}
		victim.SetDeadline(time.Time{})
		return nil
	}
}

// Three members; one stops, and a process takes its Raft address. The
// members that still dial it are relayed to another live member (the
// victim), and the relay then writes, as a leader of a higher term, an
// AppendEntries that deletes a source (the entry as legacy JSON, as an
// older release wrote it). The victim refuses the relayed handshake:
// the relay opens no stream, and the source stays on every live member.
func TestRaftHandshakeRelayedToAnotherMemberIsRefused(t *testing.T) {
	tc := newPeers(t, 3, 3*time.Minute)
	tc.startAll()
	tc.createBank(tc.client(0))
	leader := -1
	testutil.Eventually(t, 20*time.Second, func() error {
		for i, n := range tc.nodes {
			if n.IsMetaLeader() {
				leader = i
			}
		}
		for _, n := range tc.nodes {
			if n.Meta().Sources["bank"] == nil {
				return fmt.Errorf("%s has no source bank yet", n.Config().NodeID)
			}
		}
		if leader < 0 {
			return errors.New("no metadata leader")
		}
		return nil
	})
	var others []int
	for i := range tc.nodes {
		if i != leader {
			others = append(others, i)
		}
	}
	stopped, victim := others[0], others[1]
	stoppedAddr, victimAddr := tc.cfgs[stopped].RaftAddr, tc.cfgs[victim].RaftAddr
	t.Logf("leader %s, %s stopped (the relay takes %s), victim %s", tc.cfgs[leader].NodeID, tc.cfgs[stopped].NodeID, stoppedAddr, tc.cfgs[victim].NodeID)
	tc.stop(stopped)
	r := startRelay(t, stoppedAddr)

	del, err := meta.Encode(meta.DeleteSource{Name: "bank"})
	if err != nil {
		t.Fatal(err)
	}
	var relayed atomic.Int64
	trans := raft.NewNetworkTransport(newHandLayer(func(c net.Conn) error {
		err := r.handshake(c)
		if err == nil {
			relayed.Add(1)
		}
		return err
	}), 1, 5*time.Second, io.Discard)
	defer trans.Close()
	target := raft.ServerAddress(victimAddr)
	hdr := raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(tc.cfgs[leader].NodeID), Addr: []byte(tc.cfgs[leader].RaftAddr)}
	// the forged leader's heartbeats for 3 s: the source must stay
	forgeAppend(t, trans, "victim", target, hdr, del, 3*time.Second, func() {
		for _, i := range []int{leader, victim} {
			if tc.nodes[i].Meta().Sources["bank"] == nil {
				t.Fatalf("the source was deleted on %s through a relayed handshake", tc.cfgs[i].NodeID)
			}
		}
	})
	if r.opened.Load() == 0 {
		t.Fatal("no member dialled the relay: the attack was not tried")
	}
	if n := relayed.Load(); n != 0 {
		t.Fatalf("%d relayed handshakes were accepted by the victim", n)
	}
	t.Logf("%d streams of members relayed, none accepted", r.opened.Load())
}

// credentialCounter is a fake member's API: it answers health checks
// (all registering a node asks of it) and counts every call and every
// call that carries the node credential.
type credentialCounter struct {
	srv         *httptest.Server
	calls, cred atomic.Int64
}

func newCredentialCounter(t *testing.T, s secret.Secret) *credentialCounter {
	t.Helper()
	c := &credentialCounter{}
	want := "Bearer " + s.Token(secret.Node)
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.calls.Add(1)
		if r.Header.Get("Authorization") == want {
			c.cred.Add(1)
		}
		if r.URL.Path != "/healthz" {
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(c.srv.Close)
	return c
}

func (c *credentialCounter) addr() string { return strings.TrimPrefix(c.srv.URL, "http://") }

// gossipKeyOnly joins seed's gossip as id with the gossip key and an API
// at api, as a process that has the key and not the cluster secret.
func gossipKeyOnly(t *testing.T, id, api, seed string) {
	t.Helper()
	g, err := gossip.Start(gossip.Config{NodeID: id, BindAddr: "127.0.0.1:0", RaftAddr: "127.0.0.1:1", APIAddr: api,
		Fast: true, SecretKey: quorumGossipKey, Fresh: true, Proto: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	if _, err := g.Join([]string{seed}); err != nil {
		t.Fatalf("joining the gossip with the gossip key: %v", err)
	}
}

// gossipKeyNode is gossipNode with the cluster's separate gossip key.
func (tc *testCluster) gossipKeyNode(id string, join []string) *cluster.Node {
	tc.t.Helper()
	return tc.nodes[tc.add(cluster.Config{NodeID: id, DataDir: filepath.Join(tc.base, id), RaftAddr: "127.0.0.1:0", APIAddr: "127.0.0.1:0",
		NATSURL: tc.natsURL(), Shards: 1, Join: join, GossipKey: quorumGossipKey, Testing: &cluster.Testing{FastGossip: true},
		Raft: testRaft(), Logger: testutil.EnvLogger()})]
}

// A process with the gossip key (given apart from the secret) but not the
// cluster secret joins the gossip: it is never registered, never given a
// seat in the metadata group, and its API never receives the node
// credential; a node with the secret joins as ever.
func TestGossipKeyAloneDoesNotMakeAMember(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 2 nodes")
	}
	tc := newCluster(t, 2*time.Minute)
	n1 := tc.gossipKeyNode("n1", nil)
	if err := n1.WaitReady(tc.ctx); err != nil {
		t.Fatal(err)
	}
	api := newCredentialCounter(t, tc.secret)
	gossipKeyOnly(t, "intruder", api.addr(), n1.GossipAddr())

	// bounded: the fast gossip's push-pull runs every second, and the
	// metadata leader looks at each change of the gossip at once
	deadline := time.Now().Add(6 * time.Second)
	for time.Now().Before(deadline) {
		if n1.Meta().Node("intruder") != nil {
			t.Fatal("the process with the gossip key only is registered")
		}
		if voters, nonvoters, _ := n1.MetaServers(); slices.Contains(voters, "intruder") || slices.Contains(nonvoters, "intruder") {
			t.Fatalf("the process with the gossip key only is in the metadata group: %v %v", voters, nonvoters)
		}
		if c := api.cred.Load(); c != 0 {
			t.Fatalf("the process with the gossip key only received the node credential in %d calls", c)
		}
		time.Sleep(poll)
	}

	n2 := tc.gossipKeyNode("n2", []string{n1.GossipAddr()})
	testutil.EventuallyEvery(t, 30*time.Second, poll, func() error {
		if n1.Meta().Node("n2") == nil {
			return errors.New("n2 not registered")
		}
		return nil
	})
	_ = n2
	if c := api.cred.Load(); c != 0 || n1.Meta().Node("intruder") != nil {
		t.Fatalf("intruder: %d calls with the node credential, registered %v", c, n1.Meta().Node("intruder") != nil)
	}
	t.Logf("intruder's API: %d calls, none with the node credential", api.calls.Load())
}

// A member stops; a process with the gossip key but not the secret
// announces itself under the member's id at its own addresses: the
// member's addresses stay as they were, and the process's API never
// receives the node credential.
func TestDeadMemberIDIsNotTakenWithoutTheSecret(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 2 nodes")
	}
	tc := newCluster(t, 2*time.Minute)
	n1 := tc.gossipKeyNode("n1", nil)
	if err := n1.WaitReady(tc.ctx); err != nil {
		t.Fatal(err)
	}
	tc.gossipKeyNode("n2", []string{n1.GossipAddr()})
	var was meta.Node
	testutil.EventuallyEvery(t, 30*time.Second, poll, func() error {
		nd := n1.Meta().Node("n2")
		if nd == nil {
			return errors.New("n2 not registered")
		}
		was = *nd
		return nil
	})
	tc.stop(1)
	api := newCredentialCounter(t, tc.secret)
	gossipKeyOnly(t, "n2", api.addr(), n1.GossipAddr())

	deadline := time.Now().Add(6 * time.Second)
	for time.Now().Before(deadline) {
		nd := n1.Meta().Node("n2")
		if nd == nil || nd.APIAddr != was.APIAddr || nd.RaftAddr != was.RaftAddr || nd.GossipAddr != was.GossipAddr {
			t.Fatalf("n2's entry changed: %+v, was %+v", nd, was)
		}
		if c := api.cred.Load(); c != 0 {
			t.Fatalf("the process under n2's id received the node credential in %d calls", c)
		}
		time.Sleep(poll)
	}
	t.Logf("impostor's API: %d calls, none with the node credential", api.calls.Load())
}
