package integration

import (
	"fmt"
	"math/rand/v2"
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

// clockEvents are n events over keys accounts, out of order by up to
// 1.5s of event time (the pattern allows 2s): the offline engine finds no
// event late, and neither may the cluster.
func clockEvents(seed uint64, n, keys int) []string {
	rng := rand.New(rand.NewPCG(seed, 7))
	types := []string{"LOGIN", "PAYMENT_FAILED", "PAYMENT_FAILED", "LOGOUT", "PAYMENT_OK"}
	lines := make([]string, n)
	for i := range lines {
		ts := 100_000 + int64(i)*100 - rng.Int64N(1500)
		lines[i] = fmt.Sprintf(`{"account":"acc-%d","type":%q,"amount":%d,"ts":%d}`, rng.IntN(keys), types[rng.IntN(len(types))], 1+rng.IntN(100), ts)
	}
	return lines
}

// The equality that holds: over events out of order within
// outOfOrderness (none is late offline), published while no shard is idle
// for longer than the pattern's idleTimeout, the records on NATS equal the
// offline engine's (`cepctl run` without the final watermark) as a
// multiset, ids aside, whatever the shard count — matches, timeouts and
// (none) late records alike. Each shard's watermark is at most the
// offline one when it takes an event (the minimum over the shards is at
// most the latest time overall), so nothing the offline engine takes is
// late on a shard; once every shard is idle the clock reaches the offline
// engine's last watermark (the maximum over the shards), so the same
// windows have passed. Before the clock, a shard's watermark followed its
// own events only: on several shards, a shard whose events end earlier
// than the others' kept windows open and matches waiting, so records were
// missing.
func TestClockEqualsOfflineAnyShardCount(t *testing.T) {
	spec := []byte(`{"name":"eq","source":"bank","key":"e.account","time":"e.ts","outOfOrderness":"2s","within":"20s","idleTimeout":"3s",
	 "stages":[{"name":"login","where":"e.type == 'LOGIN'"},
	  {"name":"failed","where":"e.type == 'PAYMENT_FAILED'","oneOrMore":true,"consecutive":true},
	  {"name":"logout","where":"e.type == 'LOGOUT'"}],
	 "emit":{"account":"events('login')[0].account","n":"size(events('failed'))"}}`)
	lines := clockEvents(11, 1500, 40)
	want := offline(t, spec, lines)
	var matches, timeouts int
	for _, r := range want {
		if strings.Contains(r, `"type":"late"`) {
			t.Fatalf("the offline engine finds a late event: the input is not within outOfOrderness: %s", r)
		}
		if strings.Contains(r, `"type":"match"`) {
			matches++
		} else if strings.Contains(r, `"type":"timeout"`) {
			timeouts++
		}
	}
	if matches == 0 || timeouts == 0 {
		t.Fatalf("the offline engine gives %d matches and %d timeouts: the comparison would show little", matches, timeouts)
	}
	t.Logf("offline: %d matches, %d timeouts", matches, timeouts)
	for _, shards := range []int{1, 3, 8} {
		t.Run(fmt.Sprintf("%d shards", shards), func(t *testing.T) {
			tc := newSingle(t, 2*time.Minute, cluster.Config{Shards: shards})
			tc.deployOnBank(0, spec)
			tc.publishAndCompare(spec, "cep.out.eq", lines, 30*time.Second)
		})
	}
}
