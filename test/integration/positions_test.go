package integration

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/cluster"
	"github.com/cepcluster/cep/internal/testutil"
	"github.com/cepcluster/cep/snapshot"
)

// positionsCluster is a one-node cluster with its own embedded NATS
// server (a fresh cluster: its streams number from 1) and data directory,
// whose savepoints go to dir; with the cluster secret of from, when given
// (a cluster restores only savepoints sealed by its own secret).
func positionsCluster(t *testing.T, dir string, from ...*testCluster) (*testCluster, clients) {
	t.Helper()
	tc := newCluster(t, 3*time.Minute)
	for _, f := range from {
		tc.secret = f.secret
	}
	i := tc.addOne(cluster.Config{DataDir: filepath.Join(tc.base, "data"), SavepointDir: dir, Shards: 1})
	return tc, tc.client(i)
}

// recordsByID reads the pattern's records of every cluster, each record
// once: a record in the outbox at the savepoint is published by the
// cluster restoring it too, under the same id.
func recordsByID(t *testing.T, subject string, tcs ...*testCluster) []string {
	t.Helper()
	seen := map[string]bool{}
	var out []string
	for _, tc := range tcs {
		for _, r := range tc.outputs(subject) {
			var rec struct {
				ID string `json:"id"`
			}
			if err := json.Unmarshal([]byte(r), &rec); err != nil || rec.ID == "" {
				t.Fatalf("record without an id: %s (%v)", r, err)
			}
			if !seen[rec.ID] {
				seen[rec.ID] = true
				out = append(out, r)
			}
		}
	}
	return withoutIDs(out)
}

// waitSame waits until the records of the clusters together are want
// (the offline engine's over the events they applied).
func waitSame(t *testing.T, want []string, what string, tcs ...*testCluster) {
	t.Helper()
	testutil.EventuallyEvery(t, 60*time.Second, 200*time.Millisecond, func() error {
		if d := differsFromOffline(recordsByID(t, "cep.out.lfl", tcs...), want, ""); d != "" {
			return fmt.Errorf("%s: %s", what, d)
		}
		return nil
	})
	time.Sleep(500 * time.Millisecond) // a record too many would show
	got := recordsByID(t, "cep.out.lfl", tcs...)
	if d := differsFromOffline(got, want, string(lflSpec)); d != "" {
		t.Fatalf("%s: the records differ from the offline engine's: %s", what, d)
	}
}

