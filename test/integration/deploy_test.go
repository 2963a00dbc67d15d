package integration

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/nats-io/nats.go/jetstream"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/cluster"
	"github.com/cepcluster/cep/internal/testutil"
)

// TestDeployReturnsOnceShardsRunIt: a pattern deployed while its source is
// already being read sees every event published after DeployPattern
// returned, even when the shards take their time to apply the deployment
// (each shard leader here waits 700 ms before proposing it). Before the
// call waited for the shards, the events logged in that time were not the
// new pattern's.
func TestDeployReturnsOnceShardsRunIt(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a node")
	}
	tc := newSingle(t, 2*time.Minute, cluster.Config{Shards: 4, Testing: &cluster.Testing{ReconcileDelay: 700 * time.Millisecond}})
	c, ctx := tc.client(0), tc.ctx
	tc.createBank(c)
	// a first pattern keeps the shards reading the source
	first := []byte("name: first\nsource: bank\nkey: e.account\nstages:\n  - name: a\n    where: e.type == \"OK\"\n")
	tc.deploy(c, &cepv1.DeployPatternRequest{Spec: string(first)})
	tc.deploy(c, &cepv1.DeployPatternRequest{Spec: string(lflSpec)})
	first1 := bankEvents(11, 1500)
	tc.publishAndCompare(lflSpec, "cep.out.lfl", first1, time.Minute)

	// a deletion returns once no shard runs the pattern: events published
	// next (late ones, which it would report) make no record of it
	lfl := tc.outputCount("cep.out.lfl")
	res, err := c.patterns.DeletePattern(ctx, req(&cepv1.DeletePatternRequest{Name: "lfl"}))
	if err != nil {
		t.Fatal(err)
	}
	if p := res.Msg.PendingShards; len(p) > 0 {
		t.Fatalf("delete returned with shards %v still running the pattern", p)
	}
	second := bankEvents(12, 500)
	tc.publish("bank", func(e map[string]any) string { return fmt.Sprint(e["account"]) }, second)
	// the pattern kept running shows the shards have logged them all
	oks := len(offline(t, first, first1)) + len(offline(t, first, second))
	tc.waitOutputs("cep.out.first", oks, time.Minute)
	if got := tc.outputCount("cep.out.lfl"); got != lfl {
		t.Fatalf("the deleted pattern made %d records after DeletePattern returned", got-lfl)
	}
}

// TestDeployNamesShardsNotRunningIt: when the shards do not apply a
// deployment within the node's deploy wait, DeployPattern returns the
// shards that do not run it yet, and they start it later.
func TestDeployNamesShardsNotRunningIt(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a node")
	}
	tc := newSingle(t, time.Minute, cluster.Config{Shards: 3, Testing: &cluster.Testing{ReconcileDelay: 2 * time.Second}, DeployWait: 200 * time.Millisecond})
	c, ctx := tc.client(0), tc.ctx
	tc.createBank(c)
	res, err := c.patterns.DeployPattern(ctx, req(&cepv1.DeployPatternRequest{Spec: string(lflSpec)}))
	if err != nil {
		t.Fatal(err)
	}
	if p := res.Msg.PendingShards; !slices.Equal(p, []uint32{1, 2, 3}) {
		t.Fatalf("pending shards %v, want [1 2 3]", p)
	}
	// GetPattern says the same until they run it
	got, err := c.patterns.GetPattern(ctx, req(&cepv1.GetPatternRequest{Name: "lfl"}))
	if err != nil || !slices.Equal(got.Msg.PendingShards, []uint32{1, 2, 3}) {
		t.Fatalf("GetPattern right after the deploy: pending %v, %v", got.Msg.GetPendingShards(), err)
	}
	tc.waitApplied(0, 3, "lfl")
	if got, err = c.patterns.GetPattern(ctx, req(&cepv1.GetPatternRequest{Name: "lfl"})); err != nil || len(got.Msg.PendingShards) > 0 {
		t.Fatalf("GetPattern once every shard runs it: pending %v, %v", got.Msg.GetPendingShards(), err)
	}
}

