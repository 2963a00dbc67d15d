package cluster

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cepcluster/cep/cluster/secret"
)

// The subscriber user of the embedded server reads what the node
// publishes on the output and dead-letter subjects, and every attack on
// the rest fails: it cannot publish there (forged matches) or anywhere,
// cannot read a source's events or the node account's traffic, and
// cannot use the JetStream API; a wrong password is refused.
func TestSecureEmbeddedNATSSubscriberUser(t *testing.T) {
	sec := secret.Generate()
	ns, err := StartSecureEmbeddedNATS(t.TempDir(), "127.0.0.1", -1, nil, sec)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { ns.Shutdown(); ns.WaitForShutdown() }()
	url := ns.ClientURL()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	node, err := dialNATS(url, "", "", "test", sec)
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	js, _ := jetstream.New(node)
	if err := EnsureOutputStream(ctx, js, OutputLimits{}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "BANK", Subjects: []string{"bank.>"}}); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	var violations []string
	sub, err := nats.Connect(url, nats.UserInfo(NATSSubscriberUser, sec.Token(secret.NATSReader)), nats.MaxReconnects(0),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			mu.Lock()
			violations = append(violations, err.Error())
			mu.Unlock()
		}))
	if err != nil {
		t.Fatalf("the subscriber: %v", err)
	}
	defer sub.Close()
	out, err := sub.SubscribeSync("cep.out.>")
	if err != nil {
		t.Fatal(err)
	}
	dead, err := sub.SubscribeSync("cep.deadletter.>")
	if err != nil {
		t.Fatal(err)
	}
	// attacks on subscriptions: the source's events, everything, the
	// node's inboxes
	var stolen []*nats.Subscription
	for _, subj := range []string{"bank.>", ">", nodeInboxPrefix + ".>", "$JS.API.>"} {
		s, err := sub.SubscribeSync(subj)
		if err != nil {
			t.Fatal(err)
		}
		stolen = append(stolen, s)
	}
	if err := sub.Flush(); err != nil {
		t.Fatal(err)
	}

	// the node publishes an event, a record and a dead letter
	if _, err := js.Publish(ctx, "bank.acc-1", []byte(`{"secret":1}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "cep.out.p", []byte(`{"type":"match"}`)); err != nil {
		t.Fatal(err)
	}
	if err := node.Publish("cep.deadletter.bank", []byte(`{"reason":"x"}`)); err != nil {
		t.Fatal(err)
	}
	node.Flush()
	if m, err := out.NextMsg(10 * time.Second); err != nil || string(m.Data) != `{"type":"match"}` {
		t.Fatalf("the subscriber did not read the record: %v %v", m, err)
	}
	if m, err := dead.NextMsg(10 * time.Second); err != nil || string(m.Data) != `{"reason":"x"}` {
		t.Fatalf("the subscriber did not read the dead letter: %v %v", m, err)
	}
	for i, s := range stolen {
		if m, err := s.NextMsg(200 * time.Millisecond); err == nil && strings.Contains(string(m.Data), "secret") {
			t.Errorf("subscription %d read a source event: %s", i, m.Data)
		}
	}

	count := func(name string) uint64 {
		st, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		return st.CachedInfo().State.Msgs
	}
	before := map[string]uint64{"BANK": count("BANK"), OutputStream: count(OutputStream)}

	// attacks on publishing: a forged record, a forged event, the
	// JetStream API
	for _, subj := range []string{"cep.out.p", "cep.deadletter.bank", "bank.acc-1", "$JS.API.STREAM.DELETE.OUTPUT"} {
		if err := sub.Publish(subj, []byte(`{"forged":true}`)); err != nil {
			t.Fatal(err)
		}
	}
	sub.Flush()
	sjs, _ := jetstream.New(sub)
	short, cancelShort := context.WithTimeout(ctx, time.Second)
	defer cancelShort()
	if _, err := sjs.Stream(short, "BANK"); err == nil {
		t.Error("the subscriber reached the JetStream API")
	}
	for name, n := range before {
		if got := count(name); got != n {
			t.Errorf("stream %s holds %d messages after the subscriber's publishes, want the node's %d", name, got, n)
		}
	}
	mu.Lock()
	got := strings.Join(violations, "\n")
	mu.Unlock()
	for _, want := range []string{`Subscription to "bank.>"`, `Subscription to ">"`, `Publish to "cep.out.p"`, `Publish to "bank.acc-1"`} {
		if !strings.Contains(got, want) {
			t.Errorf("the server did not refuse the subscriber's %s; its errors:\n%s", want, got)
		}
	}

	if bad, err := nats.Connect(url, nats.UserInfo(NATSSubscriberUser, "guess"), nats.MaxReconnects(0)); err == nil {
		bad.Close()
		t.Error("a wrong password was admitted")
	}
}
