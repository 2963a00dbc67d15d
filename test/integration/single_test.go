package integration

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/cluster"
	"github.com/cepcluster/cep/nfa"
)

// One node: create a source and deploy the example pattern over the API,
// publish the example events to NATS, and get on NATS exactly the records
// the offline engine produces; then restart the node from its data
// directory and check nothing is published twice and processing goes on.
func TestSingleNodeEndToEnd(t *testing.T) {
	tc := newSingle(t, 60*time.Second, cluster.Config{})
	c, ctx := tc.client(0), tc.ctx

	if _, err := c.sources.CreateSource(ctx, req(&cepv1.CreateSourceRequest{Name: "bank", Key: "e.account"})); err != nil {
		t.Fatal(err)
	}
	spec, err := os.ReadFile("../../examples/login-fail-logout.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dep, err := c.patterns.DeployPattern(ctx, req(&cepv1.DeployPatternRequest{Spec: string(spec)}))
	if err != nil {
		t.Fatal(err)
	}
	if dep.Msg.Pattern.Version != 1 || dep.Msg.Pattern.OutputSubject != "cep.out.login-fail-logout" || len(dep.Msg.Warnings) != 0 {
		t.Fatalf("deployed: %+v, warnings %q", dep.Msg.Pattern, dep.Msg.Warnings)
	}
	// a second deploy with the same name is refused
	if _, err := c.patterns.DeployPattern(ctx, req(&cepv1.DeployPatternRequest{Spec: string(spec)})); err == nil || !strings.Contains(err.Error(), "already") {
		t.Fatalf("second deploy: %v", err)
	}
	// an invalid pattern is refused with the stage and field
	if _, err := c.patterns.DeployPattern(ctx, req(&cepv1.DeployPatternRequest{Spec: "name: x\nsource: bank\nstages:\n  - name: a\n    until: e.x == 1\n"})); err == nil || !strings.Contains(err.Error(), `field "until"`) {
		t.Fatalf("invalid deploy: %v", err)
	}

	// validation over the API gives the stage and field without deploying
	v, err := c.patterns.ValidatePattern(ctx, req(&cepv1.ValidatePatternRequest{Spec: "name: x\nsource: bank\nstages:\n  - name: a\n    greedy: true\n"}))
	if err != nil || v.Msg.Valid || v.Msg.Error.Stage != "a" || v.Msg.Error.Field != "greedy" {
		t.Fatalf("validate: %+v %v", v, err)
	}
	// a valid pattern likely to hurt (no key, no window, followedByAny)
	// comes with the engine's warnings
	risky := "name: risky\nsource: bank\nstages:\n  - name: a\n  - name: b\n    contiguity: followedByAny\n"
	p, err := nfa.CompileBytes([]byte(risky))
	if err != nil {
		t.Fatal(err)
	}
	v, err = c.patterns.ValidatePattern(ctx, req(&cepv1.ValidatePatternRequest{Spec: risky}))
	if err != nil || !v.Msg.Valid || len(v.Msg.Warnings) != 3 || !slices.Equal(v.Msg.Warnings, p.Warnings()) {
		t.Fatalf("validate %s: %+v %v; the engine warns\n%s", risky, v, err, strings.Join(p.Warnings(), "\n"))
	}
	if _, err := c.patterns.GetPattern(ctx, req(&cepv1.GetPatternRequest{Name: "nope"})); err == nil || !strings.Contains(err.Error(), "not_found") {
		t.Fatalf("unknown pattern: %v", err)
	}
	// tail the output over the API while events arrive
	tailCtx, stopTail := context.WithCancel(ctx)
	defer stopTail()
	tailed := make(chan *cepv1.Record, 100)
	go func() { // the call returns with the first record
		defer close(tailed)
		tail, err := c.matches.Tail(tailCtx, req(&cepv1.TailRequest{Pattern: "login-fail-logout", Start: cepv1.TailStart_TAIL_START_ALL}))
		if err != nil {
			return
		}
		for tail.Receive() {
			tailed <- tail.Msg()
		}
	}()

	lines := readLines(t, "../../examples/events.jsonl")
	// more events so the watermark passes the example's last ones
	lines = append(lines,
		`{"account":"acc-9","type":"LOGIN","ts":400000}`,
		`{"account":"acc-9","type":"PAYMENT_OK","ts":410000}`)
	tc.publishAndCompare(spec, "cep.out.login-fail-logout", lines, 20*time.Second)
	select {
	case r := <-tailed:
		if r.Type != "match" || r.Pattern != "login-fail-logout" || r.Id == "" || !strings.Contains(string(r.Json), `"key":"acc-1"`) {
			t.Fatalf("tailed record: %+v", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("nothing tailed")
	}
	stopTail()

	// the node's metrics and health endpoints
	for path, want := range map[string]string{
		"/metrics": `cep_events_total{shard="1"}`, "/healthz": "ok", "/readyz": "ready",
	} {
		res, err := http.Get("http://" + tc.nodes[0].APIAddr() + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 200 || !strings.Contains(string(body), want) {
			t.Fatalf("%s: %d %q", path, res.StatusCode, body)
		}
		if path == "/metrics" {
			for _, m := range []string{"cep_raft_apply_seconds_count", `cep_ingest_lag_messages{shard="1",source="bank"} 0`, "cep_matches_total",
				`cep_raft_snapshot_threshold_entries{shard="1"}`, `cep_raft_snapshot_encode_seconds{shard="1"}`} {
				if !strings.Contains(string(body), m) {
					t.Errorf("/metrics lacks %s", m)
				}
			}
		}
	}

	// bad events go to the dead-letter subject with a reason; the node goes on
	tc.publishRaw("bank.acc-5", "not json", `{"account":"acc-5","type":"LOGIN"}`)
	dl := tc.waitOutputs("cep.deadletter.bank", 2, 20*time.Second)
	if !strings.Contains(dl[0], `"text":"not json"`) || !strings.Contains(dl[0], `"reason"`) || !strings.Contains(dl[1], `time e.ts`) {
		t.Fatalf("dead letters: %v", dl)
	}

	// restart from disk: state survives, nothing is re-published
	tc.restart(0)
	more := []string{`{"account":"acc-9","type":"LOGOUT","ts":420000}`, `{"account":"acc-8","type":"LOGIN","ts":430000}`}
	// NATS restarted with the node (embedded): its data dir persisted too
	tc.publish("bank", func(e map[string]any) string { return fmt.Sprint(e["account"]) }, more)
	want2 := withoutIDs(offline(t, spec, append(lines, more...)))
	got := withoutIDs(tc.waitOutputs("cep.out.login-fail-logout", len(want2), 20*time.Second))
	if strings.Join(got, "\n") != strings.Join(want2, "\n") {
		t.Fatalf("after restart:\n got %s\nwant %s", strings.Join(got, "\n     "), strings.Join(want2, "\n     "))
	}
}
