package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cepcluster/cep/cluster"
	"github.com/cepcluster/cep/internal/testutil"
)

// A match larger than the NATS server's max payload would be refused at
// every publish and hold the shard's output back for ever. Its summary
// (subject, id, type, key, times, events counted by stage, the reason) goes
// to cep.deadletter.output.<pattern> instead, and the records after it are
// published as usual.
func TestOversizedRecordIsDeadLettered(t *testing.T) {
	base := t.TempDir()
	// a NATS server of the test's own, to set its max payload
	ns := testutil.StartNATS(t, testutil.NATSOptions{StoreDir: filepath.Join(base, "nats"), MaxPayload: 64 << 10})
	tc := newSingle(t, 60*time.Second, cluster.Config{DataDir: filepath.Join(base, "n1"), NATSURL: ns.ClientURL()})
	spec, err := os.ReadFile("../../examples/login-fail-logout.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tc.deployOnBank(0, spec)
	pad := strings.Repeat("x", 600)
	var lines []string
	ts := 1000
	ev := func(acc, typ string) {
		lines = append(lines, fmt.Sprintf(`{"account":%q,"type":%q,"ts":%d,"amount":1,"pad":%q}`, acc, typ, ts, pad))
		ts++
	}
	ev("acc-1", "LOGIN")
	for range 150 { // about 100 KB of events in one match
		ev("acc-1", "PAYMENT_FAILED")
	}
	ev("acc-1", "LOGOUT")
	ev("acc-2", "LOGIN")
	ev("acc-2", "PAYMENT_FAILED")
	ev("acc-2", "LOGOUT")
	ts += 10_000 // the watermark passes them
	ev("acc-3", "OK")
	tc.publish("bank", func(e map[string]any) string { return fmt.Sprint(e["account"]) }, lines)

	out := tc.waitOutputs("cep.out.login-fail-logout", 1, 20*time.Second)
	if len(out) != 1 || !strings.Contains(out[0], `"key":"acc-2"`) {
		t.Fatalf("output: %d records, want acc-2's match: %.200s", len(out), out)
	}
	dl := tc.waitOutputs("cep.deadletter.output.login-fail-logout", 1, 20*time.Second)
	var got struct {
		Subject, ID, Reason, Type, Key string
		Events                         map[string]int
	}
	if err := json.Unmarshal([]byte(dl[0]), &got); err != nil {
		t.Fatal(err)
	}
	if got.Subject != "cep.out.login-fail-logout" || got.ID == "" || got.Type != "match" || got.Key != "acc-1" ||
		!strings.Contains(got.Reason, "max payload of 65536") || got.Events["failed"] != 150 || got.Events["login"] != 1 {
		t.Fatalf("dead letter: %s", dl[0])
	}
	// nothing is left behind in the outbox
	testutil.EventuallyEvery(t, 10*time.Second, poll, func() error {
		if v := tc.metric(0, "cep_outbox_records"); v != 0 {
			return fmt.Errorf("outbox %v", v)
		}
		return nil
	})
}
