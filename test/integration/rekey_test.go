package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/shard"
	"github.com/cepcluster/cep/snapshot"
)

// On a cluster of several shards, a pattern keyed differently from its
// source would see only the events whose two keys share a shard; until
// re-keying exists it is refused with a message that says so.
func TestDifferentlyKeyedPatternRefusedOnSeveralShards(t *testing.T) {
	n := startNode(t, t.TempDir(), "", 3)
	defer n.Close()
	c := newClients(n.APIAddr())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.sources.CreateSource(ctx, req(&cepv1.CreateSourceRequest{Name: "tx", Key: "e.account"})); err != nil {
		t.Fatal(err)
	}
	_, err := c.patterns.DeployPattern(ctx, req(&cepv1.DeployPatternRequest{Spec: "name: by-user\nsource: tx\nkey: e.user\nstages:\n  - name: a\n"}))
	if err == nil || !strings.Contains(err.Error(), "failed_precondition") || !strings.Contains(err.Error(), `partitioned by "e.account"`) {
		t.Fatalf("differently keyed pattern: %v", err)
	}
	if _, err := c.patterns.DeployPattern(ctx, req(&cepv1.DeployPatternRequest{Spec: "name: by-account\nsource: tx\nkey: e.account\nstages:\n  - name: a\n"})); err != nil {
		t.Fatalf("pattern keyed like its source: %v", err)
	}
}

// An event published under another key's subject is stored in that key's
// block, which the shard owning the event's own key never reads: the shard
// that reads it dead-letters it with the subject to use, and the correctly
// published events around it still match.
func TestEventOnAnotherKeysSubjectIsDeadLettered(t *testing.T) {
	n := startNode(t, t.TempDir(), "", 3)
	defer n.Close()
	c := newClients(n.APIAddr())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.sources.CreateSource(ctx, req(&cepv1.CreateSourceRequest{Name: "tx", Key: "e.account"})); err != nil {
		t.Fatal(err)
	}
	spec := []byte("name: pair\nsource: tx\nkey: e.account\ntime: e.ts\nstages:\n  - name: a\n    where: e.type == \"A\"\n  - name: b\n    where: e.type == \"B\"\n")
	if _, err := c.patterns.DeployPattern(ctx, req(&cepv1.DeployPatternRequest{Spec: string(spec)})); err != nil {
		t.Fatal(err)
	}
	// a key whose key group another shard owns than "acc-0"'s
	shardOf := func(key string) int {
		kg := shard.KeyGroup(key, snapshot.DefaultKeyGroups)
		for s := 0; s < 3; s++ {
			if first, last := snapshot.BlockRange(s, 3, snapshot.DefaultKeyGroups); kg >= first && kg <= last {
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
	publishRaw(t, n.NATSURL(), "tx.acc-0", good[:1]...)
	publishRaw(t, n.NATSURL(), "tx.acc-0", `{"account":"`+other+`","type":"A","ts":1500}`)
	publishRaw(t, n.NATSURL(), "tx.acc-0", good[1:]...)
	dl := waitOutputs(t, n.NATSURL(), "cep.deadletter.tx", 1, 20*time.Second)
	if !strings.Contains(dl[0], "published on another key") || !strings.Contains(dl[0], "publish it on tx."+other) {
		t.Fatalf("dead letter: %s", dl[0])
	}
	want := withoutIDs(offline(t, spec, good))
	got := withoutIDs(waitOutputs(t, n.NATSURL(), "cep.out.pair", len(want), 20*time.Second))
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("matches:\n got %s\nwant %s", strings.Join(got, "\n     "), strings.Join(want, "\n     "))
	}
}
