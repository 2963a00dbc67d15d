package integration

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/cluster"
	"github.com/cepcluster/cep/internal/testutil"
	"github.com/cepcluster/cep/keygroup"
	"github.com/cepcluster/cep/shard"
	"github.com/cepcluster/cep/watermark"
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
		// a leader that takes over counts its shard busy for the idle
		// timeout: measured once each shard's preferred replica leads
		// (leadership moves there HandOverAfter a start)
		testutil.EventuallyEvery(t, 30*time.Second, poll, func() error {
			res, err := c.cluster.ListShards(tc.ctx, req(&cepv1.ListShardsRequest{ClusterWide: true}))
			if err != nil {
				return err
			}
			for _, s := range res.Msg.GetShards() {
				for _, info := range tc.nodes[0].Meta().Shards {
					if uint32(info.ID) == s.GetId() && (len(info.Replicas) == 0 || info.Replicas[0] != s.GetLeaderNodeId()) {
						return fmt.Errorf("shard %d led by %q, preferred %v", s.GetId(), s.GetLeaderNodeId(), info.Replicas)
					}
				}
			}
			return nil
		})
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

// shardClocks reads every shard's clocks through c, by shard id.
func shardClocks(tc *testCluster, c clients) map[uint32][]*cepv1.SourceClock {
	tc.t.Helper()
	res, err := c.cluster.ListShards(tc.ctx, req(&cepv1.ListShardsRequest{ClusterWide: true}))
	if err != nil {
		tc.t.Fatal(err)
	}
	out := map[uint32][]*cepv1.SourceClock{}
	for _, s := range res.Msg.GetShards() {
		out[s.GetId()] = s.GetClocks()
	}
	return out
}

// waitClocks waits until every shard's clock of pattern on bank is at
// least wm.
func waitClocks(tc *testCluster, c clients, pattern string, wm int64, timeout time.Duration) map[uint32][]*cepv1.SourceClock {
	tc.t.Helper()
	var got map[uint32][]*cepv1.SourceClock
	testutil.EventuallyEvery(tc.t, timeout, poll, func() error {
		got = shardClocks(tc, c)
		for id, cs := range got {
			found := false
			for _, k := range cs {
				if k.GetPattern() == pattern && k.GetSource() == "bank" {
					found = true
					if !k.GetHasWatermark() || k.GetWatermarkMs() < wm {
						return fmt.Errorf("shard %d: clock of %s at %v (has %v), want %d", id, pattern, k.GetWatermarkMs(), k.GetHasWatermark(), wm)
					}
				}
			}
			if !found {
				return fmt.Errorf("shard %d lists no clock of %s", id, pattern)
			}
		}
		return nil
	})
	return got
}

