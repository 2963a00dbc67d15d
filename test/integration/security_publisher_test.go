package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/cluster"
	"github.com/cepcluster/cep/cluster/secret"
)

// replyAttack publishes, as the publisher, an event to a source subject
// with each of replies as its reply subject, while the node's user
// listens on those subjects: JetStream's pub-ack must not arrive there
// (before, it did: {"stream":"CEP_SRC_BANK","seq":…} on cep.out.<pattern>
// and on a savepoint's object metadata, which it replaced). An ordinary
// publish of the publisher still gets its ack.
func replyAttack(t *testing.T, node, pub *nats.Conn, subject string, replies []string) {
	t.Helper()
	subs := make([]*nats.Subscription, len(replies))
	for i, r := range replies {
		s, err := node.SubscribeSync(r)
		if err != nil {
			t.Fatal(err)
		}
		subs[i] = s
	}
	if err := node.Flush(); err != nil {
		t.Fatal(err)
	}
	for _, r := range replies {
		if err := pub.PublishMsg(&nats.Msg{Subject: subject, Reply: r, Data: []byte(`{"account":"x","type":"LOGIN","ts":1}`)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := pub.Flush(); err != nil {
		t.Fatal(err)
	}
	// the publisher's own ack still comes back (to its inbox): JetStream
	// did answer, and after the attacks', which it answers in order
	pjs, _ := jetstream.New(pub)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := pjs.Publish(ctx, subject, []byte(`{"account":"x","type":"LOGIN","ts":2}`)); err != nil {
		t.Fatalf("the publisher's own publish got no ack: %v", err)
	}
	// (the cluster's own records of the events may arrive there too)
	for i, s := range subs {
		for range 1000 {
			m, err := s.NextMsg(300 * time.Millisecond)
			if err != nil {
				break
			}
			if bytes.Contains(m.Data, []byte(`"stream":`)) {
				t.Errorf("a publish with reply %s wrote there: %s", replies[i], m.Data)
			}
		}
	}
}

// objectIntact checks that the object store bucket's object name still
// reads back as data.
func objectIntact(t *testing.T, js jetstream.JetStream, bucket, name string, data []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	obs, err := js.ObjectStore(ctx, bucket)
	if err != nil {
		t.Fatal(err)
	}
	got, err := obs.GetBytes(ctx, name)
	if err != nil {
		t.Fatalf("object %s of bucket %s after the attack: %v", name, bucket, err)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("object %s of bucket %s changed: %d bytes, %d before", name, bucket, len(got), len(data))
	}
}

// On a node's embedded NATS, the publisher cannot make JetStream write
// through a reply subject: neither a record on cep.out.<pattern> nor a
// savepoint's metadata in the nats:// bucket, which stays readable.
func TestNATSPublisherRepliesStayInItsAccount(t *testing.T) {
	tc, sec := securedNode(t, 90*time.Second, cluster.Config{})
	ctx := tc.ctx
	url := tc.natsURL()
	c := tc.deployOnBank(0, lflSpec)
	lines := bankEvents(3, 60)
	tc.publish("bank", func(e map[string]any) string { return fmt.Sprint(e["account"]) }, lines)
	tc.sameAsOffline("lfl", lflSpec, lines)

	sp, err := c.savepoints.CreateSavepoint(ctx, req(&cepv1.CreateSavepointRequest{Target: "nats://sp"}))
	if err != nil {
		t.Fatal(err)
	}
	node, njs, _ := dialAs(t, url, tc.natsAuth...)
	obs, err := njs.ObjectStore(ctx, "sp")
	if err != nil {
		t.Fatal(err)
	}
	objs, err := obs.List(ctx)
	if err != nil || len(objs) == 0 {
		t.Fatalf("savepoint %s: objects %v, %v", sp.Msg.Savepoint.Location, objs, err)
	}
	name := objs[0].Name
	data, err := obs.GetBytes(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	meta := "$O.sp.M." + base64.URLEncoding.EncodeToString([]byte(name))

	pub, _, _ := dialAs(t, url, nats.UserInfo(cluster.NATSPublisherUser, sec.Token(secret.NATSPublic)))
	replyAttack(t, node, pub, "bank.x", []string{"cep.out.lfl", meta, "cep.deadletter.bank", "$KV.x.y"})

	objectIntact(t, njs, "sp", name, data)
	// the savepoint restores: every part reads and checks
	if _, err := c.savepoints.RestoreSavepoint(ctx, req(&cepv1.RestoreSavepointRequest{Savepoint: &cepv1.RestoreSavepointRequest_Location{Location: sp.Msg.Savepoint.Location}})); err != nil {
		t.Fatalf("restoring the savepoint after the attack: %v", err)
	}
}

// externalNATS runs a nats-server from the configuration `cepnode
// nats-config` writes with args, and returns its URL.
func externalNATS(t *testing.T, sec secret.Secret, args ...string) string {
	t.Helper()
	dir := t.TempDir()
	secFile := filepath.Join(dir, "secret")
	if err := os.WriteFile(secFile, []byte(sec.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "nats.conf")
	cmd := exec.Command(cepnodeBin, append([]string{"nats-config", "--cluster-secret-file", secFile, "--store-dir", filepath.Join(dir, "js"), "--http-port", "0", "--out", conf}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cepnode nats-config: %v: %s", err, out)
	}
	opts, err := server.ProcessConfigFile(conf)
	if err != nil {
		t.Fatalf("nats-server refuses the configuration: %v", err)
	}
	opts.Host, opts.Port, opts.NoLog, opts.NoSigs = "127.0.0.1", -1, true, true
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	return s.ClientURL()
}

// The same on a nats-server configured by `cepnode nats-config`: the
// node user creates a source's stream and a savepoint bucket as a node
// does, and the publisher's replies reach neither the output subject nor
// the bucket.
func TestNATSConfigPublisherRepliesStayInItsAccount(t *testing.T) {
	sec := secret.Generate()
	url := externalNATS(t, sec)
	node, njs, _ := dialAs(t, url, nats.UserInfo(cluster.NATSNodeUser, sec.Token(secret.NATSNode)))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := cluster.EnsureSourceStream(ctx, njs, "bank", 256); err != nil {
		t.Fatal(err)
	}
	obs, err := njs.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: "sp"})
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("savepoint part "), 1000)
	if _, err := obs.PutBytes(ctx, "part-0", data); err != nil {
		t.Fatal(err)
	}
	meta := "$O.sp.M." + base64.URLEncoding.EncodeToString([]byte("part-0"))
	pub, _, _ := dialAs(t, url, nats.UserInfo(cluster.NATSPublisherUser, sec.Token(secret.NATSPublic)))
	replyAttack(t, node, pub, "bank.x", []string{"cep.out.lfl", meta})
	objectIntact(t, njs, "sp", "part-0", data)
}

// rawSubscribe speaks NATS's protocol on a plain connection (so that the
// test process holds nothing per subscription): it subscribes n times
// as user and returns the server's error lines.
func rawSubscribe(t *testing.T, url, user, password string, n int) []string {
	t.Helper()
	conn, err := net.DialTimeout("tcp", strings.TrimPrefix(url, "nats://"), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(60 * time.Second)); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(conn)
	if _, err := r.ReadString('\n'); err != nil { // INFO
		t.Fatal(err)
	}
	w := bufio.NewWriter(conn)
	fmt.Fprintf(w, "CONNECT {\"verbose\":false,\"pedantic\":false,\"user\":%q,\"pass\":%q,\"protocol\":1}\r\n", user, password)
	done := make(chan []string, 1)
	go func() {
		var errs []string
		for {
			l, err := r.ReadString('\n')
			if err != nil || strings.HasPrefix(l, "PONG") {
				done <- errs
				return
			}
			if strings.HasPrefix(l, "-ERR") {
				errs = append(errs, strings.TrimSpace(l))
			}
		}
	}()
	for i := range n {
		fmt.Fprintf(w, "SUB _INBOX.flood.%d %d\r\n", i, i+1)
	}
	fmt.Fprintf(w, "PING\r\n")
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return <-done
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// A publisher cannot take the node's memory with subscriptions: past
// DefaultPublisherLimits.MaxSubscriptions on a connection the embedded
// server refuses them, so 100,000 attempts leave the process's heap
// about where it was (before, each was taken: about 100 MB).
func TestNATSPublisherSubscriptionFloodBounded(t *testing.T) {
	tc, sec := securedNode(t, 90*time.Second, cluster.Config{})
	url := tc.natsURL()
	before := heapInUse()
	errs := rawSubscribe(t, url, cluster.NATSPublisherUser, sec.Token(secret.NATSPublic), 100_000)
	after := heapInUse()
	grew := int64(after) - int64(before)
	t.Logf("100,000 subscription attempts: heap in use %d → %d bytes (%+d), %d errors", before, after, grew, len(errs))
	if len(errs) == 0 || !strings.Contains(strings.ToLower(errs[0]), "maximum subscriptions exceeded") {
		t.Fatalf("the server took 100,000 subscriptions of the publisher (first errors: %.3q); heap grew by %d bytes", errs, grew)
	}
	if grew > 20<<20 {
		t.Fatalf("heap grew by %d bytes over 100,000 refused subscriptions", grew)
	}
}

// The publisher limits of `cepnode nats-config` flags hold on an external
// server: connections past --publisher-max-connections, subscriptions past
// --publisher-max-subscriptions and messages past --publisher-max-payload
// are refused; the node user is not bound by them.
func TestNATSConfigPublisherLimits(t *testing.T) {
	sec := secret.Generate()
	url := externalNATS(t, sec, "--publisher-max-connections", "2", "--publisher-max-subscriptions", "5", "--publisher-max-payload", "4096")
	as := nats.UserInfo(cluster.NATSPublisherUser, sec.Token(secret.NATSPublic))
	var conns []*nats.Conn
	for range 2 {
		nc, err := nats.Connect(url, as, nats.MaxReconnects(0))
		if err != nil {
			t.Fatalf("publisher connection within the limit: %v", err)
		}
		t.Cleanup(nc.Close)
		conns = append(conns, nc)
	}
	if nc, err := nats.Connect(url, as, nats.MaxReconnects(0)); err == nil {
		nc.Close()
		t.Fatal("a third publisher connection was taken (--publisher-max-connections 2)")
	} else if !strings.Contains(strings.ToLower(err.Error()), "maximum account active connections exceeded") {
		t.Fatalf("third connection: %v, want the account's connection limit", err)
	}
	conns[0].Close()
	errs := rawSubscribe(t, url, cluster.NATSPublisherUser, sec.Token(secret.NATSPublic), 6)
	if len(errs) != 1 || !strings.Contains(strings.ToLower(errs[0]), "maximum subscriptions exceeded") {
		t.Fatalf("6 subscriptions with --publisher-max-subscriptions 5: errors %q", errs)
	}
	if err := conns[1].Publish("bank.x", make([]byte, 5000)); err == nil || !strings.Contains(err.Error(), "maximum payload") {
		t.Fatalf("a 5000-byte message with --publisher-max-payload 4096: %v", err)
	}
	node, err := nats.Connect(url, nats.UserInfo(cluster.NATSNodeUser, sec.Token(secret.NATSNode)))
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	if err := node.Publish("cep.out.x", make([]byte, 5000)); err != nil {
		t.Fatalf("the node user is bound by the publisher's payload limit: %v", err)
	}
}
