package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/cluster"
	"github.com/cepcluster/cep/cluster/secret"
	"github.com/cepcluster/cep/internal/testutil"
)

// securedNode starts a one-node cluster with a cluster secret, so with an
// embedded NATS server that has users; the test's own connections are the
// node user's.
func securedNode(t *testing.T, timeout time.Duration, cfg cluster.Config) (*testCluster, secret.Secret) {
	t.Helper()
	sec := secret.Generate()
	cfg.Secret = sec
	tc := newSingle(t, timeout, cfg)
	tc.natsAuth = []nats.Option{nats.UserInfo(cluster.NATSNodeUser, sec.Token(secret.NATSNode))}
	return tc, sec
}

// natsErrors connects to url with opts and collects the errors the server
// sends asynchronously (permission violations).
type natsErrors struct {
	mu   sync.Mutex
	errs []string
}

func (e *natsErrors) add(_ *nats.Conn, _ *nats.Subscription, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.errs = append(e.errs, err.Error())
}

// violated waits until the server reported a permissions violation naming
// subject.
func (e *natsErrors) violated(t *testing.T, subject string) {
	t.Helper()
	testutil.EventuallyEvery(t, 5*time.Second, poll, func() error {
		e.mu.Lock()
		defer e.mu.Unlock()
		for _, s := range e.errs {
			if strings.Contains(strings.ToLower(s), "permissions violation") && strings.Contains(s, `"`+subject+`"`) {
				return nil
			}
		}
		return fmt.Errorf("no permissions violation for %q among %q", subject, e.errs)
	})
}