// TestNewPatternStartsAtItsDeployment: a new pattern sees the events
// published after its deployment and none before — whether its source has
// never been read (its stream's history), is read through a derived source
// created for it (the origin's history), or was read until its last pattern
// was deleted (what came while nothing read it).
func TestNewPatternStartsAtItsDeployment(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a node")
	}
	tc := newSingle(t, 2*time.Minute, cluster.Config{Shards: 2})
	c, ctx := tc.client(0), tc.ctx
	tc.createBank(c)
	byAccount := func(e map[string]any) string { return fmt.Sprint(e["account"]) }

	tc.publish("bank", byAccount, bankEvents(21, 400))
	tc.deploy(c, &cepv1.DeployPatternRequest{Spec: string(lflSpec)})
	tc.publishAndCompare(lflSpec, "cep.out.lfl", bankEvents(22, 600), time.Minute)

	// keyed by region: read through a derived source created now, whose
	// origin holds both batches above
	regionSpec := []byte(strings.NewReplacer("name: lfl", "name: lfl-region", "key: e.account", "key: e.region").Replace(string(lflSpec)))
	tc.deploy(c, &cepv1.DeployPatternRequest{Spec: string(regionSpec)})
	tc.publishAndCompare(regionSpec, "cep.out.lfl-region", bankEvents(23, 600), time.Minute)

	// nothing reads the source for a while, then lfl is deployed again
	for _, name := range []string{"lfl", "lfl-region"} {
		if _, err := c.patterns.DeletePattern(ctx, req(&cepv1.DeletePatternRequest{Name: name})); err != nil {
			t.Fatal(err)
		}
	}
	tc.publish("bank", byAccount, bankEvents(24, 400))
	before := tc.outputCount("cep.out.lfl")
	tc.deploy(c, &cepv1.DeployPatternRequest{Spec: string(lflSpec)})
	last := bankEvents(25, 600)
	tc.publish("bank", byAccount, last)
	if d := tc.newRecordsDiffer("cep.out.lfl", before, lflSpec, last); d != "" {
		t.Fatalf("the pattern deployed again differs from the offline engine over the events published after it: %s", d)
	}

	// from its start, a pattern reads the history of a source nothing
	// reads, and is refused on a source another pattern reads
	again := []byte(strings.Replace(string(lflSpec), "name: lfl", "name: lfl-again", 1))
	if _, err := c.patterns.DeployPattern(ctx, req(&cepv1.DeployPatternRequest{Spec: string(again), FromStart: true})); connect.CodeOf(err) != connect.CodeFailedPrecondition ||
		!strings.Contains(err.Error(), `pattern "lfl" reads "bank" already`) {
		t.Fatalf("a pattern from the start of a source another reads: %v", err)
	}
	if _, err := c.sources.CreateSource(ctx, req(&cepv1.CreateSourceRequest{Name: "bank3", Key: "e.account"})); err != nil {
		t.Fatal(err)
	}
	history := bankEvents(28, 400)
	tc.publish("bank3", byAccount, history[:300])
	// (and through a derived source created for it, re-keyed by region)
	all := []byte(strings.NewReplacer("name: lfl", "name: lfl-all", "source: bank", "source: bank3").Replace(string(lflSpec)))
	allRegion := []byte(strings.NewReplacer("name: lfl-region", "name: lfl-all-region", "source: bank", "source: bank3").Replace(string(regionSpec)))
	for _, s := range [][]byte{all, allRegion} {
		res, err := c.patterns.DeployPattern(ctx, req(&cepv1.DeployPatternRequest{Spec: string(s), FromStart: true}))
		if err != nil || len(res.Msg.PendingShards) > 0 || !res.Msg.Pattern.FromStart {
			t.Fatalf("deploy from the start: %v, %+v", err, res.Msg.GetPattern())
		}
	}
	tc.publish("bank3", byAccount, history[300:])
	for name, s := range map[string][]byte{"lfl-all": all, "lfl-all-region": allRegion} {
		if d := tc.newRecordsDiffer("cep.out."+name, 0, s, history); d != "" {
			t.Fatalf("%s, deployed from the start of its source: %s", name, d)
		}
	}

	// an update that reads another source starts on it at the update
	if _, err := c.sources.CreateSource(ctx, req(&cepv1.CreateSourceRequest{Name: "bank2", Key: "e.account"})); err != nil {
		t.Fatal(err)
	}
	tc.publish("bank2", byAccount, bankEvents(26, 400))
	v2 := []byte(strings.Replace(string(lflSpec), "source: bank", "source: bank2", 1))
	up, err := c.patterns.UpdatePattern(ctx, req(&cepv1.UpdatePatternRequest{Spec: string(v2), Policy: cepv1.UpdatePolicy_UPDATE_POLICY_RESET}))
	if err != nil || len(up.Msg.PendingShards) > 0 {
		t.Fatalf("update: %v, pending %v", err, up.Msg.GetPendingShards())
	}
	before = tc.outputCount("cep.out.lfl")
	last = bankEvents(27, 600)
	tc.publish("bank2", byAccount, last)
	if d := tc.newRecordsDiffer("cep.out.lfl", before, v2, last); d != "" {
		t.Fatalf("the update reading another source differs from the offline engine over the events published after it: %s", d)
	}
}

