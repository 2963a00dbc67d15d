package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/cepcluster/cep/cluster"
)

// A match larger than the NATS server's max payload would be refused at
// every publish and hold the shard's output back for ever. Its summary
// (subject, id, type, key, times, events counted by stage, the reason) goes
// to cep.deadletter.output.<pattern> instead, and the records after it are
// published as usual.
func TestOversizedRecordIsDeadLettered(t *testing.T) {
	base := t.TempDir()
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: filepath.Join(base, "nats"), NoSigs: true, MaxPayload: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	defer ns.Shutdown()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats not ready")
	}
	n := startConfigured(t, cluster.Config{DataDir: filepath.Join(base, "n1"), NATSURL: ns.ClientURL()})
	defer n.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	spec, err := os.ReadFile("../../examples/login-fail-logout.yaml")
	if err != nil {
		t.Fatal(err)
	}
	deployOnBank(t, ctx, n, spec)
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
	publish(t, ns.ClientURL(), "bank", func(e map[string]any) string { return fmt.Sprint(e["account"]) }, lines)

	out := waitOutputs(t, ns.ClientURL(), "cep.out.login-fail-logout", 1, 20*time.Second)
	if len(out) != 1 || !strings.Contains(out[0], `"key":"acc-2"`) {
		t.Fatalf("output: %d records, want acc-2's match: %.200s", len(out), out)
	}
	dl := waitOutputs(t, ns.ClientURL(), "cep.deadletter.output.login-fail-logout", 1, 20*time.Second)
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
	checkFor(t, 10*time.Second, func() error {
		if v := metric(t, n, "cep_outbox_records"); v != 0 {
			return fmt.Errorf("outbox %v", v)
		}
		return nil
	})
}
