package main

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// Against a real node: the context cepctl nats-context prints reaches the
// node's NATS and reads a pattern's records as they are published, and
// nothing of the source's events.
func TestNATSContextAgainstANode(t *testing.T) {
	url := quickStartNode(t)

	var ctx natsCLIContext
	out := cepctl(t, url, "nats-context").mustOK(t).stdout
	if err := json.Unmarshal([]byte(out), &ctx); err != nil || ctx.URL == "" || ctx.User != "cep-subscriber" || ctx.Password == "" {
		t.Fatalf("nats-context printed %s (%v)", out, err)
	}
	nc, err := nats.Connect(ctx.URL, nats.UserInfo(ctx.User, ctx.Password), nats.MaxReconnects(0))
	if err != nil {
		t.Fatalf("the context's user: %v", err)
	}
	defer nc.Close()
	records, err := nc.SubscribeSync("cep.out.>")
	if err != nil {
		t.Fatal(err)
	}
	events, err := nc.SubscribeSync("bank.>")
	if err != nil {
		t.Fatal(err)
	}
	nc.Flush()
	cepctl(t, url, "publish", "--source", "bank", "-f", "../../examples/events.jsonl").mustOK(t)
	m, err := records.NextMsg(30 * time.Second)
	if err != nil {
		t.Fatalf("no record within 30s: %v", err)
	}
	var rec struct{ Type, Pattern, Key string }
	if err := json.Unmarshal(m.Data, &rec); err != nil || rec.Type != "match" || rec.Pattern != "login-fail-logout" || rec.Key != "acc-1" {
		t.Errorf("record %s: %+v %v", m.Data, rec, err)
	}
	if m, err := events.NextMsg(500 * time.Millisecond); err == nil {
		t.Errorf("the subscriber read a source event: %s", m.Data)
	}
}
