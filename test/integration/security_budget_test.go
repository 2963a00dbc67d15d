package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/cluster"
	"github.com/cepcluster/cep/internal/testutil"
	"github.com/cepcluster/cep/shard"
)

// A few large events of one key, each held by a partial match whose
// window is open, fill a pattern's state up to its bound in bytes (the
// cluster's --max-state-bytes, or the document's lower maxStateBytes) and
// no further: every event past it is dead-lettered naming the bound and
// counted, and the state the shard reports stays within it. A document
// asking for more than the cluster's bound is refused at deploy. Without
// the bound 40 events of ~1 MB were held whole (and 100,000 keys of them
// would be 100 GB).
func TestStateBytesBounded(t *testing.T) {
	const clusterMax, docMax, n, pad = 10_000_000, 3_000_000, 40, 900_000
	tc := newSingle(t, 120*time.Second, cluster.Config{MaxStateBytes: clusterMax})
	c := tc.client(0)
	tc.createBank(c)
	spec := func(name, extra string) string {
		return fmt.Sprintf(`{"name":%q,"source":"bank","key":"e.account","time":"e.ts","within":"1h",%s
  "stages":[{"name":"a","where":"e.type == \"A\""},{"name":"b","where":"e.type == \"B\""}]}`, name, extra)
	}
	_, err := c.patterns.DeployPattern(tc.ctx, req(&cepv1.DeployPatternRequest{Spec: spec("budget-wide", `"maxStateBytes":20000000,`)}))
	if err == nil || !strings.Contains(err.Error(), "--max-state-bytes = 10000000") || !strings.Contains(err.Error(), "docs/limits.md") {
		t.Fatalf("a maxStateBytes over the cluster's: %v", err)
	}
	tc.deploy(c, &cepv1.DeployPatternRequest{Spec: spec("budget", "")})
	tc.deploy(c, &cepv1.DeployPatternRequest{Spec: spec("budget-small", fmt.Sprintf(`"maxStateBytes":%d,`, docMax))})

	lines := make([]string, 0, n)
	for i := range n {
		lines = append(lines, fmt.Sprintf(`{"account":"big","type":"A","ts":%d,"pad":%q}`, 1000+i, strings.Repeat("x", pad)))
	}
	size := len(lines[0])
	tc.publish("bank", func(ev map[string]any) string { return ev["account"].(string) }, lines)

	bounds := map[string]int{"budget": clusterMax, "budget-small": docMax}
	wantRefused := map[string]int{}
	for name, b := range bounds {
		wantRefused[name] = n - b/size
	}
	testutil.EventuallyEvery(t, 90*time.Second, poll, func() error {
		for name, want := range wantRefused {
			if got := tc.metric(0, "cep_pattern_state_bytes_refused_total", fmt.Sprintf(`pattern=%q`, name)); got != float64(want) {
				return fmt.Errorf("%s: %v events refused, want %d", name, got, want)
			}
		}
		return nil
	})
	for name, b := range bounds {
		if got, want := tc.metric(0, "cep_pattern_state_bytes", fmt.Sprintf(`pattern=%q`, name)), float64((b/size)*size); got != want {
			t.Fatalf("%s holds %v bytes, want %v (bound %d)", name, got, want, b)
		}
	}
	for _, sh := range tc.nodes[0].Shards() {
		sh.FSM().View(func(s *shard.State, _ uint64) {
			for _, p := range s.Patterns() {
				if p.StateBytes > p.MaxStateBytes || p.BufferedEvents > int(p.MaxStateBytes)/size {
					t.Errorf("shard %d: %+v", sh.ID(), p)
				}
			}
		})
	}
	// one dead letter per event, listing each pattern that refused it
	dl := tc.waitOutputs("cep.deadletter.bank", wantRefused["budget-small"], 30*time.Second)
	byPattern := map[string]int{}
	for _, r := range refusalsOf(t, dl) {
		if strings.Contains(r.Reason, fmt.Sprintf("past maxStateBytes = %d", bounds[r.Pattern])) {
			byPattern[r.Pattern]++
		}
	}
	for name, want := range wantRefused {
		if byPattern[name] != want {
			t.Fatalf("%d dead letters name %s's bound, want %d: %v", byPattern[name], name, want, byPattern)
		}
	}
}