// An event stamped two days ahead of the source's clock, on a running
// cluster of several shards, is dead-lettered with the maxFutureSkew
// bound as its reason, whichever shard takes it, moves no shard's clock,
// and a match completed by later ordinary events still arrives.
func TestClockFarFutureEvent(t *testing.T) {
	spec, err := os.ReadFile("../../examples/login-fail-logout.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tc := newSingle(t, 90*time.Second, cluster.Config{Shards: 3})
	c := tc.deployOnBank(0, spec)
	key := func(e map[string]any) string { return fmt.Sprint(e["account"]) }
	var warm []string
	for i := 0; i < 12; i++ { // every shard takes some
		warm = append(warm, fmt.Sprintf(`{"account":"w-%d","type":"PAYMENT_OK","ts":%d}`, i, 10_000+i))
	}
	tc.publish("bank", key, warm)
	waitClocks(tc, c, "login-fail-logout", 10_000-2000-1, 10*time.Second)

	far := int64(10_011 + 2*24*3600*1000)
	for i := 0; i < 6; i++ { // on several shards
		tc.publish("bank", key, []string{fmt.Sprintf(`{"account":"f-%d","type":"LOGIN","ts":%d}`, i, far)})
	}
	tc.publish("bank", key, []string{
		`{"account":"acc-5","type":"LOGIN","ts":11000}`,
		`{"account":"acc-5","type":"PAYMENT_FAILED","amount":7,"ts":12000}`,
		`{"account":"acc-5","type":"LOGOUT","ts":13000}`,
		`{"account":"w-0","type":"PAYMENT_OK","ts":16000}`,
	})
	dead := tc.waitOutputs("cep.deadletter.bank", 6, 20*time.Second)
	if len(dead) != 6 {
		t.Fatalf("%d dead letters, want the 6 far-future events: %v", len(dead), dead)
	}
	for _, d := range dead {
		if !strings.Contains(d, "maxFutureSkew") || !strings.Contains(d, "ahead of source bank") {
			t.Fatalf("dead letter without the bound as its reason: %s", d)
		}
	}
	got := tc.outputsOnceThere("cep.out.login-fail-logout", 1, quickStartLatency+5*time.Second)
	if len(got) != 1 || !strings.Contains(got[0], `"account":"acc-5"`) || !strings.Contains(got[0], `"type":"match"`) {
		t.Fatalf("records after the far-future events: %v, want acc-5's match", got)
	}
	for id, cs := range shardClocks(tc, c) {
		for _, k := range cs {
			if k.GetWatermarkMs() > 16_000 || k.GetNewestEventMs() > 16_000 {
				t.Fatalf("shard %d: the far-future events moved the clock: %v", id, k)
			}
			// /metrics shows the same clock and the lag behind the
			// shard's newest event
			sh := fmt.Sprintf(`shard="%d"`, id)
			if wm := tc.metric(0, "cep_watermark_ms", sh, `source="bank"`); int64(wm) != k.GetWatermarkMs() {
				t.Errorf("shard %d: cep_watermark_ms %v, the API's clock %d", id, wm, k.GetWatermarkMs())
			}
			lag, ok := tc.metricValue(0, "cep_watermark_lag_ms", sh, `source="bank"`)
			if want := max(0, k.GetNewestEventMs()-k.GetWatermarkMs()); ok != k.GetHasNewestEvent() || int64(lag) != want && ok {
				t.Errorf("shard %d: cep_watermark_lag_ms %v (listed %v), want %d (newest event %v)", id, lag, ok, want, k.GetHasNewestEvent())
			}
			// and in seconds, Prometheus's base unit
			if wm := tc.metric(0, "cep_watermark_timestamp_seconds", sh, `source="bank"`); wm != float64(k.GetWatermarkMs())/1000 {
				t.Errorf("shard %d: cep_watermark_timestamp_seconds %v, the API's clock %d ms", id, wm, k.GetWatermarkMs())
			}
			if sec, ok := tc.metricValue(0, "cep_watermark_lag_seconds", sh, `source="bank"`); ok && sec != lag/1000 {
				t.Errorf("shard %d: cep_watermark_lag_seconds %v, %v ms", id, sec, lag)
			}
		}
	}
	// acc-3 style partial matches wait: the far-future LOGINs took no
	// state, the warm-up keys have none; a LOGIN without logout does
	tc.publish("bank", key, []string{`{"account":"p-1","type":"LOGIN","ts":16001}`, `{"account":"w-1","type":"PAYMENT_OK","ts":26000}`})
	testutil.EventuallyEvery(t, 10*time.Second, poll, func() error {
		for i := 1; i <= 3; i++ {
			sh := fmt.Sprintf(`shard="%d"`, i)
			if age, ok := tc.metricValue(0, "cep_partial_match_oldest_age_ms", sh, `pattern="login-fail-logout"`); ok && age == 26000-2000-1-16001 {
				if sec, _ := tc.metricValue(0, "cep_partial_match_oldest_age_seconds", sh, `pattern="login-fail-logout"`); sec != age/1000 {
					return fmt.Errorf("cep_partial_match_oldest_age_seconds %v, %v ms", sec, age)
				}
				return nil
			}
		}
		return fmt.Errorf("no shard reports p-1's partial match as %d ms old", 26000-2000-1-16001)
	})
}

// A failover of the busy shard's leader while another shard is idle: no
// shard's logged clock ever goes back (sampled through the API all along,
// the logged values themselves), the idle shard does not hold the clock
// back before or after, and the records equal the offline engine's (so no
// timeout fires twice and none is lost).
func TestClockFailoverIdleAndBusy(t *testing.T) {
	tc := newPeers(t, 3, 3*time.Minute)
	tc.startAll()
	spec := []byte(`{"name":"fo","source":"bank","key":"e.account","time":"e.ts","outOfOrderness":"1s","within":"2s","idleTimeout":"1s",
	 "stages":[{"name":"login","where":"e.type == 'LOGIN'"},{"name":"logout","where":"e.type == 'LOGOUT'","contiguity":"followedBy"}]}`)
	c := tc.deployOnBank(0, spec)
	res, err := c.cluster.ListShards(tc.ctx, req(&cepv1.ListShardsRequest{ClusterWide: true}))
	if err != nil {
		t.Fatal(err)
	}
	shards := res.Msg.GetShards()
	if len(shards) < 2 {
		t.Fatalf("%d shards, want several", len(shards))
	}
	shardOf := func(key string) *cepv1.Shard {
		kg := uint32(keygroup.OfKey(key, 256))
		for _, s := range shards {
			if kg >= s.GetKeyGroups().GetFirst() && kg <= s.GetKeyGroups().GetLast() {
				return s
			}
		}
		t.Fatalf("no shard holds key group %d", kg)
		return nil
	}
	busy := shards[0]
	var busyKeys []string
	for i := 0; len(busyKeys) < 4 && i < 1000; i++ {
		if k := fmt.Sprintf("b-%d", i); shardOf(k).GetId() == busy.GetId() {
			busyKeys = append(busyKeys, k)
		}
	}
	key := func(e map[string]any) string { return fmt.Sprint(e["account"]) }
	var all []string
	ts := int64(50_000)
	// every shard takes LOGINs that time out, then only the busy shard
	// takes events: the others go idle
	var first []string
	for i := 0; i < 30; i++ {
		first = append(first, fmt.Sprintf(`{"account":"a-%d","type":"LOGIN","ts":%d}`, i, ts))
		ts += 10
	}
	tc.publish("bank", key, first)
	all = append(all, first...)

	high := map[uint32]int64{} // the highest clock seen per shard
	sample := func(c clients) {
		t.Helper()
		for id, cs := range shardClocks(tc, c) {
			for _, k := range cs {
				if !k.GetHasWatermark() {
					continue
				}
				if k.GetWatermarkMs() < high[id] {
					t.Fatalf("shard %d: clock went back from %d to %d", id, high[id], k.GetWatermarkMs())
				}
				high[id] = k.GetWatermarkMs()
			}
		}
	}
	round := func(c clients, n int) {
		t.Helper()
		var lines []string
		for i := 0; i < n; i++ {
			typ := "LOGIN"
			if i%2 == 1 {
				typ = "LOGOUT"
			}
			lines = append(lines, fmt.Sprintf(`{"account":%q,"type":%q,"ts":%d}`, busyKeys[i%len(busyKeys)], typ, ts))
			ts += 150
		}
		tc.publish("bank", key, lines)
		all = append(all, lines...)
		sample(c)
	}
	deadline := time.Now().Add(20 * time.Second)
	for i := 0; i < 15 && time.Now().Before(deadline); i++ { // past the idle timeout
		round(c, 8)
		time.Sleep(200 * time.Millisecond) // the publisher's pace, not a synchronisation
	}
	// the idle shards no longer hold it back: every clock passes the
	// first LOGINs' window
	waitClocks(tc, c, "fo", 50_000+2000, 10*time.Second)
	sample(c)

	leader := -1
	for i, cfg := range tc.cfgs {
		if cfg.NodeID == busy.GetLeaderNodeId() {
			leader = i
		}
	}
	if leader < 0 {
		t.Fatalf("busy shard %d has no leader node (%q)", busy.GetId(), busy.GetLeaderNodeId())
	}
	if err := tc.stop(leader); err != nil {
		t.Fatal(err)
	}
	other := tc.client((leader + 1) % len(tc.nodes))
	for i := 0; i < 15 && time.Now().Before(deadline.Add(20*time.Second)); i++ {
		round(other, 8)
		time.Sleep(200 * time.Millisecond)
	}
	before := high[busy.GetId()]
	waitClocks(tc, other, "fo", ts-150-1000-1, 20*time.Second)
	sample(other)
	if high[busy.GetId()] <= before {
		t.Fatalf("the busy shard's clock did not move after the failover: %d", high[busy.GetId()])
	}
	tc.sameAsOffline("fo", spec, all)
}

// How long a watermark takes to cross the shards: each round publishes
// one event per shard at a new time T (the newest of every shard, so the
// source's clock can reach T − outOfOrderness − 1) and measures, from the
// publish of the last one, until every shard has logged that clock
// (read from the replicas' state). Logged as the figures BENCHMARKS.md
// quotes; the median must stay under a second on loopback.
func TestClockLatency(t *testing.T) {
	const shards, rounds = 3, 30
	tc := newSingle(t, 2*time.Minute, cluster.Config{Shards: shards})
	spec := []byte(`{"name":"lat","source":"bank","key":"e.account","time":"e.ts","outOfOrderness":"1s","within":"1s",
	 "stages":[{"name":"a","where":"e.type == 'A'"},{"name":"b","where":"e.type == 'B'"}]}`)
	tc.deployOnBank(0, spec)
	// one key per shard
	res, err := tc.client(0).cluster.ListShards(tc.ctx, req(&cepv1.ListShardsRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, s := range res.Msg.GetShards() {
		for i := 0; i < 1000; i++ {
			k := fmt.Sprintf("k-%d", i)
			if kg := uint32(keygroup.OfKey(k, 256)); kg >= s.GetKeyGroups().GetFirst() && kg <= s.GetKeyGroups().GetLast() {
				keys = append(keys, k)
				break
			}
		}
	}
	if len(keys) != shards {
		t.Fatalf("keys %v for %d shards", keys, shards)
	}
	nc, js := tc.connect()
	defer nc.Close()
	lowest := func() int64 {
		lo := watermark.MaxTime
		for _, sh := range tc.nodes[0].Shards() {
			sh.FSM().View(func(s *shard.State, _ uint64) {
				for _, c := range s.Clocks() {
					lo = min(lo, c.Clock)
				}
			})
		}
		return lo
	}
	var took []time.Duration
	for r := 0; r < rounds; r++ {
		ts := int64(1_000_000 + r*10_000)
		for _, k := range keys {
			if _, err := js.Publish(tc.ctx, "bank."+k, []byte(fmt.Sprintf(`{"account":%q,"type":"C","ts":%d}`, k, ts))); err != nil {
				t.Fatal(err)
			}
		}
		sent := time.Now()
		want := ts - 1000 - 1
		testutil.EventuallyEvery(t, 10*time.Second, time.Millisecond, func() error {
			if lo := lowest(); lo < want {
				return fmt.Errorf("round %d: lowest clock %d, want %d", r, lo, want)
			}
			return nil
		})
		took = append(took, time.Since(sent))
	}
	slices.Sort(took)
	med, p90, worst := took[len(took)/2], took[len(took)*9/10], took[len(took)-1]
	t.Logf("watermark across %d shards, %d rounds: median %v, p90 %v, max %v (ClockEvery %v)", shards, rounds,
		med.Round(time.Millisecond), p90.Round(time.Millisecond), worst.Round(time.Millisecond), 50*time.Millisecond)
	if med > time.Second {
		t.Fatalf("median latency %v, over a second", med)
	}
}

// A publisher may not forge the shards' clock reports: a report claiming
// every shard far ahead, published as the publisher user, is refused by
// NATS (a permissions violation) and moves no shard's clock. Allowed, it
// would have made every shard's clock jump: each leader takes the other
// shards' reports as they come.
func TestClockForgedReportRefused(t *testing.T) {
	tc, _ := securedNode(t, 90*time.Second, cluster.Config{Shards: 3})
	spec, err := os.ReadFile("../../examples/login-fail-logout.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c := tc.deployOnBank(0, spec)
	res, err := c.cluster.GetPublishAccess(tc.ctx, req(&cepv1.GetPublishAccessRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	pub, _, perrs := dialAs(t, tc.natsURL(), nats.UserInfo(res.Msg.User, res.Msg.Password))
	tc.publish("bank", func(e map[string]any) string { return fmt.Sprint(e["account"]) }, []string{`{"account":"acc-1","type":"LOGIN","ts":1000}`})
	for id := 1; id <= 3; id++ {
		forged := fmt.Sprintf(`{"shard":%d,"clocks":[{"pattern":"login-fail-logout","source":"bank","wm":1000000000000}]}`, id)
		if err := pub.Publish(cluster.ClockSubjectRoot+"bank", []byte(forged)); err != nil {
			t.Fatal(err)
		}
	}
	if err := pub.Flush(); err != nil {
		t.Fatal(err)
	}
	// the shards go idle and the clock reaches what the event showed, no more
	waitClocks(tc, c, "login-fail-logout", 1000-2000-1, 10*time.Second)
	testutil.EventuallyEvery(t, 10*time.Second, poll, func() error {
		for id, cs := range shardClocks(tc, c) {
			for _, k := range cs {
				if !k.GetIdle() {
					return fmt.Errorf("shard %d not idle yet", id)
				}
			}
		}
		return nil
	})
	time.Sleep(200 * time.Millisecond) // a few report rounds, for a clock that would move
	for id, cs := range shardClocks(tc, c) {
		for _, k := range cs {
			if k.GetWatermarkMs() > 1000 {
				t.Fatalf("shard %d: a forged report moved the clock to %d", id, k.GetWatermarkMs())
			}
		}
	}
	perrs.violated(t, cluster.ClockSubjectRoot+"bank")
}
