package gossip

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/cepcluster/cep/internal/testutil"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// newTestGossip starts a Fast gossip for id on a free loopback port, with
// Raft and API addresses derived from id and gen, closed at the test's end.
func newTestGossip(t *testing.T, id string, gen int, key []byte) *Gossip {
	t.Helper()
	return newTestGossipAt(t, "127.0.0.1:0", id, gen, key)
}

func newTestGossipAt(t *testing.T, bind, id string, gen int, key []byte) *Gossip {
	t.Helper()
	g, err := Start(Config{
		NodeID:    id,
		BindAddr:  bind,
		RaftAddr:  fmt.Sprintf("%s-raft:%d", id, gen),
		APIAddr:   fmt.Sprintf("%s-api:%d", id, gen),
		Logger:    testutil.Logger(t, slog.LevelDebug),
		Fast:      true,
		SecretKey: key,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

func joinTo(t *testing.T, g *Gossip, seeds ...*Gossip) {
	t.Helper()
	var addrs []string
	for _, s := range seeds {
		addrs = append(addrs, s.Addr())
	}
	if _, err := g.Join(addrs); err != nil {
		t.Fatal(err)
	}
}

// waitMember waits until g sees id in state with the addresses of
// generation gen (gen < 0: any).
func waitMember(t *testing.T, g *Gossip, id string, state State, gen int, within time.Duration) Member {
	t.Helper()
	var m Member
	testutil.EventuallyEvery(t, within, 20*time.Millisecond, func() error {
		var ok bool
		if m, ok = g.Member(id); !ok {
			return fmt.Errorf("%s: %s not listed", g.Addr(), id)
		}
		if m.State != state {
			return fmt.Errorf("%s: %s is %v, want %v", g.Addr(), id, m.State, state)
		}
		if gen >= 0 && (m.RaftAddr != fmt.Sprintf("%s-raft:%d", id, gen) || m.APIAddr != fmt.Sprintf("%s-api:%d", id, gen)) {
			return fmt.Errorf("%s: %s at %+v, want generation %d", g.Addr(), id, m, gen)
		}
		return nil
	})
	return m
}

func TestGossipMembership(t *testing.T) {
	a, b, c := newTestGossip(t, "a", 0, nil), newTestGossip(t, "b", 0, nil), newTestGossip(t, "c", 0, nil)
	if _, port, _ := net.SplitHostPort(a.Addr()); port == "0" || port == "" {
		t.Fatalf("Addr %q: want the bound port", a.Addr())
	}
	changed := a.Changed()
	joinTo(t, b, a)
	joinTo(t, c, a, c) // its own address among the seeds is harmless
	select {
	case <-changed:
	case <-time.After(5 * time.Second):
		t.Fatal("Changed not closed after a join")
	}
	gs := map[string]*Gossip{"a": a, "b": b, "c": c}
	for _, g := range gs {
		for id, o := range gs {
			m := waitMember(t, g, id, Alive, 0, 5*time.Second)
			if m.GossipAddr != o.Addr() || m.Since.IsZero() {
				t.Errorf("%s sees %+v, want gossip address %s and a time", g.Addr(), m, o.Addr())
			}
		}
		ids := []string{}
		for _, m := range g.Members() {
			ids = append(ids, m.ID)
		}
		if !slices.Equal(ids, []string{"a", "b", "c"}) {
			t.Errorf("%s: Members ids %v", g.Addr(), ids)
		}
	}
}

// TestGossipHostNames checks that host names are resolved, memberlist
// taking IPs only, and that Advertise's port 0 stands for the bound port.
func TestGossipHostNames(t *testing.T) {
	a := newTestGossip(t, "a", 0, nil)
	b, err := Start(Config{NodeID: "b", BindAddr: "localhost:0", Advertise: "localhost:0", Fast: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if host, port, _ := net.SplitHostPort(b.Addr()); net.ParseIP(host) == nil || port == "0" {
		t.Fatalf("Addr %q: want an IP and the bound port", b.Addr())
	}
	_, port, _ := net.SplitHostPort(a.Addr())
	if _, err := b.Join([]string{net.JoinHostPort("localhost", port)}); err != nil {
		t.Fatal(err)
	}
	waitMember(t, a, "b", Alive, -1, 5*time.Second)
}

func TestGossipCrashLeaveForget(t *testing.T) {
	a, b, c := newTestGossip(t, "a", 0, nil), newTestGossip(t, "b", 0, nil), newTestGossip(t, "c", 0, nil)
	joinTo(t, b, a)
	joinTo(t, c, a)
	for _, g := range []*Gossip{a, b} {
		waitMember(t, g, "c", Alive, 0, 5*time.Second)
	}

	crashed := time.Now()
	c.Close()
	for _, g := range []*Gossip{a, b} {
		m := waitMember(t, g, "c", Dead, 0, 5*time.Second)
		if m.Since.Before(crashed) {
			t.Errorf("dead since %v, before the crash at %v", m.Since, crashed)
		}
	}
	t.Logf("crash detected after %v", time.Since(crashed))

	waitMember(t, b, "a", Alive, 0, 5*time.Second)
	left := time.Now()
	if err := b.Leave(time.Second); err != nil {
		t.Fatal(err)
	}
	waitMember(t, a, "b", Dead, 0, time.Second)
	t.Logf("leave seen after %v", time.Since(left))
	b.Close()

	a.Forget("a") // alive: stays
	a.Forget("c")
	if _, ok := a.Member("c"); ok {
		t.Error("c still listed after Forget")
	}
	if _, ok := a.Member("a"); !ok {
		t.Error("Forget dropped an alive member")
	}
}

func TestGossipRestart(t *testing.T) {
	for _, how := range []string{"leave", "crash-detected", "crash-undetected"} {
		for _, samePort := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/same-port=%v", how, samePort), func(t *testing.T) {
				t.Parallel()
				testGossipRestart(t, how, samePort)
			})
		}
	}
}

// testGossipRestart restarts node b with new Raft and API addresses, on a
// new gossip port or the same, after it left or crashed, and checks that a
// learns the new addresses.
func testGossipRestart(t *testing.T, how string, samePort bool) {
	a, b := newTestGossip(t, "a", 0, nil), newTestGossip(t, "b", 0, nil)
	joinTo(t, b, a)
	waitMember(t, a, "b", Alive, 0, 5*time.Second)
	switch how {
	case "leave":
		if err := b.Leave(time.Second); err != nil {
			t.Fatal(err)
		}
		b.Close()
	case "crash-detected":
		b.Close()
		waitMember(t, a, "b", Dead, 0, 5*time.Second)
	case "crash-undetected":
		b.Close()
	}
	bind := "127.0.0.1:0"
	if samePort {
		bind = b.Addr()
	}
	b2 := newTestGossipAt(t, bind, "b", 1, nil)
	for try := 0; !samePort && b2.Addr() == b.Addr() && try < 5; try++ {
		// the system may hand out the port just freed again: a new one is
		// what this case is about
		b2.Close()
		b2 = newTestGossipAt(t, bind, "b", 1, nil)
	}
	if (b2.Addr() == b.Addr()) != samePort {
		t.Fatalf("restarted at %s, was at %s", b2.Addr(), b.Addr())
	}
	joinTo(t, b2, a)
	m := waitMember(t, a, "b", Alive, 1, 8*time.Second)
	if m.GossipAddr != b2.Addr() {
		t.Errorf("a sees b at %s, want %s", m.GossipAddr, b2.Addr())
	}
	waitMember(t, b2, "a", Alive, 0, 5*time.Second)
}

func TestGossipSecretKey(t *testing.T) {
	key := []byte("0123456789abcdef")
	a, b := newTestGossip(t, "a", 0, key), newTestGossip(t, "b", 0, key)
	joinTo(t, b, a)
	waitMember(t, a, "b", Alive, 0, 5*time.Second)

	stranger := newTestGossip(t, "x", 0, []byte("fedcba9876543210"))
	if _, err := stranger.Join([]string{a.Addr()}); err == nil {
		t.Error("joined with the wrong key")
	}
	if _, ok := a.Member("x"); ok {
		t.Error("a lists a node with the wrong key")
	}

	// a node without any key: neither its join nor one to it is taken,
	// and its own gossip (it keeps probing a once it heard of it) neither
	keyless := newTestGossip(t, "y", 0, nil)
	if _, err := keyless.Join([]string{a.Addr()}); err == nil {
		t.Error("a node without the key joined")
	}
	if _, err := a.Join([]string{keyless.Addr()}); err == nil {
		t.Error("joined a node without the key")
	}
	deadline := time.Now().Add(2 * time.Second) // two push-pull rounds of the Fast gossip
	for time.Now().Before(deadline) {
		for _, g := range []*Gossip{a, b} {
			for _, id := range []string{"x", "y"} {
				if _, ok := g.Member(id); ok {
					t.Fatalf("%s lists %s, which has not the key", g.Addr(), id)
				}
			}
		}
		if _, ok := keyless.Member("a"); ok {
			t.Fatal("the node without the key learnt a")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestGossipCloseNoLeak(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	a, err := Start(Config{NodeID: "a", BindAddr: "127.0.0.1:0", Fast: true})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Start(Config{NodeID: "b", BindAddr: "127.0.0.1:0", Fast: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Join([]string{a.Addr()}); err != nil {
		t.Fatal(err)
	}
	waitMember(t, a, "b", Alive, -1, 5*time.Second)
	if err := b.Leave(time.Second); err != nil {
		t.Fatal(err)
	}
	for _, g := range []*Gossip{a, b, a, b} {
		if err := g.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Leave(time.Second); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Leave after Close: %v, want net.ErrClosed", err)
	}
	if _, err := a.Join([]string{b.Addr()}); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Join after Close: %v, want net.ErrClosed", err)
	}
}

func TestGossipBadConfig(t *testing.T) {
	for _, cfg := range []Config{
		{BindAddr: "127.0.0.1:0"},
		{NodeID: "a", BindAddr: "127.0.0.1"},
		{NodeID: "a", BindAddr: "127.0.0.1:0", Advertise: "no-such-host.invalid:1"},
		{NodeID: "a", BindAddr: "127.0.0.1:0", Advertise: "1.2.3.4:x"},
		{NodeID: "a", BindAddr: "127.0.0.1:0", SecretKey: []byte("short")},
		{NodeID: "a", BindAddr: "127.0.0.1:0", RaftAddr: string(make([]byte, 600))},
	} {
		if g, err := Start(cfg); err == nil {
			g.Close()
			t.Errorf("Start(%+v) succeeded", cfg)
		}
	}
}

// A member's proof travels in its metadata, made over the claim the
// others see: the gossip address they reach it at included; its release
// travels too, outside the claim.
func TestProofCoversTheClaimSeen(t *testing.T) {
	prove := func(c Claim) string { return "proof of " + string(c.Bytes()) }
	start := func(id string) *Gossip {
		g, err := Start(Config{NodeID: id, BindAddr: "127.0.0.1:0", RaftAddr: id + "-raft:1", APIAddr: id + "-api:1",
			Logger: testutil.Logger(t, slog.LevelDebug), Fast: true, Fresh: true, Prove: prove, Release: "v1.2.3-" + id, Version: len(id) + 1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { g.Close() })
		return g
	}
	a, b := start("a"), start("b")
	joinTo(t, b, a)
	mb := waitMember(t, a, "b", Alive, -1, 10*time.Second)
	if mb.Proof == "" || mb.Proof != prove(mb.Claim()) {
		t.Fatalf("b's proof %q, want one of the claim a sees, %q", mb.Proof, prove(mb.Claim()))
	}
	if mb.GossipAddr != b.Addr() || !mb.Fresh || mb.Started == 0 {
		t.Fatalf("claim seen %+v, b at %s", mb.Claim(), b.Addr())
	}
	if mb.Release != "v1.2.3-b" || mb.Version != 2 {
		t.Errorf("b's release seen as %q, its version as %d", mb.Release, mb.Version)
	}
}

// The metadata a release before cluster versions gossips (no "version")
// reads as version 0, which the cluster takes for its base version; this
// release's omits nothing an older one reads.
func TestMetaOfOlderReleases(t *testing.T) {
	older := `{"fresh":true,"started":5,"raft":"r:1","api":"a:1","proto":3,"proof":"p","release":"v0.9"}`
	var md Meta
	if err := json.Unmarshal([]byte(older), &md); err != nil {
		t.Fatal(err)
	}
	if md.Version != 0 || md.Proto != 3 || md.Release != "v0.9" {
		t.Fatalf("older metadata read as %+v", md)
	}
	md.Version = 2
	b, _ := json.Marshal(md)
	var back map[string]any
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	var old map[string]any
	json.Unmarshal([]byte(older), &old)
	for k, v := range old {
		if back[k] != v {
			t.Errorf("%s: %v, was %v", k, back[k], v)
		}
	}
	if back["version"] != float64(2) {
		t.Errorf("version encoded as %v", back["version"])
	}
}
