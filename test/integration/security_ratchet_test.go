package integration

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/cluster"
	"github.com/cepcluster/cep/nfa"
)

// ingestTime is the part of a dead letter's reason that depends on the
// leader's clock: how far ahead, and of which ingest time
const ratchetStep = int64(23*60+59) * 60_000 // 23h59m

var ingestTime = regexp.MustCompile(`is [0-9hms.]+ ahead of the time it was read at \(ingest time -?[0-9]+\)`)

// ratchetLines are the attack and what follows it: 31 events of key r,
// each 23h59m after the one before from t0 (under the default
// maxFutureSkew of a day each time), then key x's login and logout just
// after the first step, the one a bound against the wall clock lets
// through, and key w's event that moves the watermark past x's window.
func ratchetLines(t0 int64) []string {
	const step = ratchetStep
	var lines []string
	for i := range 31 {
		lines = append(lines, fmt.Sprintf(`{"account":"r","type":"C","ts":%d}`, t0+int64(i)*step))
	}
	return append(lines,
		fmt.Sprintf(`{"account":"x","type":"A","ts":%d}`, t0+step+1000),
		fmt.Sprintf(`{"account":"x","type":"B","ts":%d}`, t0+step+2000),
		fmt.Sprintf(`{"account":"w","type":"C","ts":%d}`, t0+step+20000))
}

const ratchetSpec = `{"name":"ratchet","source":"bank","key":"e.account","time":"e.ts","within":"10s",
 "stages":[{"name":"a","where":"e.type == 'A'"},{"name":"b","where":"e.type == 'B'","contiguity":"followedBy"}]}`

// ratchet publishes the attack to a cluster whose source bank exists and
// checks that the events that follow it are not late: x's match arrives,
// each of the 29 steps past the first is dead-lettered naming the ingest
// bound, and records and dead letters are the offline engine's given the
// wall clock as the ingest time (the decisions are a minute from the
// bound either way). Before, every step was taken, the source's event
// time stood 30 days ahead, and x's events came out late.
func ratchet(t *testing.T, tc *testCluster, shards int, wait time.Duration) {
	c := tc.client(0)
	tc.deploy(c, &cepv1.DeployPatternRequest{Spec: ratchetSpec})
	now := time.Now().UnixMilli()
	lines := ratchetLines(now)
	keyOf := func(e map[string]any) string { return fmt.Sprint(e["account"]) }
	// the attack first, until every shard's clock has taken what it
	// takes of it (the first step at least): the others' too, once idle
	tc.publish("bank", keyOf, lines[:31])
	if shards > 1 {
		// (a shard alone runs on its own events, in log order)
		if clocks := waitClocks(tc, c, "ratchet", now+ratchetStep-1, wait); len(clocks) != shards {
			t.Fatalf("%d shards have clocks, want %d", len(clocks), shards)
		}
	}
	tc.publish("bank", keyOf, lines[31:])

	p, err := nfa.CompileBytes([]byte(ratchetSpec))
	if err != nil {
		t.Fatal(err)
	}
	r := nfa.NewRunner(p)
	r.IngestTime = func() int64 { return now }
	wantRecs, wantDead := offlineLines(t, r, lines)
	for i, d := range wantDead {
		wantDead[i] = ingestTime.ReplaceAllString(d, "is D ahead of the time it was read at (ingest time T)")
	}
	if len(wantRecs) != 1 || !strings.Contains(wantRecs[0], `"type":"match"`) {
		t.Fatalf("offline records, want x's match:\n%s", strings.Join(wantRecs, "\n"))
	}
	if len(wantDead) != 29 || !strings.Contains(wantDead[0], "ahead of the time it was read at (ingest time T), more than maxFutureSkew = 24h0m0s") {
		t.Fatalf("offline dead letters:\n%s", strings.Join(wantDead, "\n"))
	}

	got := withoutIDs(tc.outputsOnceThere("cep.out.ratchet", 1, wait))
	if d := differsFromOffline(got, withoutIDs(wantRecs), ratchetSpec); d != "" {
		t.Fatalf("records after the ratchet, want x's match and nothing late: %s", d)
	}
	dead := tc.waitOutputs("cep.deadletter.bank", len(wantDead), 30*time.Second)
	for i := range dead {
		dead[i] = ingestTime.ReplaceAllString(dead[i], "is D ahead of the time it was read at (ingest time T)")
	}
	if strings.Join(dead, "\n") != strings.Join(wantDead, "\n") {
		t.Fatalf("dead letters on cep.deadletter.bank:\n%s\noffline:\n%s", strings.Join(dead, "\n"), strings.Join(wantDead, "\n"))
	}
}

// The ratchet on one shard: its watermark is the source's event time.
func TestEventTimeRatchetOneShard(t *testing.T) {
	tc := newSingle(t, 90*time.Second, cluster.Config{Shards: 1})
	tc.createBank(tc.client(0))
	ratchet(t, tc, 1, 30*time.Second)
}

// The ratchet on three nodes (three shards): the source's clock crosses
// the shards, so before, one key's events made every shard's later events
// late.
func TestEventTimeRatchetThreeNodes(t *testing.T) {
	tc := newPeers(t, 3, 3*time.Minute)
	tc.startAll()
	tc.createBank(tc.client(0))
	ratchet(t, tc, 3, quickStartLatency+10*time.Second)
}
