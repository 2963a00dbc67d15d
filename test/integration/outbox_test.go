package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/cluster"
)

// While JetStream does not take the output (here: the output stream is
// gone), a shard's leader stops reading once its outbox holds the limit of
// unpublished records, instead of growing the replicated state with all
// it reads; once the stream is back, everything is published, and the
// output equals the offline engine's, nothing lost or duplicated.
func TestOutboxLimitPausesReading(t *testing.T) {
	const limit = 20
	tc := newSingle(t, 90*time.Second, cluster.Config{IngestBatch: 5, OutboxLimit: limit})
	ctx := tc.ctx
	// every login is a match
	spec := []byte("name: logins\nsource: bank\nkey: e.account\ntime: e.ts\nstages:\n  - name: login\n    where: e.type == \"LOGIN\"\n")
	c := tc.deployOnBank(0, spec)
	js := tc.jetStream()
	if err := js.DeleteStream(ctx, cluster.OutputStream); err != nil {
		t.Fatal(err)
	}
	var lines []string
	for i := 0; i < 300; i++ {
		lines = append(lines, fmt.Sprintf(`{"account":"acc-%d","type":"LOGIN","ts":%d}`, i%7, 1000+i))
	}
	tc.publish("bank", func(e map[string]any) string { return fmt.Sprint(e["account"]) }, lines)

	// reading stops near the limit: what is in flight may pass it, nothing
	// more. The leader checks the applied outbox before each entry of 5
	// events (each a record) and can have six entries unapplied: four
	// queued, one waited for, and one proposed while it waits for room
	time.Sleep(2 * time.Second)
	outbox, events := tc.metric(0, "cep_outbox_records"), tc.metric(0, "cep_events_total")
	if outbox < limit || outbox > limit-1+6*5 {
		t.Fatalf("outbox %v records with a limit of %d", outbox, limit)
	}
	if events >= float64(len(lines)) {
		t.Fatalf("%v of %d events applied: reading did not pause", events, len(lines))
	}
	if p := tc.metric(0, "cep_read_paused", `reason="outbox"`); p != 1 {
		t.Fatalf("cep_read_paused{reason=\"outbox\"} %v while paused", p)
	}
	time.Sleep(time.Second)
	if again := tc.metric(0, "cep_outbox_records"); again > outbox {
		t.Fatalf("the outbox grew from %v to %v while paused", outbox, again)
	}
	// the status shows it
	res, err := c.cluster.ListShards(ctx, req(&cepv1.ListShardsRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Msg.Shards[0].OutboxRecords; float64(got) != outbox {
		t.Fatalf("ListShards reports %d outbox records, /metrics %v", got, outbox)
	}

	// the stream is back: everything is published, exactly once
	if err := cluster.EnsureOutputStream(ctx, js, cluster.OutputLimits{}); err != nil {
		t.Fatal(err)
	}
	want := withoutIDs(offline(t, spec, lines))
	got := withoutIDs(tc.waitOutputs("cep.out.logins", len(want), 30*time.Second))
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("%d records, want %d; the output differs from the offline engine", len(got), len(want))
	}
	time.Sleep(500 * time.Millisecond)
	if extra := tc.outputCount("cep.out.logins"); extra != len(want) {
		t.Fatalf("%d records published, want %d", extra, len(want))
	}
	if p := tc.metric(0, "cep_read_paused", `reason="outbox"`); p != 0 {
		t.Fatalf("cep_read_paused{reason=\"outbox\"} %v after reading resumed", p)
	}
}
