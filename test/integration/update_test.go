package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/cluster"
	"github.com/cepcluster/cep/internal/testutil"
)

// A pattern update states what happens to partial matches in flight: with
// drain the old version finishes them, with migrate they carry over, with
// reset they are dropped.
func TestUpdatePolicies(t *testing.T) {
	const v1 = "name: ab\nsource: s\nkey: e.k\ntime: e.ts\nstages:\n  - name: a\n    where: e.t == \"A\"\n  - name: b\n    where: e.t == \"B\"\n"
	v2 := strings.Replace(v1, `e.t == "B"`, `e.t == "B" || e.t == "C"`, 1)
	for _, tt := range []struct {
		policy cepv1.UpdatePolicy
		want   int
	}{
		{cepv1.UpdatePolicy_UPDATE_POLICY_DRAIN, 1},
		{cepv1.UpdatePolicy_UPDATE_POLICY_MIGRATE, 1},
		{cepv1.UpdatePolicy_UPDATE_POLICY_RESET, 0},
	} {
		t.Run(tt.policy.String(), func(t *testing.T) {
			tc := newSingle(t, 30*time.Second, cluster.Config{})
			c, ctx := tc.client(0), tc.ctx
			if _, err := c.sources.CreateSource(ctx, req(&cepv1.CreateSourceRequest{Name: "s", Key: "e.k"})); err != nil {
				t.Fatal(err)
			}
			if _, err := c.patterns.DeployPattern(ctx, req(&cepv1.DeployPatternRequest{Spec: v1})); err != nil {
				t.Fatal(err)
			}
			keyOf := func(e map[string]any) string { return fmt.Sprint(e["k"]) }
			// x starts a partial match; y's later event moves the watermark past it
			tc.publish("s", keyOf, []string{`{"k":"x","t":"A","ts":10}`, `{"k":"y","t":"N","ts":20}`})
			testutil.EventuallyEvery(t, 10*time.Second, poll, func() error {
				res, err := c.cluster.ListShards(ctx, req(&cepv1.ListShardsRequest{}))
				if err != nil {
					return err
				}
				if res.Msg.Shards[0].PartialMatches != 1 {
					return fmt.Errorf("%d partial matches", res.Msg.Shards[0].PartialMatches)
				}
				return nil
			})
			up, err := c.patterns.UpdatePattern(ctx, req(&cepv1.UpdatePatternRequest{Name: "ab", Spec: v2, Policy: tt.policy}))
			if err != nil || up.Msg.Pattern.Version != 2 {
				t.Fatalf("update: %v %v", up, err)
			}
			// wait until the shard runs version 2, then complete x's match
			testutil.EventuallyEvery(t, 10*time.Second, poll, func() error {
				for _, sh := range tc.nodes[0].Shards() {
					for _, p := range sh.FSM().PatternsSnapshot() {
						if p.Name == "ab" && p.Version == 2 {
							return nil
						}
					}
				}
				return fmt.Errorf("version 2 not applied yet")
			})
			tc.publish("s", keyOf, []string{`{"k":"x","t":"B","ts":30}`, `{"k":"y","t":"N","ts":40}`})
			if tt.want > 0 {
				got := tc.waitOutputs("cep.out.ab", tt.want, 10*time.Second)
				if len(got) != tt.want || !strings.Contains(got[0], `"a":[{"k":"x","t":"A","ts":10}]`) {
					t.Fatalf("records: %v", got)
				}
				return
			}
			time.Sleep(time.Second)
			if got := tc.outputCount("cep.out.ab"); got != 0 {
				t.Fatalf("%d records after a reset, want none", got)
			}
		})
	}
}