func dialAs(t *testing.T, url string, opts ...nats.Option) (*nats.Conn, jetstream.JetStream, *natsErrors) {
	t.Helper()
	errs := &natsErrors{}
	nc, err := nats.Connect(url, append(opts, nats.ErrorHandler(errs.add), nats.MaxReconnects(0))...)
	if err != nil {
		t.Fatalf("connect to %s: %v", url, err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js, errs
}

// The embedded NATS server of a cluster with a secret lets nobody in
// anonymously, lets the publisher user the API hands out publish events
// that the cluster processes, and nothing else: no forged output, no
// stream or consumer management, no reading.
func TestNATSPublisherCanOnlyPublish(t *testing.T) {
	tc, sec := securedNode(t, 90*time.Second, cluster.Config{})
	ctx := tc.ctx
	url := tc.natsURL()
	c := tc.deployOnBank(0, lflSpec)

	// anonymous, and wrong passwords: refused at connect
	for _, opts := range [][]nats.Option{
		nil,
		{nats.UserInfo(cluster.NATSPublisherUser, "wrong")},
		{nats.UserInfo(cluster.NATSNodeUser, sec.Token(secret.NATSPublic))},
		{nats.UserInfo(cluster.NATSNodeUser, secret.Generate().Token(secret.NATSNode))},
	} {
		if nc, err := nats.Connect(url, append(opts, nats.MaxReconnects(0))...); err == nil {
			nc.Close()
			t.Fatalf("connected to the embedded NATS with %d options, want an authorization error", len(opts))
		} else if !strings.Contains(strings.ToLower(err.Error()), "authorization") {
			t.Fatalf("connect: %v, want an authorization violation", err)
		}
	}

	// the API hands out the publisher user, with the secret's password
	res, err := c.cluster.GetPublishAccess(ctx, req(&cepv1.GetPublishAccessRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	acc := res.Msg
	if acc.User != cluster.NATSPublisherUser || acc.Password != sec.Token(secret.NATSPublic) || len(acc.NatsUrls) != 1 || acc.NatsUrls[0] != url {
		t.Fatalf("publish access: user %q, urls %v (the node's NATS is %s), password right: %v", acc.User, acc.NatsUrls, url, acc.Password == sec.Token(secret.NATSPublic))
	}
	pub, pjs, perrs := dialAs(t, url, nats.UserInfo(acc.User, acc.Password))

	// the publisher publishes events, and the cluster processes them
	lines := bankEvents(7, 300)
	for _, l := range lines {
		key := l[strings.Index(l, `"account":"`)+11:]
		key = key[:strings.IndexByte(key, '"')]
		if _, err := pjs.Publish(ctx, "bank."+key, []byte(l)); err != nil {
			t.Fatalf("publish as the publisher: %v", err)
		}
	}
	tc.sameAsOffline("lfl", lflSpec, lines)
	matches := tc.outputCount("cep.out.lfl")

	_, njs, _ := dialAs(t, url, tc.natsAuth...)
	out, err := njs.Stream(ctx, cluster.OutputStream)
	if err != nil {
		t.Fatal(err)
	}
	consumersBefore := out.CachedInfo().State.Consumers

	// a forged match on the output subject, and a forged dead letter
	short := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, 2*time.Second) }
	for _, subj := range []string{"cep.out.lfl", "cep.deadletter.bank"} {
		pctx, cancel := short()
		_, err := pjs.Publish(pctx, subj, []byte(`{"type":"match","pattern":"lfl","key":"forged"}`))
		cancel()
		if err == nil {
			t.Fatalf("the publisher published to %s", subj)
		}
		perrs.violated(t, subj)
	}
	// the JetStream API: delete the output stream or a source stream,
	// make a consumer on the output stream, purge, list streams
	for name, try := range map[string]func(context.Context) error{
		"delete CEP_OUT":      func(ctx context.Context) error { return pjs.DeleteStream(ctx, cluster.OutputStream) },
		"delete CEP_SRC_BANK": func(ctx context.Context) error { return pjs.DeleteStream(ctx, "CEP_SRC_BANK") },
		"consumer on CEP_OUT": func(ctx context.Context) error {
			_, err := pjs.CreateOrUpdateConsumer(ctx, cluster.OutputStream, jetstream.ConsumerConfig{AckPolicy: jetstream.AckNonePolicy})
			return err
		},
		"ordered consumer on CEP_OUT": func(ctx context.Context) error {
			cons, err := pjs.OrderedConsumer(ctx, cluster.OutputStream, jetstream.OrderedConsumerConfig{})
			if err == nil {
				_, err = cons.Fetch(1, jetstream.FetchMaxWait(time.Second))
			}
			return err
		},
		"get a message of CEP_SRC_BANK": func(ctx context.Context) error {
			st, err := pjs.Stream(ctx, "CEP_SRC_BANK")
			if err == nil {
				_, err = st.GetMsg(ctx, 1)
			}
			return err
		},
		"purge CEP_SRC_BANK": func(ctx context.Context) error {
			st, err := pjs.Stream(ctx, "CEP_SRC_BANK")
			if err == nil {
				err = st.Purge(ctx)
			}
			return err
		},
	} {
		pctx, cancel := short()
		err := try(pctx)
		cancel()
		if err == nil {
			t.Errorf("the publisher could %s", name)
		}
	}
	perrs.violated(t, "$JS.API.STREAM.DELETE.CEP_OUT")
	// subscriptions outside _INBOX: the output, the node's inbox, anything
	for _, subj := range []string{"cep.out.>", ">", "_CEP_NODE_INBOX.>", "bank.*"} {
		sub, err := pub.SubscribeSync(subj)
		if err != nil {
			t.Fatal(err)
		}
		perrs.violated(t, subj)
		if _, err := sub.NextMsg(200 * time.Millisecond); err == nil {
			t.Errorf("the publisher read a message on %s", subj)
		}
	}

	// nothing changed: both streams are there, with the cluster's records
	// only and the events, and no consumer more on the output stream
	info, err := out.Info(ctx)
	if err != nil {
		t.Fatalf("output stream after the publisher's attempts: %v", err)
	}
	if info.State.Consumers > consumersBefore { // (fewer: a reader of the test's own expired)
		t.Errorf("output stream has %d consumers, %d before the publisher's attempts", info.State.Consumers, consumersBefore)
	}
	if got := tc.outputCount("cep.out.lfl"); got != matches {
		t.Errorf("%d records on cep.out.lfl, %d before the publisher's attempts", got, matches)
	}
	src, err := njs.Stream(ctx, "CEP_SRC_BANK")
	if err != nil {
		t.Fatalf("source stream after the publisher's attempts: %v", err)
	}
	if n := src.CachedInfo().State.Msgs; n != uint64(len(lines)) {
		t.Errorf("source stream holds %d events, %d published", n, len(lines))
	}
	if n := tc.outputCount("cep.deadletter.bank"); n != 0 {
		t.Errorf("%d dead letters for bank, none published by the cluster", n)
	}
}

// A cluster without a secret keeps its embedded NATS open, and says so:
// GetPublishAccess gives the URL and no user.
func TestNATSInsecureStaysOpen(t *testing.T) {
	tc := newSingle(t, 60*time.Second, cluster.Config{Insecure: true})
	res, err := tc.client(0).cluster.GetPublishAccess(tc.ctx, req(&cepv1.GetPublishAccessRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	if res.Msg.User != "" || res.Msg.Password != "" || len(res.Msg.NatsUrls) != 1 {
		t.Fatalf("insecure cluster's publish access: user %q, %d urls", res.Msg.User, len(res.Msg.NatsUrls))
	}
	nc, js := tc.connect() // anonymous
	defer nc.Close()
	if _, err := js.Stream(tc.ctx, cluster.OutputStream); err != nil {
		t.Fatalf("anonymous client on an insecure cluster's NATS: %v", err)
	}
}

var (
	cepctlOnce sync.Once
	cepctlBin  string
	cepctlErr  error
)

// buildCepctl builds cmd/cepctl once for the tests that run it.
func buildCepctl(t *testing.T) string {
	t.Helper()
	cepctlOnce.Do(func() {
		cepctlBin = filepath.Join(filepath.Dir(cepnodeBin), "cepctl")
		if out, err := exec.Command("go", "build", "-o", cepctlBin, "../../cmd/cepctl").CombinedOutput(); err != nil {
			cepctlErr = fmt.Errorf("build cepctl: %v\n%s", err, out)
		}
	})
	if cepctlErr != nil {
		t.Fatal(cepctlErr)
	}
	return cepctlBin
}

// The README's quick start works unchanged on a node whose NATS has users:
// cepctl publish gets the publisher user from the API.
func TestNATSQuickStartPublishes(t *testing.T) {
	bin := buildCepctl(t)
	tc, _ := securedNode(t, 90*time.Second, cluster.Config{})
	server := "http://" + tc.nodes[0].APIAddr()
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(tc.ctx, bin, append([]string{"--server", server}, args...)...)
		cmd.Dir = "../.."
		cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "XDG_CONFIG_HOME=")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("cepctl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	run("source", "create", "bank", "--key", "e.account")
	run("pattern", "deploy", "examples/login-fail-logout.yaml")
	run("publish", "--source", "bank", "-f", "examples/events.jsonl")
	spec, err := os.ReadFile("../../examples/login-fail-logout.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tc.sameAsOffline("login-fail-logout", spec, readLines(t, "../../examples/events.jsonl"))

	// with the publisher's credentials given by hand, from the
	// environment, the same; with a wrong password, refused
	cmd := exec.CommandContext(tc.ctx, bin, "--server", server, "publish", "--source", "bank", "-f", "examples/events.jsonl", "--nats-user", cluster.NATSPublisherUser)
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "NATS_PASSWORD=wrong")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || !strings.Contains(strings.ToLower(string(out)), "authorization") {
		t.Fatalf("cepctl publish with a wrong password: %v\n%s", err, out)
	}
}

// A pattern keyed by something else than its source's key reads a derived
// source the cluster writes; the publisher may not write there, so cannot
// put events into it past the re-keying.
func TestNATSPublisherCannotWriteDerivedSources(t *testing.T) {
	tc, sec := securedNode(t, 90*time.Second, cluster.Config{})
	ctx := tc.ctx
	c := tc.client(0)
	tc.createBank(c)
	tc.deploy(c, &cepv1.DeployPatternRequest{Spec: strings.Replace(string(lflSpec), "key: e.account", "key: e.region", 1)})
	var derived *cepv1.Source
	testutil.EventuallyEvery(t, 10*time.Second, poll, func() error {
		res, err := c.sources.ListSources(ctx, req(&cepv1.ListSourcesRequest{}))
		if err != nil {
			return err
		}
		for _, s := range res.Msg.Sources {
			if s.Origin == "bank" {
				derived = s
				return nil
			}
		}
		return errors.New("no derived source of bank yet")
	})
	_, pjs, perrs := dialAs(t, tc.natsURL(), nats.UserInfo(cluster.NATSPublisherUser, sec.Token(secret.NATSPublic)))
	if _, err := pjs.Publish(ctx, "bank.acc-1", []byte(`{"account":"acc-1","region":"r1","type":"LOGIN","ts":1}`)); err != nil {
		t.Fatalf("publish to the source: %v", err)
	}
	subject := derived.Name + ".r1"
	testutil.EventuallyEvery(t, 10*time.Second, poll, func() error {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		if _, err := pjs.Publish(pctx, subject, []byte(`{"account":"x","region":"r1","type":"LOGIN","ts":2}`)); err == nil {
			return fmt.Errorf("the publisher published to the derived source's %s", subject)
		}
		return nil
	})
	// the embedded server maps a derived subject under _CEP_DENIED, which
	// the publisher may not publish to (cluster's guardDerivedSources)
	perrs.violated(t, "_CEP_DENIED."+subject)
}
