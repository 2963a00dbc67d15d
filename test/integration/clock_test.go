package integration

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/cluster"
)

// quickStartLatency is how long after the last event the README quick
// start's acc-1 match may take on several shards: the shards of the other
// accounts go idle after DefaultIdleTimeout, then the clock crosses the
// shards within a few ClockEvery periods (docs/time.md says "about a
// second"). The bound leaves room for a loaded machine.
const quickStartLatency = cluster.DefaultIdleTimeout + 2*time.Second

// The README quick start (examples/login-fail-logout.yaml over
// examples/events.jsonl) delivers the acc-1 match without any further
// event, on one node with several shards and on three nodes, within
// quickStartLatency of the last event, and the records are the offline
// engine's (`cepctl run`) over the same file. Before the per-source clock,
// acc-1's shard saw only its own events (the latest at 4000) and its
// watermark never passed the logout: no record ever came.
func TestClockQuickStart(t *testing.T) {
	spec, err := os.ReadFile("../../examples/login-fail-logout.yaml")
	if err != nil {
		t.Fatal(err)
	}
	lines := readLines(t, "../../examples/events.jsonl")
	want := withoutIDs(offline(t, spec, lines))
	if len(want) != 1 || !strings.Contains(want[0], `"acc-1"`) {
		t.Fatalf("the offline engine gives %v, not the acc-1 match the README promises", want)
	}
	run := func(t *testing.T, tc *testCluster) {
		c := tc.client(0)
		tc.createBank(c)
		tc.deploy(c, &cepv1.DeployPatternRequest{Spec: string(spec)})
		tc.publish("bank", func(e map[string]any) string { return fmt.Sprint(e["account"]) }, lines)
		last := time.Now()
		got := withoutIDs(tc.outputsOnceThere("cep.out.login-fail-logout", 1, quickStartLatency))
		took := time.Since(last)
		if d := differsFromOffline(got, want, string(spec)); d != "" {
			t.Fatalf("after %v: %s", took.Round(time.Millisecond), d)
		}
		t.Logf("the acc-1 match arrived %v after the last event (at most %v with the wait)", took.Round(time.Millisecond), quickStartLatency)
	}
	t.Run("one node, three shards", func(t *testing.T) {
		run(t, newSingle(t, 90*time.Second, cluster.Config{Shards: 3}))
	})
	t.Run("one node, eight shards", func(t *testing.T) {
		run(t, newSingle(t, 90*time.Second, cluster.Config{Shards: 8}))
	})
	t.Run("three nodes", func(t *testing.T) {
		tc := newPeers(t, 3, 2*time.Minute)
		tc.startAll()
		run(t, tc)
	})
}
