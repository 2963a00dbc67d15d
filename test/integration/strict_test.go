package integration

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/cluster"
)

// Events published through JetStream to a strict source that do not fit
// its declared fields are dead-lettered with the field and the reason;
// the pattern's records are the offline engine's over the events that do
// fit (picked by hand: every tenth event spoilt), on a source read
// directly and on one a pattern keyed otherwise reads re-keyed. A strict
// source without fields is refused.
func TestStrictSourceThroughJetStream(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a node")
	}
	tc := newSingle(t, 2*time.Minute, cluster.Config{Shards: 2})
	c, ctx := tc.client(0), tc.ctx
	if _, err := c.sources.CreateSource(ctx, req(&cepv1.CreateSourceRequest{Name: "loose", Key: "e.account", Strict: true})); connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("a strict source without fields: %v, want InvalidArgument", err)
	}
	fields := []*cepv1.SourceField{{Path: "account", Type: "string"}, {Path: "region", Type: "string"},
		{Path: "type", Type: "string"}, {Path: "ts", Type: "integer"}, {Path: "v", Type: "integer", Optional: true}}
	res, err := c.sources.CreateSource(ctx, req(&cepv1.CreateSourceRequest{Name: "bank", Key: "e.account", Fields: fields, Strict: true}))
	if err != nil || !res.Msg.Source.Strict {
		t.Fatalf("create: %v %v", err, res)
	}
	regionSpec := []byte(strings.NewReplacer("name: lfl", "name: lfl-region", "key: e.account", "key: e.region").Replace(string(lflSpec)))
	for _, s := range [][]byte{lflSpec, regionSpec} {
		tc.deploy(c, &cepv1.DeployPatternRequest{Spec: string(s)})
	}
	var all, good []string
	wantReasons := map[string]int{}
	for i, line := range bankEvents(71, 600) {
		if i%10 != 5 {
			all, good = append(all, line), append(good, line)
			continue
		}
		var e map[string]any
		json.Unmarshal([]byte(line), &e)
		switch i % 30 {
		case 5:
			delete(e, "ts")
			wantReasons[`source bank is strict: field "ts" is missing (schema: integer)`]++
		case 15:
			e["ts"] = fmt.Sprint(e["ts"])
			wantReasons[`source bank is strict: field "ts" is string, not integer`]++
		default:
			e["v"] = 1.5
			wantReasons[`source bank is strict: field "v" is number, not integer`]++
		}
		b, _ := json.Marshal(e)
		all = append(all, string(b))
	}
	tc.publish("bank", func(e map[string]any) string { return fmt.Sprint(e["account"]) }, all)
	for name, s := range map[string][]byte{"lfl": lflSpec, "lfl-region": regionSpec} {
		if d := tc.newRecordsDiffer("cep.out."+name, 0, s, good); d != "" {
			t.Fatalf("%s: %s", name, d)
		}
	}
	spoilt := len(all) - len(good)
	got := map[string]int{}
	for _, dl := range tc.waitOutputs("cep.deadletter.bank", spoilt, 30*time.Second) {
		var rec struct {
			Reason string `json:"reason"`
		}
		json.Unmarshal([]byte(dl), &rec)
		got[rec.Reason]++
	}
	// each spoilt event once: dead-lettered where it is read directly,
	// and under the same id by the shard re-keying it
	if fmt.Sprint(got) != fmt.Sprint(wantReasons) {
		t.Fatalf("dead letters by reason %v, want %v", got, wantReasons)
	}
}