// A source no pattern reads is deleted, with its derived sources and (when
// asked) their streams; created again on new streams that number events
// from 1, it is read from where its patterns are deployed again — the
// positions of the old streams do not skip the new events as re-reads.
func TestSourceDeletedAndCreatedAgain(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a node")
	}
	tc := newSingle(t, 2*time.Minute, cluster.Config{Shards: 2})
	c, ctx := tc.client(0), tc.ctx
	regionSpec := []byte(strings.NewReplacer("name: lfl", "name: lfl-region", "key: e.account", "key: e.region").Replace(string(lflSpec)))
	run := func(seed uint64) {
		t.Helper()
		tc.createBank(c)
		for _, s := range [][]byte{lflSpec, regionSpec} {
			tc.deploy(c, &cepv1.DeployPatternRequest{Spec: string(s)})
		}
		before := map[string]int{}
		for _, name := range []string{"lfl", "lfl-region"} {
			before[name] = tc.outputCount("cep.out." + name)
		}
		lines := bankEvents(seed, 800)
		tc.publish("bank", func(e map[string]any) string { return fmt.Sprint(e["account"]) }, lines)
		for name, s := range map[string][]byte{"lfl": lflSpec, "lfl-region": regionSpec} {
			if d := tc.newRecordsDiffer("cep.out."+name, before[name], s, lines); d != "" {
				t.Fatalf("seed %d: %s", seed, d)
			}
		}
	}
	run(51)
	if _, err := c.sources.DeleteSource(ctx, req(&cepv1.DeleteSourceRequest{Name: "bank"})); connect.CodeOf(err) != connect.CodeFailedPrecondition ||
		!strings.Contains(err.Error(), "pattern(s) lfl, lfl-region") {
		t.Fatalf("deleting a source patterns read: %v", err)
	}
	for _, name := range []string{"lfl", "lfl-region"} {
		if _, err := c.patterns.DeletePattern(ctx, req(&cepv1.DeletePatternRequest{Name: name})); err != nil {
			t.Fatal(err)
		}
	}
	res, err := c.sources.DeleteSource(ctx, req(&cepv1.DeleteSourceRequest{Name: "bank", DeleteStream: true}))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Msg.Sources) != 2 || len(res.Msg.DeletedStreams) != 2 {
		t.Fatalf("deleted %v, streams %v; want bank and its derived source, both streams", res.Msg.Sources, res.Msg.DeletedStreams)
	}
	if _, err := tc.jetStream().Stream(ctx, "CEP_SRC_BANK"); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("the source's stream after the delete: %v", err)
	}
	run(52)
}

// A pattern deployed from the start right after the last pattern reading
// its source was deleted — both changes reaching a shard in one batch —
// still reads the source from its start.
func TestFromStartRightAfterDelete(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a node")
	}
	tc := newSingle(t, 2*time.Minute, cluster.Config{Shards: 2, Testing: &cluster.Testing{ReconcileDelay: 500 * time.Millisecond}, DeployWait: time.Millisecond})
	c, ctx := tc.client(0), tc.ctx
	tc.createBank(c)
	byAccount := func(e map[string]any) string { return fmt.Sprint(e["account"]) }
	if _, err := c.patterns.DeployPattern(ctx, req(&cepv1.DeployPatternRequest{Spec: string(lflSpec)})); err != nil {
		t.Fatal(err)
	}
	tc.waitApplied(0, 2, "lfl")
	lines := bankEvents(61, 600)
	tc.publish("bank", byAccount, lines[:300])
	// both shards have applied those events
	testutil.EventuallyEvery(t, 10*time.Second, poll, func() error {
		var applied float64
		for _, shard := range []string{"1", "2"} {
			v, _ := tc.metricValue(0, "cep_events_total", `shard="`+shard+`"`)
			applied += v
		}
		if applied < 300 {
			return fmt.Errorf("%v of 300 events applied", applied)
		}
		return nil
	})
	// the deploy wait is a millisecond: neither call waits for the shards,
	// which see both changes at once
	if _, err := c.patterns.DeletePattern(ctx, req(&cepv1.DeletePatternRequest{Name: "lfl"})); err != nil {
		t.Fatal(err)
	}
	all := []byte(strings.Replace(string(lflSpec), "name: lfl", "name: lfl-all", 1))
	if _, err := c.patterns.DeployPattern(ctx, req(&cepv1.DeployPatternRequest{Spec: string(all), FromStart: true})); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyEvery(t, 30*time.Second, poll, func() error {
		g, err := c.patterns.GetPattern(ctx, req(&cepv1.GetPatternRequest{Name: "lfl-all"}))
		if err != nil || len(g.Msg.PendingShards) > 0 {
			return fmt.Errorf("lfl-all not running yet: %v %v", err, g.Msg.GetPendingShards())
		}
		return nil
	})
	tc.publish("bank", byAccount, lines[300:])
	if d := tc.newRecordsDiffer("cep.out.lfl-all", 0, all, lines); d != "" {
		t.Fatalf("lfl-all from the start: %s", d)
	}
}
