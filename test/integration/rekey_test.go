package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
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
