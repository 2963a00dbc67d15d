package cluster

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cepcluster/cep/cluster/secret"
)

// The generated configuration gives a real nats-server the embedded
// server's users: parsed back, they are natsUsers exactly, and on a
// running server the publisher is confined as on the embedded one.
func TestNATSServerConfig(t *testing.T) {
	sec := secret.Generate()
	dir := t.TempDir()
	path := filepath.Join(dir, "nats.conf")
	if err := os.WriteFile(path, []byte(NATSServerConfig(sec, filepath.Join(dir, "js"), 0, DefaultPublisherLimits)), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(path)
	if err != nil {
		t.Fatalf("nats-server refuses the configuration: %v", err)
	}
	want := natsUsers(sec)
	if len(opts.Users) != len(want) {
		t.Fatalf("users: %d, want %d", len(opts.Users), len(want))
	}
	accounts := map[string]string{NATSNodeUser: NATSNodeAccount, NATSPublisherUser: NATSPublisherAccount, NATSSubscriberUser: NATSSubscriberAccount}
	for _, w := range want {
		i := slices.IndexFunc(opts.Users, func(u *server.User) bool { return u.Username == w.Username })
		if i < 0 {
			t.Fatalf("no user %s", w.Username)
		}
		u := opts.Users[i]
		if u.Password != w.Password || !reflect.DeepEqual(u.Permissions, w.Permissions) || u.Account == nil || u.Account.Name != accounts[w.Username] {
			t.Errorf("user %+v %+v, want %+v %+v in account %s", u, u.Permissions, w, w.Permissions, accounts[w.Username])
		}
	}
	if !opts.JetStream || opts.StoreDir != filepath.Join(dir, "js") {
		t.Errorf("jetstream %v in %q", opts.JetStream, opts.StoreDir)
	}

	opts.Port, opts.NoLog, opts.NoSigs = -1, true, true
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	t.Cleanup(s.Shutdown)
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	if _, err := nats.Connect(s.ClientURL()); err == nil {
		t.Fatal("an anonymous client was admitted")
	}
	node, err := dialNATS(s.ClientURL(), "", "", "test-node", sec)
	if err != nil {
		t.Fatalf("the node user: %v", err)
	}
	defer node.Close()
	js, _ := jetstream.New(node)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "OUT", Subjects: []string{"cep.out.>"}}); err != nil {
		t.Fatalf("the node user cannot create a stream: %v", err)
	}
	pub, err := nats.Connect(s.ClientURL(), nats.UserInfo(NATSPublisherUser, sec.Token(secret.NATSPublic)))
	if err != nil {
		t.Fatalf("the publisher: %v", err)
	}
	defer pub.Close()
	pjs, _ := jetstream.New(pub)
	short, cancelShort := context.WithTimeout(ctx, time.Second)
	defer cancelShort()
	if _, err := pjs.Publish(short, "cep.out.forged", []byte("{}")); err == nil {
		t.Fatal("the publisher wrote to the output")
	}
	if err := pjs.DeleteStream(short, "OUT"); err == nil {
		t.Fatal("the publisher deleted a stream")
	}
	if err := pub.LastError(); err == nil || !strings.Contains(err.Error(), "Permissions Violation") {
		t.Errorf("the server did not refuse the publisher: %v", err)
	}
	if info, err := js.Stream(ctx, "OUT"); err != nil || info.CachedInfo().State.Msgs != 0 {
		t.Fatalf("output stream after the publisher: %v", err)
	}
}

// A store written while the users were in NATS's global account (every
// stream under jetstream/$G) is the node account's after the change: the
// node user finds its stream and the messages in it.
func TestEmbeddedNATSKeepsGlobalAccountStreams(t *testing.T) {
	sec := secret.Generate()
	dir := t.TempDir()
	old := &server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: dir, NoLog: true, NoSigs: true,
		Users: []*server.User{{Username: NATSNodeUser, Password: sec.Token(secret.NATSNode)}}}
	s, err := server.NewServer(old)
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	nc, err := dialNATS(s.ClientURL(), "", "", "test-node", sec)
	if err != nil {
		t.Fatal(err)
	}
	js, _ := jetstream.New(nc)
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "KEEP", Subjects: []string{"keep.>"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "keep.a", []byte("x")); err != nil {
		t.Fatal(err)
	}
	nc.Close()
	s.Shutdown()
	s.WaitForShutdown()

	s, err = StartSecureEmbeddedNATS(dir, "127.0.0.1", -1, nil, sec)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown()
	nc, err = dialNATS(s.ClientURL(), "", "", "test-node", sec)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ = jetstream.New(nc)
	st, err := js.Stream(ctx, "KEEP")
	if err != nil {
		t.Fatalf("the stream of the global account after the change: %v", err)
	}
	if n := st.CachedInfo().State.Msgs; n != 1 {
		t.Fatalf("stream KEEP holds %d messages, 1 before", n)
	}
}

// Reloading the embedded server's accounts (guardDerivedSources does, as
// derived sources come and go) keeps the node account's streams working
// and the publisher's import: a publish of the publisher after the reload
// is acked and stored, its ack never reaches a node subject named as the
// reply, and a subject denied by the reload is refused.
func TestEmbeddedNATSReloadKeepsAccounts(t *testing.T) {
	sec := secret.Generate()
	dir := t.TempDir()
	s, err := StartSecureEmbeddedNATS(dir, "127.0.0.1", -1, nil, sec)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	node, err := dialNATS(s.ClientURL(), "", "", "test-node", sec)
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	js, _ := jetstream.New(node)
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "SRC", Subjects: []string{"src.>", "derived.>"}})
	if err != nil {
		t.Fatal(err)
	}
	opts, err := embeddedOptions(dir, "127.0.0.1", s.Addr().(*net.TCPAddr).Port, sec, "derived.>")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.ReloadOptions(opts); err != nil {
		t.Fatalf("reload: %v", err)
	}
	pub, err := nats.Connect(s.ClientURL(), nats.UserInfo(NATSPublisherUser, sec.Token(secret.NATSPublic)))
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	pjs, _ := jetstream.New(pub)
	out, err := node.SubscribeSync("cep.out.x")
	if err != nil {
		t.Fatal(err)
	}
	if err := node.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := pub.PublishMsg(&nats.Msg{Subject: "src.b", Reply: "cep.out.x", Data: []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	if _, err := pjs.Publish(ctx, "src.a", []byte("{}")); err != nil {
		t.Fatalf("the publisher's publish after the reload: %v", err)
	}
	if m, err := out.NextMsg(300 * time.Millisecond); err == nil {
		t.Fatalf("the publisher's reply wrote on the node's cep.out.x: %s", m.Data)
	}
	short, cancelShort := context.WithTimeout(ctx, time.Second)
	defer cancelShort()
	if _, err := pjs.Publish(short, "derived.a", []byte("{}")); err == nil {
		t.Fatal("the publisher wrote to a subject the reload denied")
	}
	if _, err := js.Publish(ctx, "derived.a", []byte("{}")); err != nil {
		t.Fatalf("the node's publish after the reload: %v", err)
	}
	info, err := st.Info(ctx)
	if err != nil || info.State.Msgs != 3 {
		t.Fatalf("stream after the reload: %v, %+v", err, info)
	}
}
