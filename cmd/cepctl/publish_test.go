package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cepcluster/cep/api"
	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/internal/testutil"
	"github.com/cepcluster/cep/keygroup"
)

func createStream(t testing.TB, js jetstream.JetStream, name string, subjects ...string) jetstream.Stream {
	t.Helper()
	st, err := js.CreateStream(context.Background(), jetstream.StreamConfig{Name: name, Subjects: subjects, Storage: jetstream.FileStorage})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// publishAPI serves a source (subjects "name.>", key expression key) and a
// cluster whose summary names natsURL.
func publishAPI(t testing.TB, name, key, natsURL string, subjects ...string) string {
	if len(subjects) == 0 {
		subjects = []string{name + ".>"}
	}
	return startAPI(t, api.Backends{
		Sources: &fakeSources{GetFunc: func(_ context.Context, r *cepv1.GetSourceRequest) (*cepv1.GetSourceResponse, error) {
			if r.GetName() != name {
				return nil, fmt.Errorf("source %q: %w", r.GetName(), api.ErrNotFound)
			}
			return &cepv1.GetSourceResponse{Source: &cepv1.Source{Name: name, Stream: strings.ToUpper(name), Subjects: subjects, Key: key}}, nil
		}},
		Cluster: &fakeCluster{StatusFunc: func(context.Context, *cepv1.GetStatusRequest) (*cepv1.GetStatusResponse, error) {
			return &cepv1.GetStatusResponse{Summary: &cepv1.ClusterSummary{NatsUrl: natsURL}}, nil
		}},
	})
}

// readAll returns every message of a stream in stream order.
func readAll(t testing.TB, js jetstream.JetStream, stream string, want int) []jetstream.Msg {
	t.Helper()
	ctx := context.Background()
	cons, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var msgs []jetstream.Msg
	for len(msgs) < want {
		batch, err := cons.Fetch(want-len(msgs), jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		n := len(msgs)
		for m := range batch.Messages() {
			msgs = append(msgs, m)
		}
		if len(msgs) == n {
			break
		}
	}
	return msgs
}

// keys are partition keys of every kind: plain, needing encoding, empty,
// and non-strings that KeyString formats.
var publishKeys = []struct {
	value any    // the JSON value of e.user
	token string // the subject token it must get
}{
	{"alice", "alice"},
	{"bob.smith", "bob%2Esmith"},
	{"carol smith", "carol%20smith"},
	{"dave*", "dave%2A"},
	{"eve>", "eve%3E"},
	{"zoë", "zo%C3%AB"},
	{"100%", "100%25"},
	{"", "%"},
	{"日本", "%E6%97%A5%E6%9C%AC"},
	{42, "42"},
	{3.0, "3"},
	{true, "true"},
	{"Under_score-dash", "Under_score-dash"},
}

func TestPublish(t *testing.T) {
	ns := testutil.StartNATS(t, testutil.NATSOptions{})
	_, js := testutil.JetStream(t, ns)
	stream := createStream(t, js, "LOGINS", "logins.>")
	url := publishAPI(t, "logins", "e.user", ns.ClientURL())

	// 1,000 events with bad lines in between; events carry their index.
	var b strings.Builder
	var badLines []int
	line := 0
	addLine := func(s string) { line++; b.WriteString(s + "\n") }
	bad := map[int]string{
		100: `not json`,
		500: `{"seq":-1,"ts":1}`,         // no user: the key does not evaluate
		700: `[1,2]`,                     // not an object
		900: `{"user":{"a":1},"seq":-1}`, // a key that is not a scalar
	}
	const n = 1000
	for i := range n {
		if s, ok := bad[i]; ok {
			addLine(s)
			badLines = append(badLines, line)
		}
		if i == 300 {
			addLine("   ") // blank lines are ignored, not bad
		}
		k := publishKeys[i%len(publishKeys)].value
		ev, _ := json.Marshal(map[string]any{"user": k, "seq": i, "ts": 1000 + i})
		addLine(string(ev))
	}
	file := writeTemp(t, "events.jsonl", b.String())

	r := cepctl(t, url, "publish", "--source", "logins", "-f", file)
	wantLines := fmt.Sprintf("lines %d, %d, %d, %d", badLines[0], badLines[1], badLines[2], badLines[3])
	r.mustFail(t, "4 bad lines skipped ("+wantLines+")")
	if !strings.Contains(r.stdout, "published 1000 events in ") || !strings.Contains(r.stdout, ", 4 skipped") || strings.Contains(r.stdout, "failed") {
		t.Errorf("summary %q", r.stdout)
	}
	for _, l := range badLines {
		if !strings.Contains(r.stderr, fmt.Sprintf("%s: line %d: ", file, l)) {
			t.Errorf("stderr does not describe line %d:\n%s", l, r.stderr)
		}
	}

	info, err := stream.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != n {
		t.Fatalf("stream holds %d messages, want %d", info.State.Msgs, n)
	}
	msgs := readAll(t, js, "LOGINS", n)
	if len(msgs) != n {
		t.Fatalf("read %d messages, want %d", len(msgs), n)
	}
	for i, m := range msgs {
		var ev struct {
			Seq int `json:"seq"`
		}
		if err := json.Unmarshal(m.Data(), &ev); err != nil {
			t.Fatalf("message %d: %v: %s", i, err, m.Data())
		}
		if ev.Seq != i {
			t.Fatalf("message %d carries event %d: not in input order", i, ev.Seq)
		}
		want := "logins." + publishKeys[i%len(publishKeys)].token
		if m.Subject() != want {
			t.Errorf("event %d (user %v) on %q, want %q", i, publishKeys[i%len(publishKeys)].value, m.Subject(), want)
		}
	}
	// The tokens above are the encoding package keygroup documents.
	for _, k := range publishKeys {
		if s, ok := k.value.(string); ok && keygroup.KeyToken(s) != k.token {
			t.Errorf("KeyToken(%q) = %q, want %q", s, keygroup.KeyToken(s), k.token)
		}
	}
}

func TestPublishStdinKeyOverrideAndJSONSummary(t *testing.T) {
	ns := testutil.StartNATS(t, testutil.NATSOptions{})
	_, js := testutil.JetStream(t, ns)
	createStream(t, js, "ORDERS", "orders.>")
	// The cluster reports no NATS URL, and the source has no key: both
	// come from flags.
	url := publishAPI(t, "orders", "", "")
	var in strings.Builder
	for i := range 50 {
		fmt.Fprintf(&in, `{"customer":{"id":"c-%d"},"n":%d}`+"\n", i%5, i)
	}

	r := cepctlEnv(t, nil, in.String(), "--server", url, "publish", "-s", "orders")
	r.mustFail(t, "source orders has no key expression: give one with --key EXPR")
	r = cepctlEnv(t, nil, in.String(), "--server", url, "publish", "-s", "orders", "--key", "e.customer.id")
	r.mustFail(t, "the cluster reports no NATS URL: give one with --nats URL")
	r = cepctlEnv(t, nil, in.String(), "--server", url, "publish", "-s", "orders", "--key", "e.customer.id", "--nats", ns.ClientURL(), "-o", "json").mustOK(t)
	var sum publishResult
	if err := json.Unmarshal([]byte(r.stdout), &sum); err != nil || sum.Published != 50 || sum.Skipped != 0 || sum.Failed != 0 || len(sum.BadLines) != 0 {
		t.Errorf("summary %q: %v", r.stdout, err)
	}
	counts := map[string]int{}
	for _, m := range readAll(t, js, "ORDERS", 50) {
		counts[m.Subject()]++
	}
	if len(counts) != 5 || counts["orders.c-3"] != 10 {
		t.Errorf("subjects %v", counts)
	}

	cepctlEnv(t, nil, "{}\n", "--server", url, "publish", "-s", "orders", "--key", "e.(", "--nats", ns.ClientURL()).mustFail(t, `key expression "e.("`)
}

func TestPublishFailsFast(t *testing.T) {
	ns := testutil.StartNATS(t, testutil.NATSOptions{})
	events := writeTemp(t, "ev.jsonl", `{"user":"a"}`+"\n"+`{"user":"b"}`+"\n")

	t.Run("no stream for the subjects", func(t *testing.T) {
		url := publishAPI(t, "logins", "e.user", ns.ClientURL())
		start := time.Now()
		cepctl(t, url, "publish", "-s", "logins", "-f", events).mustFail(t, "publish to logins.a: ")
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("took %s to fail", d)
		}
	})
	t.Run("source subjects do not cover source.<key>", func(t *testing.T) {
		url := publishAPI(t, "logins", "e.user", ns.ClientURL(), "shop.logins.*", "logins.eu.>")
		cepctl(t, url, "publish", "-s", "logins", "-f", events).mustFail(t, "source logins reads shop.logins.*,logins.eu.>, which does not cover logins.<key>")
	})
	t.Run("unknown source", func(t *testing.T) {
		url := publishAPI(t, "logins", "e.user", ns.ClientURL())
		cepctl(t, url, "publish", "-s", "nope", "-f", events).mustFail(t, `source "nope": api: not found`)
	})
	t.Run("NATS unreachable", func(t *testing.T) {
		url := publishAPI(t, "logins", "e.user", "nats://127.0.0.1:1")
		cepctl(t, url, "publish", "-s", "logins", "-f", events).mustFail(t, "cannot connect to NATS at nats://127.0.0.1:1")
	})
	t.Run("missing input", func(t *testing.T) {
		url := publishAPI(t, "logins", "e.user", ns.ClientURL())
		cepctl(t, url, "publish", "-s", "logins", "-f", filepath.Join(t.TempDir(), "none")).mustFail(t, "read input")
	})
}

// Events the stream refuses are counted and reported, and the command fails.
func TestPublishReportsRejectedEvents(t *testing.T) {
	ns := testutil.StartNATS(t, testutil.NATSOptions{})
	_, js := testutil.JetStream(t, ns)
	if _, err := js.CreateStream(context.Background(), jetstream.StreamConfig{
		Name: "LOGINS", Subjects: []string{"logins.>"}, Storage: jetstream.MemoryStorage,
		MaxMsgs: 10, Discard: jetstream.DiscardNew,
	}); err != nil {
		t.Fatal(err)
	}
	url := publishAPI(t, "logins", "e.user", ns.ClientURL())
	var in strings.Builder
	for i := range 50 {
		fmt.Fprintf(&in, `{"user":"u%d"}`+"\n", i)
	}
	r := cepctlEnv(t, nil, in.String(), "--server", url, "publish", "-s", "logins")
	r.mustFail(t, "40 events not stored (publish to logins.u", "maximum messages exceeded")
	if !strings.Contains(r.stdout, "published 10 events") || !strings.Contains(r.stdout, "40 failed") {
		t.Errorf("summary %q", r.stdout)
	}
}

// Ctrl-C while waiting for more input stops the publish, closing stdin and
// every goroutine (goleak checks the latter at the end).
func TestPublishInterrupted(t *testing.T) {
	ns := testutil.StartNATS(t, testutil.NATSOptions{})
	_, js := testutil.JetStream(t, ns)
	stream := createStream(t, js, "LOGINS", "logins.>")
	url := publishAPI(t, "logins", "e.user", ns.ClientURL())
	pr, pw := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for i := range 600 { // more than one batch, and the pipe stays open
			if _, err := fmt.Fprintf(pw, `{"user":"u%d"}`+"\n", i%7); err != nil {
				return
			}
		}
		// Every event is published while the pipe is still open: a
		// partial batch is not held back waiting for more input.
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			if info, err := stream.Info(ctx); err == nil && info.State.Msgs == 600 {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		cancel()
	}()
	r := cepctlCtx(ctx, t, nil, pr, &bytes.Buffer{}, "--server", url, "publish", "-s", "logins")
	r.mustFail(t, "publish interrupted after 600 events were sent", "context canceled")
	if _, err := pw.Write([]byte("x")); err == nil {
		t.Error("stdin is still open")
	}
}

func TestPublishLongLines(t *testing.T) {
	ns := testutil.StartNATS(t, testutil.NATSOptions{})
	_, js := testutil.JetStream(t, ns)
	stream := createStream(t, js, "LOGINS", "logins.>")
	url := publishAPI(t, "logins", "e.user", ns.ClientURL())
	event := func(size int) string {
		return `{"user":"u","pad":"` + strings.Repeat("x", size) + `"}` + "\n"
	}
	// 300 KB is longer than the read buffer; 2 MB is more than NATS takes.
	in := event(10) + event(300<<10) + event(2<<20) + event(10)
	r := cepctlEnv(t, nil, in, "--server", url, "publish", "-s", "logins").mustFail(t, "1 bad line skipped (line 3)")
	if !strings.Contains(r.stderr, fmt.Sprintf("stdin: line 3: the event has %d bytes, more than the NATS server's maximum payload of 1048576", len(event(2<<20))-1)) {
		t.Errorf("stderr %q", r.stderr)
	}
	if info, err := stream.Info(context.Background()); err != nil || info.State.Msgs != 3 {
		t.Errorf("stream holds %v messages (%v), want 3", info.State.Msgs, err)
	}
	cepctlEnv(t, nil, event(10)+event(17<<20), "--server", url, "publish", "-s", "logins").mustFail(t, "stdin: line 2 is longer than 16 MiB")
}

func TestSubjectsCover(t *testing.T) {
	for _, tc := range []struct {
		subjects []string
		source   string
		want     bool
	}{
		{[]string{"logins.>"}, "logins", true},
		{[]string{"logins.*"}, "logins", true},
		{[]string{">"}, "logins", true},
		{[]string{"*.>"}, "logins", true},
		{[]string{"*.*"}, "logins", true},
		{[]string{"x.>", "logins.>"}, "logins", true},
		{[]string{"logins"}, "logins", false},
		{[]string{"logins.a"}, "logins", false},
		{[]string{"logins.*.x"}, "logins", false},
		{[]string{"logins.>.x"}, "logins", false},
		{[]string{"other.>"}, "logins", false},
		{[]string{"*"}, "logins", false},
		{[]string{"a.b.>"}, "a.b", true},
		{[]string{"a.*.*"}, "a.b", true},
	} {
		if got := subjectsCover(tc.subjects, tc.source); got != tc.want {
			t.Errorf("subjectsCover(%q, %q) = %v, want %v", tc.subjects, tc.source, got, tc.want)
		}
	}
}

// The progress line shows the share of the input read (a bar, when its
// size is known), the events sent and their rate, and is erased at the
// end.
func TestProgress(t *testing.T) {
	if got := progressText(450_000, 3*time.Second); got != "450,000 events  150,000/s" {
		t.Errorf("progress text %q", got)
	}
	if got := progressText(10, 0); got != "10 events  0/s" {
		t.Errorf("progress text at the start %q", got)
	}
	for _, tc := range []struct {
		size, read int64
		want       string
	}{
		{100, 45, " 45% [============>"},
		{100, 200, "100% [==============================]"},
		{0, 5, "7 events"},
	} {
		var sent, read atomic.Int64
		sent.Store(7)
		read.Store(tc.read)
		w := &syncBuffer{}
		stop := startProgress(w, time.Now(), &sent, &read, tc.size)
		testutil.Eventually(t, 5*time.Second, func() error {
			if !strings.Contains(w.String(), "7 events") {
				return fmt.Errorf("no progress yet: %q", w.String())
			}
			return nil
		})
		stop()
		out := w.String()
		if !strings.Contains(out, tc.want) || !strings.Contains(out, "7 events") || !strings.HasSuffix(out, "\x1b[2K\r") {
			t.Errorf("size %d, read %d: progress output %q, want %q, the events and an erased line", tc.size, tc.read, out, tc.want)
		}
		if tc.size == 0 && strings.Contains(out, "%") {
			t.Errorf("a bar for an input of unknown size: %q", out)
		}
	}
}

// BenchmarkPublish publishes 100,000 events (13 keys, some needing
// encoding) to an embedded JetStream server with file storage and reports
// events/s, end to end: API calls, connect, read, decode, key, publish and
// the final acks.
func BenchmarkPublish(b *testing.B) {
	ns := testutil.StartNATS(b, testutil.NATSOptions{})
	_, js := testutil.JetStream(b, ns)
	stream := createStream(b, js, "LOGINS", "logins.>")
	url := publishAPI(b, "logins", "e.user", ns.ClientURL())
	const n = 100_000
	var in strings.Builder
	for i := range n {
		ev, _ := json.Marshal(map[string]any{"user": publishKeys[i%len(publishKeys)].value, "type": "LOGIN", "seq": i, "ts": 1700000000000 + i})
		in.Write(ev)
		in.WriteByte('\n')
	}
	file := filepath.Join(b.TempDir(), "events.jsonl")
	if err := os.WriteFile(file, []byte(in.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		cepctl(b, url, "publish", "-s", "logins", "-f", file).mustOK(b)
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "events/s")
	b.StopTimer()
	if err := stream.Purge(context.Background()); err != nil {
		b.Fatal(err)
	}
}
