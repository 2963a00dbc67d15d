package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/crypto/bcrypt"

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
		// the passwords are bcrypt hashes (a salt of their own each time)
		// of the users' keys
		token := map[string]string{NATSNodeUser: sec.Token(secret.NATSNode), NATSPublisherUser: sec.Token(secret.NATSPublic), NATSSubscriberUser: sec.Token(secret.NATSReader)}[w.Username]
		if !strings.HasPrefix(u.Password, "$2") || bcrypt.CompareHashAndPassword([]byte(u.Password), []byte(token)) != nil {
			t.Errorf("user %s: password %q is not a bcrypt hash of its key", u.Username, u.Password)
		}
		if !reflect.DeepEqual(u.Permissions, w.Permissions) || u.Account == nil || u.Account.Name != accounts[w.Username] {
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

// The embedded server denies the publisher the derived sources' subjects
// without a reload (derivedGuard): while they come and go, every JetStream
// request of the node is answered — a reload of the users made JetStream's
// API answer "no responders" until the server had checked each client's
// password again, a bcrypt comparison each — and the publisher's publish
// to a derived subject is refused as a permissions violation while the
// node's is stored, and allowed again once the subject is no longer
// derived.
func TestEmbeddedNATSDeniesDerivedSubjectsWithoutReload(t *testing.T) {
	sec := secret.Generate()
	s, err := StartSecureEmbeddedNATS(t.TempDir(), "127.0.0.1", -1, nil, sec)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// clients for the server to check again, were it reloaded
	var conns []*nats.Conn
	for range 16 {
		c, err := dialNATS(s.ClientURL(), "", "", "test-node", sec)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	node := conns[0]
	js, _ := jetstream.New(node)
	const derived = "bank.k0123abcd.*"
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "SRC", Subjects: []string{"src.>", derived}})
	if err != nil {
		t.Fatal(err)
	}
	acc, err := s.LookupAccount(NATSPublisherAccount)
	if err != nil {
		t.Fatal(err)
	}
	g := derivedGuard{acc: acc, have: map[string]bool{}}

	var stop atomic.Bool
	var failed atomic.Value
	done := make(chan struct{})
	go func() {
		defer close(done)
		for !stop.Load() {
			if _, err := js.Stream(ctx, "SRC"); err != nil {
				failed.Store(err)
				return
			}
		}
	}()
	for i := range 40 {
		var want []string
		if i%2 == 0 {
			want = []string{derived}
		}
		if err := g.set(want); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	stop.Store(true)
	<-done
	if err, _ := failed.Load().(error); err != nil {
		t.Fatalf("a JetStream request while the derived subjects changed: %v", err)
	}

	if err := g.set([]string{derived}); err != nil {
		t.Fatal(err)
	}
	violations := make(chan string, 8)
	pub, err := nats.Connect(s.ClientURL(), nats.UserInfo(NATSPublisherUser, sec.Token(secret.NATSPublic)),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { violations <- err.Error() }))
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	pjs, _ := jetstream.New(pub)
	if _, err := pjs.Publish(ctx, "src.a", []byte("{}")); err != nil {
		t.Fatalf("the publisher's publish to a source: %v", err)
	}
	short, cancelShort := context.WithTimeout(ctx, time.Second)
	defer cancelShort()
	if _, err := pjs.Publish(short, "bank.k0123abcd.r1", []byte("{}")); err == nil {
		t.Fatal("the publisher wrote to a derived source's subject")
	}
	select {
	case v := <-violations:
		if !strings.Contains(strings.ToLower(v), "permissions violation") || !strings.Contains(v, "bank.k0123abcd.r1") {
			t.Fatalf("the refusal: %s", v)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no permissions violation for the derived subject")
	}
	if _, err := js.Publish(ctx, "bank.k0123abcd.r1", []byte("{}")); err != nil {
		t.Fatalf("the node's publish to the derived subject: %v", err)
	}
	if err := g.set(nil); err != nil {
		t.Fatal(err)
	}
	if _, err := pjs.Publish(ctx, "bank.k0123abcd.r2", []byte("{}")); err != nil {
		t.Fatalf("the publisher's publish once the subject is no longer derived: %v", err)
	}
	info, err := st.Info(ctx)
	if err != nil || info.State.Msgs != 3 {
		t.Fatalf("stream: %v, %+v; want the 3 allowed publishes", err, info)
	}
}

// warnings records what a nats-server warns of.
type warnings struct {
	mu  sync.Mutex
	got []string
}

func (w *warnings) Noticef(string, ...any) {}
func (w *warnings) Debugf(string, ...any)  {}
func (w *warnings) Tracef(string, ...any)  {}
func (w *warnings) Fatalf(f string, a ...any) {
	w.Warnf(f, a...)
}
func (w *warnings) Errorf(f string, a ...any) { w.Warnf(f, a...) }
func (w *warnings) Warnf(f string, a ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.got = append(w.got, fmt.Sprintf(f, a...))
}

// The embedded server's users hold bcrypt hashes: it starts without the
// plaintext-password warning, and the users still sign in with their
// keys (and not with the hash).
func TestEmbeddedNATSPasswordsHashed(t *testing.T) {
	sec := secret.Generate()
	opts := &server.Options{Host: "127.0.0.1", Port: -1, NoSigs: true}
	if err := setNATSAccounts(opts, sec, DefaultPublisherLimits); err != nil {
		t.Fatal(err)
	}
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	w := &warnings{}
	s.SetLoggerV2(w, false, false, false)
	go s.Start()
	t.Cleanup(s.Shutdown)
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	w.mu.Lock()
	for _, l := range w.got {
		if strings.Contains(strings.ToLower(l), "plaintext") {
			t.Errorf("the server warns: %s", l)
		}
	}
	w.mu.Unlock()
	for _, u := range opts.Users {
		if !strings.HasPrefix(u.Password, "$2") {
			t.Errorf("user %s: password not hashed", u.Username)
		}
	}
	nc, err := nats.Connect(s.ClientURL(), nats.UserInfo(NATSPublisherUser, sec.Token(secret.NATSPublic)))
	if err != nil {
		t.Fatalf("the publisher with its key: %v", err)
	}
	nc.Close()
	var hash string
	for _, u := range opts.Users {
		if u.Username == NATSPublisherUser {
			hash = u.Password
		}
	}
	if nc, err := nats.Connect(s.ClientURL(), nats.UserInfo(NATSPublisherUser, hash)); err == nil {
		nc.Close()
		t.Error("the hash itself signs in")
	}
}
