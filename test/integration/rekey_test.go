package integration

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/cluster"
	"github.com/cepcluster/cep/internal/testutil"
	"github.com/cepcluster/cep/keygroup"
	"github.com/cepcluster/cep/snapshot"
)

// On a cluster of several shards, a pattern keyed differently from its
// source reads the source re-keyed by its own key (a derived source that
// one shard fills through its outbox): its output equals the offline
// engine's on the same events, as does that of a pattern keyed like the
// source, which reads the source directly.
func TestDifferentlyKeyedPatternIsRekeyed(t *testing.T) {
	tc, c := nodeWithSource(t, 3, 60*time.Second)
	ctx := tc.ctx
	byUser := []byte("name: by-user\nsource: tx\nkey: e.user\ntime: e.ts\nwithin: 50\nstages:\n  - name: a\n    where: e.type == \"A\"\n  - name: b\n    where: e.type == \"B\"\n    contiguity: followedBy\n")
	byAccount := []byte("name: by-account\nsource: tx\nkey: e.account\ntime: e.ts\nwithin: 50\nstages:\n  - name: a\n    where: e.type == \"A\"\n  - name: b\n    where: e.type == \"B\"\n    contiguity: followedBy\n")
	for _, spec := range [][]byte{byUser, byAccount} {
		res, err := c.patterns.DeployPattern(ctx, req(&cepv1.DeployPatternRequest{Spec: string(spec)}))
		if err != nil {
			t.Fatalf("deploy: %v", err)
		}
		reads := res.Msg.Pattern.Reads
		if rekeyed := res.Msg.Pattern.Name == "by-user"; len(reads) != 1 || strings.HasPrefix(reads[0], "tx.k") != rekeyed {
			t.Fatalf("%s reads %v", res.Msg.Pattern.Name, reads)
		}
	}
	var lines []string
	for i := 0; i < 400; i++ {
		lines = append(lines, fmt.Sprintf(`{"account":"acc-%d","user":"u-%d","type":%q,"ts":%d}`, i%7, (i*5)%11, []string{"A", "B", "C"}[(i*7)%3], 1000+i*3))
	}
	// watermarks are per shard: late events of keys in every shard (under
	// both keys) end the run everywhere
	for i := 0; i < 200; i++ {
		lines = append(lines, fmt.Sprintf(`{"account":"filler-%d","user":"filler-%d","type":"NOISE","ts":%d}`, i, i, 100000+i))
	}
	keyOf := func(e map[string]any) string { return fmt.Sprint(e["account"]) }
	tc.publish("tx", keyOf, lines)
	tc.sameAsOffline("by-user", byUser, lines)
	tc.sameAsOffline("by-account", byAccount, lines)
	// the forwarding shard reports how far it is behind the origin
	testutil.EventuallyEvery(t, 10*time.Second, poll, func() error {
		body, err := tc.metrics(0)
		if err != nil {
			return err
		}
		if !regexp.MustCompile(`cep_forward_lag_messages\{shard="\d",source="tx\.k[0-9a-f]{8}"\} 0\n`).Match(body) {
			return fmt.Errorf("no forward lag of 0 in /metrics")
		}
		return nil
	})
	res, err := c.sources.ListSources(ctx, req(&cepv1.ListSourcesRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Msg.Sources) != 2 {
		t.Fatalf("sources: %v (want tx and the one re-keying it by e.user)", res.Msg.Sources)
	}
	for _, s := range res.Msg.Sources {
		if s.Name != "tx" && (s.Origin != "tx" || s.Key != "e.user" || !strings.HasPrefix(s.Name, "tx.k")) {
			t.Errorf("derived source %v", s)
		}
	}
}

// An event published under another key's subject is stored in that key's
// block, which the shard owning the event's own key never reads: the shard
// that reads it dead-letters it with the subject to use, and the correctly
// published events around it still match.
func TestEventOnAnotherKeysSubjectIsDeadLettered(t *testing.T) {
	tc, c := nodeWithSource(t, 3, 30*time.Second)
	ctx := tc.ctx
	spec := []byte("name: pair\nsource: tx\nkey: e.account\ntime: e.ts\nstages:\n  - name: a\n    where: e.type == \"A\"\n  - name: b\n    where: e.type == \"B\"\n")
	if _, err := c.patterns.DeployPattern(ctx, req(&cepv1.DeployPatternRequest{Spec: string(spec)})); err != nil {
		t.Fatal(err)
	}
	// a key whose key group another shard owns than "acc-0"'s
	shardOf := func(key string) int {
		kg := keygroup.OfKey(key, snapshot.DefaultKeyGroups)
		for s := 0; s < 3; s++ {
			if first, last := keygroup.BlockRange(s, 3, snapshot.DefaultKeyGroups); kg >= first && kg <= last {
				return s
			}
		}
		return -1
	}
	other := ""
	for i := 1; other == ""; i++ {
		if k := fmt.Sprintf("acc-%d", i); shardOf(k) != shardOf("acc-0") {
			other = k
		}
	}
	good := []string{`{"account":"acc-0","type":"A","ts":1000}`, `{"account":"acc-0","type":"B","ts":2000}`, `{"account":"acc-0","type":"C","ts":3000}`}
	tc.publishRaw("tx.acc-0", good[:1]...)
	tc.publishRaw("tx.acc-0", `{"account":"`+other+`","type":"A","ts":1500}`)
	tc.publishRaw("tx.acc-0", good[1:]...)
	dl := tc.waitOutputs("cep.deadletter.tx", 1, 20*time.Second)
	if !strings.Contains(dl[0], "published on another key") || !strings.Contains(dl[0], "publish it on tx."+other) {
		t.Fatalf("dead letter: %s", dl[0])
	}
	want := withoutIDs(offline(t, spec, good))
	got := withoutIDs(tc.waitOutputs("cep.out.pair", len(want), 20*time.Second))
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("matches:\n got %s\nwant %s", strings.Join(got, "\n     "), strings.Join(want, "\n     "))
	}
}