// A savepoint taken on cluster A and restored into a fresh cluster (its
// own NATS, whose stream numbers from 1): by default the restore fails
// naming the source and both streams, and changes nothing; with
// from-start every event published to the new cluster is applied; keep
// is what restores did before, skipping as many of the new stream's first
// events as A had applied; from-time reads from the first message stored
// at or after the time given. Each is checked against the offline engine
// over exactly the events that should have been applied.
func TestPositionsRestoreIntoFreshCluster(t *testing.T) {
	spDir := t.TempDir()
	keyOf := func(e map[string]any) string { return fmt.Sprint(e["account"]) }
	all := bankEvents(11, 1500)
	core, filler := all[:1500], all[1500:]
	const n1 = 500

	a, ca := positionsCluster(t, spDir)
	if _, err := ca.sources.CreateSource(a.ctx, req(&cepv1.CreateSourceRequest{Name: "bank", Key: "e.account"})); err != nil {
		t.Fatal(err)
	}
	a.deploy(ca, &cepv1.DeployPatternRequest{Spec: string(lflSpec)})
	a.publish("bank", keyOf, core[:n1])
	var sp *cepv1.Savepoint
	testutil.EventuallyEvery(t, 30*time.Second, 100*time.Millisecond, func() error {
		res, err := ca.savepoints.CreateSavepoint(a.ctx, req(&cepv1.CreateSavepointRequest{Target: "dir://" + spDir}))
		if err != nil {
			return err
		}
		sp = res.Msg.Savepoint
		if len(sp.SourcePositions) != 1 || sp.SourcePositions[0].Sequence != n1 {
			return fmt.Errorf("positions %v, want bank at %d", sp.SourcePositions, n1)
		}
		return nil
	})
	saved := sp.SourcePositions[0]
	if saved.StreamCreated == nil {
		t.Fatalf("the savepoint does not record the stream's identity: %v", saved)
	}
	restore := func(c clients, mapping cepv1.PositionMapping, from *timestamppb.Timestamp) (*cepv1.RestoreSavepointResponse, error) {
		res, err := c.savepoints.RestoreSavepoint(a.ctx, req(&cepv1.RestoreSavepointRequest{
			Savepoint: &cepv1.RestoreSavepointRequest_Location{Location: sp.Location}, Positions: mapping, PositionsFrom: from}))
		if err != nil {
			return nil, err
		}
		if len(res.Msg.PendingShards) > 0 {
			t.Fatalf("shards %v did not restore", res.Msg.PendingShards)
		}
		return res.Msg, nil
	}
	created := func(tc *testCluster) time.Time {
		st, err := tc.jetStream().Stream(tc.ctx, saved.Stream)
		if err != nil {
			t.Fatal(err)
		}
		return st.CachedInfo().Created
	}

	t.Run("default refuses", func(t *testing.T) {
		b, cb := positionsCluster(t, spDir, a)
		// the same source as A's, so the stream exists before the restore
		if _, err := cb.sources.CreateSource(b.ctx, req(&cepv1.CreateSourceRequest{Name: "bank", Key: "e.account"})); err != nil {
			t.Fatal(err)
		}
		_, err := restore(cb, cepv1.PositionMapping_POSITION_MAPPING_UNSPECIFIED, nil)
		var msg string
		if ce := (*connect.Error)(nil); errors.As(err, &ce) {
			msg = ce.Message()
		}
		want := []string{`source "bank"`, snapshot.StreamIdentity(saved.Stream, saved.StreamCreated.AsTime().UnixNano()),
			snapshot.StreamIdentity(saved.Stream, created(b).UnixNano()), "from-start"}
		if connect.CodeOf(err) != connect.CodeFailedPrecondition || strings.Contains(msg, "\n") || !containsAll(msg, want) {
			t.Fatalf("restore onto another stream: %v, want FailedPrecondition in one line naming %q", err, want)
		}
		if l, err := cb.patterns.ListPatterns(b.ctx, req(&cepv1.ListPatternsRequest{})); err != nil || len(l.Msg.Patterns) != 0 {
			t.Fatalf("the refused restore changed the cluster: %v %v", l, err)
		}
	})

	// a cluster of another secret takes the savepoint only as unsealed
	t.Run("another secret", func(t *testing.T) {
		b, cb := positionsCluster(t, spDir)
		if _, err := cb.sources.CreateSource(b.ctx, req(&cepv1.CreateSourceRequest{Name: "bank", Key: "e.account"})); err != nil {
			t.Fatal(err)
		}
		_, err := restore(cb, cepv1.PositionMapping_POSITION_MAPPING_FROM_START, nil)
		if connect.CodeOf(err) != connect.CodeFailedPrecondition || !strings.Contains(err.Error(), "MAC does not match") || !strings.Contains(err.Error(), sp.Id+"-shard-1") {
			t.Fatalf("restore of another cluster's savepoint: %v, want FailedPrecondition naming the part and its MAC", err)
		}
		if l, err := cb.patterns.ListPatterns(b.ctx, req(&cepv1.ListPatternsRequest{})); err != nil || len(l.Msg.Patterns) != 0 {
			t.Fatalf("the refused restore changed the cluster: %v %v", l, err)
		}
		res, err := cb.savepoints.RestoreSavepoint(b.ctx, req(&cepv1.RestoreSavepointRequest{
			Savepoint: &cepv1.RestoreSavepointRequest_Location{Location: sp.Location}, Positions: cepv1.PositionMapping_POSITION_MAPPING_FROM_START, Unsealed: true}))
		if err != nil || len(res.Msg.PendingShards) > 0 {
			t.Fatalf("unsealed restore of another cluster's savepoint: %v", err)
		}
	})

	t.Run("from-start", func(t *testing.T) {
		b, cb := positionsCluster(t, spDir, a)
		if _, err := cb.sources.CreateSource(b.ctx, req(&cepv1.CreateSourceRequest{Name: "bank", Key: "e.account"})); err != nil {
			t.Fatal(err)
		}
		// what B's stream holds before the restore is read too
		b.publish("bank", keyOf, core[n1:n1+200])
		res, err := restore(cb, cepv1.PositionMapping_POSITION_MAPPING_FROM_START, nil)
		if err != nil {
			t.Fatal(err)
		}
		if p := res.SourcePositions; len(p) != 1 || p[0].Sequence != 0 || !p[0].StreamCreated.AsTime().Equal(created(b)) {
			t.Fatalf("positions after the restore: %v", p)
		}
		b.publish("bank", keyOf, concat(core[n1+200:], filler))
		want := withoutIDs(offline(t, lflSpec, concat(core, filler)))
		waitSame(t, want, "from-start", a, b)
	})

	t.Run("keep", func(t *testing.T) {
		c, cc := positionsCluster(t, spDir, a)
		if _, err := cc.sources.CreateSource(c.ctx, req(&cepv1.CreateSourceRequest{Name: "bank", Key: "e.account"})); err != nil {
			t.Fatal(err)
		}
		res, err := restore(cc, cepv1.PositionMapping_POSITION_MAPPING_KEEP, nil)
		if err != nil {
			t.Fatal(err)
		}
		if p := res.SourcePositions; len(p) != 1 || p[0].Sequence != n1 {
			t.Fatalf("positions after the restore: %v", p)
		}
		c.publish("bank", keyOf, concat(core[n1:], filler))
		// the new stream's first n1 events are taken for A's and skipped
		want := withoutIDs(offline(t, lflSpec, concat(core[:n1], core[2*n1:], filler)))
		if !differs(want, withoutIDs(offline(t, lflSpec, concat(core, filler)))) {
			t.Fatal("the events skipped change no record: the test would show nothing")
		}
		waitSame(t, want, "keep", a, c)
	})

	t.Run("from-time", func(t *testing.T) {
		d, cd := positionsCluster(t, spDir, a)
		if _, err := cd.sources.CreateSource(d.ctx, req(&cepv1.CreateSourceRequest{Name: "bank", Key: "e.account"})); err != nil {
			t.Fatal(err)
		}
		const before = 300 // published to D before the time given
		d.publish("bank", keyOf, core[n1:n1+before])
		st, err := d.jetStream().Stream(d.ctx, saved.Stream)
		if err != nil {
			t.Fatal(err)
		}
		last, err := st.GetMsg(d.ctx, st.CachedInfo().State.LastSeq)
		if err != nil {
			t.Fatal(err)
		}
		from := last.Time.Add(time.Microsecond)
		testutil.Eventually(t, 5*time.Second, func() error {
			if !time.Now().After(from) {
				return fmt.Errorf("the clock has not passed %v", from)
			}
			return nil
		})
		d.publish("bank", keyOf, concat(core[n1+before:], filler))
		res, err := restore(cd, cepv1.PositionMapping_POSITION_MAPPING_FROM_TIME, timestamppb.New(from))
		if err != nil {
			t.Fatal(err)
		}
		if p := res.SourcePositions; len(p) != 1 || p[0].Sequence != before {
			t.Fatalf("positions after the restore: %v, want bank after %d", p, before)
		}
		want := withoutIDs(offline(t, lflSpec, concat(core[:n1], core[n1+before:], filler)))
		waitSame(t, want, "from-time", a, d)
	})
}

func containsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

func differs(a, b []string) bool { return strings.Join(a, "\n") != strings.Join(b, "\n") }

// A source stream deleted and created again behind the cluster's back
// numbers its messages from 1, below the positions the shards applied:
// read, its first events would be skipped as re-reads. The shard leaders
// stop reading it instead, and say so (cep_read_paused{reason="stream"},
// the shard's status); a savepoint restored with from-start then reads the
// new stream whole, and the output is the offline engine's over every
// event published, none skipped, none twice.
func TestPositionsStreamCreatedAnew(t *testing.T) {
	spDir := t.TempDir()
	tc := newSingle(t, 3*time.Minute, cluster.Config{StreamCheckEvery: 100 * time.Millisecond, SavepointDir: spDir, Shards: 2})
	ctx := tc.ctx
	c := tc.deployOnBank(0, lflSpec)
	keyOf := func(e map[string]any) string { return fmt.Sprint(e["account"]) }
	all := bankEvents(13, 1500)
	core, filler := all[:1500], all[1500:]
	const n1 = 300
	tc.publish("bank", keyOf, core[:n1])
	// every shard has read its events of the first n1
	testutil.EventuallyEvery(t, 30*time.Second, poll, func() error {
		for _, s := range []string{`shard="1"`, `shard="2"`} {
			if lag, ok := tc.metricValue(0, "cep_ingest_lag_messages", s, `source="bank"`); !ok || lag != 0 {
				return fmt.Errorf("%s: lag %v (%v)", s, lag, ok)
			}
		}
		return nil
	})
	savepoint := func() *cepv1.Savepoint {
		t.Helper()
		res, err := c.savepoints.CreateSavepoint(ctx, req(&cepv1.CreateSavepointRequest{Target: "dir://" + spDir}))
		if err != nil {
			t.Fatal(err)
		}
		return res.Msg.Savepoint
	}
	before := savepoint().SourcePositions
	if len(before) != 1 || before[0].Sequence == 0 || before[0].Sequence > n1 {
		t.Fatalf("positions before: %v", before)
	}

	js := tc.jetStream()
	st, err := js.Stream(ctx, "CEP_SRC_BANK")
	if err != nil {
		t.Fatal(err)
	}
	cfg := st.CachedInfo().Config
	if err := js.DeleteStream(ctx, "CEP_SRC_BANK"); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	tc.publish("bank", keyOf, concat(core[n1:], filler))

	// every shard's leader says it does not read the stream
	testutil.EventuallyEvery(t, 20*time.Second, poll, func() error {
		res, err := c.cluster.ListShards(ctx, req(&cepv1.ListShardsRequest{}))
		if err != nil {
			return err
		}
		for _, s := range res.Msg.Shards {
			if len(s.UnreadStreams) != 1 || !strings.Contains(s.UnreadStreams[0], "CEP_SRC_BANK: created anew") {
				return fmt.Errorf("shard %d: unread streams %q", s.Id, s.UnreadStreams)
			}
			if v, _ := tc.metricValue(0, "cep_read_paused", fmt.Sprintf(`shard="%d"`, s.Id), `stream="CEP_SRC_BANK"`, `reason="stream"`); v != 1 {
				return fmt.Errorf("shard %d: cep_read_paused{reason=stream} %v", s.Id, v)
			}
		}
		return nil
	})
	// and has read nothing of it: the positions are still the old stream's
	sp := savepoint()
	if p := sp.SourcePositions; len(p) != 1 || p[0].Sequence != before[0].Sequence || !p[0].StreamCreated.AsTime().Equal(before[0].StreamCreated.AsTime()) {
		t.Fatalf("positions after the stream was created anew: %v, before %v", p, before)
	}

	// restoring the savepoint says where to read it from
	restore := func(mapping cepv1.PositionMapping) error {
		_, err := c.savepoints.RestoreSavepoint(ctx, req(&cepv1.RestoreSavepointRequest{
			Savepoint: &cepv1.RestoreSavepointRequest_Location{Location: sp.Location}, Positions: mapping}))
		return err
	}
	if err := restore(cepv1.PositionMapping_POSITION_MAPPING_UNSPECIFIED); connect.CodeOf(err) != connect.CodeFailedPrecondition || !strings.Contains(err.Error(), `source "bank"`) {
		t.Fatalf("a restore onto the stream created anew without a mapping: %v", err)
	}
	if err := restore(cepv1.PositionMapping_POSITION_MAPPING_FROM_START); err != nil {
		t.Fatal(err)
	}
	waitSame(t, withoutIDs(offline(t, lflSpec, concat(core, filler))), "the stream created anew, read from its start", tc)
	res, err := c.cluster.ListShards(ctx, req(&cepv1.ListShardsRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range res.Msg.Shards {
		if len(s.UnreadStreams) != 0 {
			t.Fatalf("shard %d still does not read %q", s.Id, s.UnreadStreams)
		}
	}
}

func concat(parts ...[]string) []string { return slices.Concat(parts...) }

// The same restore into a fresh cluster with a pattern keyed by another
// key than its source (read through a derived source that one shard
// re-keys into): from-start re-keys the new origin stream from its first
// event and reads the new derived stream from what is re-keyed then, so
// every event published to the new cluster is matched once.
func TestPositionsRestoreRekeyedIntoFreshCluster(t *testing.T) {
	spDir := t.TempDir()
	spec := []byte(strings.Replace(string(lflSpec), "key: e.account", "key: e.region", 1))
	keyOf := func(e map[string]any) string { return fmt.Sprint(e["account"]) }
	all := bankEvents(17, 1200)
	core, filler := all[:1200], all[1200:]
	const n1 = 500

	a, ca := positionsCluster(t, spDir)
	if _, err := ca.sources.CreateSource(a.ctx, req(&cepv1.CreateSourceRequest{Name: "bank", Key: "e.account"})); err != nil {
		t.Fatal(err)
	}
	a.deploy(ca, &cepv1.DeployPatternRequest{Spec: string(spec)})
	list, err := ca.sources.ListSources(a.ctx, req(&cepv1.ListSourcesRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	derived := ""
	for _, s := range list.Msg.Sources {
		if s.Origin == "bank" {
			derived = s.Name
		}
	}
	if derived == "" {
		t.Fatalf("no derived source: %v", list.Msg.Sources)
	}
	a.publish("bank", keyOf, core[:n1])
	// re-keyed, published and read: nothing of it left in flight
	testutil.EventuallyEvery(t, 30*time.Second, poll, func() error {
		for _, m := range []string{"cep_forward_lag_messages", "cep_ingest_lag_messages"} {
			if v, ok := a.metricValue(0, m, `source="`+derived+`"`); !ok || v != 0 {
				return fmt.Errorf("%s %v (%v)", m, v, ok)
			}
		}
		res, err := ca.cluster.ListShards(a.ctx, req(&cepv1.ListShardsRequest{}))
		if err != nil {
			return err
		}
		if o := res.Msg.Shards[0].OutboxRecords; o != 0 {
			return fmt.Errorf("%d records in the outbox", o)
		}
		return nil
	})
	res, err := ca.savepoints.CreateSavepoint(a.ctx, req(&cepv1.CreateSavepointRequest{Target: "dir://" + spDir}))
	if err != nil {
		t.Fatal(err)
	}
	sp := res.Msg.Savepoint

	b, cb := positionsCluster(t, spDir, a)
	if _, err := cb.sources.CreateSource(b.ctx, req(&cepv1.CreateSourceRequest{Name: "bank", Key: "e.account"})); err != nil {
		t.Fatal(err)
	}
	b.publish("bank", keyOf, core[n1:n1+200])
	r, err := cb.savepoints.RestoreSavepoint(b.ctx, req(&cepv1.RestoreSavepointRequest{
		Savepoint: &cepv1.RestoreSavepointRequest_Location{Location: sp.Location}, Positions: cepv1.PositionMapping_POSITION_MAPPING_FROM_START}))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Msg.PendingShards) > 0 || len(r.Msg.SourcePositions) != 2 {
		t.Fatalf("restore: pending %v, positions %v", r.Msg.PendingShards, r.Msg.SourcePositions)
	}
	b.publish("bank", keyOf, concat(core[n1+200:], filler))
	waitSame(t, withoutIDs(offline(t, spec, concat(core, filler))), "re-keyed, from-start", a, b)
}
