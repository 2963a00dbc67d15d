package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/cluster"
	"github.com/cepcluster/cep/nfa"
)

// One event stamped at the end of time (ts = MaxInt64) published among
// ordinary ones is dead-lettered on cep.deadletter.<source> with its
// reason, and does not move the shard's watermark: the match completed by
// the events after it arrives, and the node's records and dead letters
// are exactly the offline engine's (nfa.Runner, which `cepctl run`
// drives) over the same input. Before, the event was taken, the shard's
// watermark jumped to MaxInt64 − 1 and every later event of every key came
// out late.
func TestFarFutureEventDeadLettered(t *testing.T) {
	tc := newSingle(t, 120*time.Second, cluster.Config{Shards: 1}) // one shard: one watermark, as offline
	c := tc.client(0)
	tc.createBank(c)
	spec := `{"name":"skew","source":"bank","key":"e.account","time":"e.ts","within":"10s",
	 "stages":[{"name":"a","where":"e.type == 'A'"},{"name":"b","where":"e.type == 'B'","contiguity":"followedBy"}]}`
	tc.deploy(c, &cepv1.DeployPatternRequest{Spec: spec})

	lines := []string{
		`{"account":"x","type":"A","ts":1000}`,
		`{"account":"y","type":"A","ts":9223372036854775807}`,
		`{"account":"x","type":"B","ts":2000}`,
		`{"account":"z","type":"A","ts":3000}`,
		`{"account":"z","type":"B","ts":4000}`,
		`{"account":"w","type":"C","ts":20000}`,
	}
	tc.publish("bank", func(e map[string]any) string { return fmt.Sprint(e["account"]) }, lines)

	p, err := nfa.CompileBytes([]byte(spec))
	if err != nil {
		t.Fatal(err)
	}
	wantRecs, wantDead := offlineLines(t, nfa.NewRunner(p), lines)
	if len(wantRecs) != 2 || strings.Contains(strings.Join(wantRecs, ""), `"late"`) {
		t.Fatalf("offline records, want the matches of x and z:\n%s", strings.Join(wantRecs, "\n"))
	}
	if len(wantDead) != 1 || !strings.Contains(wantDead[0], `"position":2,"reason":"pattern skew: time 9223372036854775807 is too close to the end of the time range: maxFutureSkew = 24h0m0s`) {
		t.Fatalf("offline dead letters:\n%s", strings.Join(wantDead, "\n"))
	}

	got := withoutIDs(tc.waitOutputs("cep.out.skew", len(wantRecs), 30*time.Second))
	if d := differsFromOffline(got, withoutIDs(wantRecs), spec); d != "" {
		t.Fatalf("records: %s", d)
	}
	dead := tc.waitOutputs("cep.deadletter.bank", 1, 30*time.Second)
	if strings.Join(dead, "\n") != strings.Join(wantDead, "\n") {
		t.Fatalf("dead letters on cep.deadletter.bank:\n%s\noffline:\n%s", strings.Join(dead, "\n"), strings.Join(wantDead, "\n"))
	}
}