// A source can be an existing stream (read whole or through some of its
// subjects) or subjects of the publishers' choosing; neither is stored by
// block, so patterns read them re-keyed. Their output equals the offline
// engine's on the events of the subjects the source names.
func TestSourcesOnExistingStreamsAndCustomSubjects(t *testing.T) {
	tc := newSingle(t, 60*time.Second, cluster.Config{Shards: 3})
	c, ctx := tc.client(0), tc.ctx
	js := tc.jetStream()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"shop.orders.>"}}); err != nil {
		t.Fatal(err)
	}
	// refused: an unknown stream, subjects the stream does not hold, a bad subject
	for _, r := range []*cepv1.CreateSourceRequest{
		{Name: "nope", Stream: "MISSING"},
		{Name: "nope", Stream: "ORDERS", Subjects: []string{"shop.returns.>"}},
		{Name: "nope", Subjects: []string{"a.>.b"}},
	} {
		if _, err := c.sources.CreateSource(ctx, req(r)); err == nil {
			t.Errorf("CreateSource(%v) accepted", r)
		}
	}
	if _, err := c.sources.CreateSource(ctx, req(&cepv1.CreateSourceRequest{Name: "eu-orders", Stream: "ORDERS", Subjects: []string{"shop.orders.eu.>"}, Key: "e.customer"})); err != nil {
		t.Fatal(err)
	}
	if _, err := c.sources.CreateSource(ctx, req(&cepv1.CreateSourceRequest{Name: "clicks", Subjects: []string{"web.clicks.*"}})); err != nil {
		t.Fatal(err)
	}
	orderSpec := []byte("name: orders\nsource: eu-orders\nkey: e.customer\ntime: e.ts\nwithin: 50\nstages:\n  - name: a\n    where: e.type == \"A\"\n  - name: b\n    where: e.type == \"B\"\n    contiguity: followedBy\n")
	clickSpec := []byte("name: clicks\nsource: clicks\nkey: e.session\ntime: e.ts\nstages:\n  - name: a\n    where: e.type == \"A\"\n  - name: b\n    where: e.type == \"B\"\n")
	for _, spec := range [][]byte{orderSpec, clickSpec} {
		if _, err := c.patterns.DeployPattern(ctx, req(&cepv1.DeployPatternRequest{Spec: string(spec)})); err != nil {
			t.Fatal(err)
		}
	}
	var eu, clicks []string
	for i := 0; i < 300; i++ {
		region := []string{"eu", "us"}[i%2]
		line := fmt.Sprintf(`{"customer":"c-%d","type":%q,"ts":%d}`, i%9, []string{"A", "B", "C"}[(i*7)%3], 1000+i*2)
		if _, err := js.Publish(ctx, "shop.orders."+region+".x", []byte(line)); err != nil {
			t.Fatal(err)
		}
		if region == "eu" {
			eu = append(eu, line)
		}
		click := fmt.Sprintf(`{"session":"s-%d","type":%q,"ts":%d}`, i%5, []string{"A", "B"}[i%2], 1000+i)
		if _, err := js.Publish(ctx, fmt.Sprintf("web.clicks.p%d", i%4), []byte(click)); err != nil {
			t.Fatal(err)
		}
		clicks = append(clicks, click)
	}
	for i := 0; i < 100; i++ { // later events for every shard's watermark
		end := fmt.Sprintf(`{"customer":"f-%d","session":"f-%d","type":"END","ts":%d}`, i, i, 100000+i)
		js.Publish(ctx, "shop.orders.eu.x", []byte(end))
		js.Publish(ctx, "web.clicks.end", []byte(end))
		eu, clicks = append(eu, end), append(clicks, end)
	}
	tc.sameAsOffline("orders", orderSpec, eu)
	tc.sameAsOffline("clicks", clickSpec, clicks)
}
