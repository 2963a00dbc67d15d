package integration

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/types/known/durationpb"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/cluster"
	"github.com/cepcluster/cep/internal/testutil"
	"github.com/cepcluster/cep/keygroup"
)

// A source created with retention limits gets a stream that has them, as
// JetStream itself reports (and enforces: the oldest events go past the
// count); the source shows them, keeps them across a restart, and the
// stream of a derived source that re-keys it has them too. Limits on an
// existing stream, or out of bounds, are refused.
func TestSourceRetentionLimits(t *testing.T) {
	tc := newSingle(t, 60*time.Second, cluster.Config{Shards: 2})
	c := tc.client(0)
	js := tc.jetStream()
	ctx := tc.ctx
	limits := &cepv1.SourceLimits{MaxAge: durationpb.New(72 * time.Hour), MaxBytes: 50 << 20, MaxMsgs: 20}
	res, err := c.sources.CreateSource(ctx, req(&cepv1.CreateSourceRequest{Name: "metrics", Key: "e.host", Limits: limits}))
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Msg.Source.GetLimits(); got.GetMaxAge().AsDuration() != 72*time.Hour || got.GetMaxBytes() != 50<<20 || got.GetMaxMsgs() != 20 {
		t.Fatalf("created source has limits %v", got)
	}
	_, err = c.sources.CreateSource(ctx, req(&cepv1.CreateSourceRequest{Name: "views", Subjects: []string{"web.views.*"}, Limits: &cepv1.SourceLimits{MaxBytes: 1 << 20}}))
	if err != nil {
		t.Fatal(err)
	}
	streamLimits := func(stream string) (time.Duration, int64, int64) {
		t.Helper()
		st, err := js.Stream(ctx, stream)
		if err != nil {
			t.Fatalf("stream %s: %v", stream, err)
		}
		cfg := st.CachedInfo().Config
		return cfg.MaxAge, cfg.MaxBytes, cfg.MaxMsgs
	}
	if age, bytes, msgs := streamLimits(keygroup.SourceStreamName("metrics")); age != 72*time.Hour || bytes != 50<<20 || msgs != 20 {
		t.Errorf("stream of metrics: max age %v, bytes %d, msgs %d", age, bytes, msgs)
	}
	if age, bytes, msgs := streamLimits(keygroup.SourceStreamName("views")); age != 0 || bytes != 1<<20 || msgs != -1 {
		t.Errorf("stream of views: max age %v, bytes %d, msgs %d", age, bytes, msgs)
	}

	// JetStream keeps the last 20 of 50 events
	var lines []string
	for i := range 50 {
		lines = append(lines, fmt.Sprintf(`{"host":"h-%d","ts":%d}`, i%5, 1000+i))
	}
	tc.publish("metrics", func(e map[string]any) string { return fmt.Sprint(e["host"]) }, lines)
	testutil.Eventually(t, 10*time.Second, func() error {
		st, err := js.Stream(ctx, keygroup.SourceStreamName("metrics"))
		if err != nil {
			return err
		}
		if s := st.CachedInfo().State; s.Msgs != 20 || s.LastSeq != 50 {
			return fmt.Errorf("stream holds %d events up to %d, want 20 up to 50", s.Msgs, s.LastSeq)
		}
		return nil
	})

	// a pattern keyed otherwise reads a derived source with the same limits
	spec := "name: by-rack\nsource: metrics\nkey: e.rack\ntime: e.ts\nwithin: 50\nstages:\n  - name: a\n    where: e.v > 1\n"
	dep, err := c.patterns.DeployPattern(ctx, req(&cepv1.DeployPatternRequest{Spec: spec}))
	if err != nil {
		t.Fatal(err)
	}
	reads := dep.Msg.Pattern.GetReads()
	if len(reads) != 1 || reads[0] == "metrics" {
		t.Fatalf("by-rack reads %v, not a derived source", reads)
	}
	got, err := c.sources.GetSource(ctx, req(&cepv1.GetSourceRequest{Name: reads[0]}))
	if err != nil {
		t.Fatal(err)
	}
	if l := got.Msg.Source.GetLimits(); l.GetMaxAge().AsDuration() != 72*time.Hour || l.GetMaxBytes() != 50<<20 || l.GetMaxMsgs() != 20 {
		t.Errorf("derived source %s has limits %v", reads[0], l)
	}
	if age, bytes, msgs := streamLimits(got.Msg.Source.GetStream()); age != 72*time.Hour || bytes != 50<<20 || msgs != 20 {
		t.Errorf("stream of %s: max age %v, bytes %d, msgs %d", reads[0], age, bytes, msgs)
	}

	// refused: limits on a stream the cluster does not own, and out of bounds
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "AUDIT", Subjects: []string{"audit.>"}}); err != nil {
		t.Fatal(err)
	}
	for _, r := range []*cepv1.CreateSourceRequest{
		{Name: "audit", Stream: "AUDIT", Limits: &cepv1.SourceLimits{MaxMsgs: 5}},
		{Name: "neg", Limits: &cepv1.SourceLimits{MaxBytes: -1}},
		{Name: "short", Limits: &cepv1.SourceLimits{MaxAge: durationpb.New(time.Millisecond)}},
	} {
		_, err := c.sources.CreateSource(ctx, req(r))
		if ce := new(connect.Error); !errors.As(err, &ce) || ce.Code() != connect.CodeInvalidArgument {
			t.Errorf("CreateSource(%v): %v, want InvalidArgument", r, err)
		}
	}
	if _, err := js.Stream(ctx, keygroup.SourceStreamName("neg")); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Errorf("a refused source left a stream: %v", err)
	}

	// the metadata keeps them
	tc.stop(0)
	tc.startReady(0)
	c = tc.client(0)
	got, err = c.sources.GetSource(ctx, req(&cepv1.GetSourceRequest{Name: "metrics"}))
	if err != nil {
		t.Fatal(err)
	}
	if l := got.Msg.Source.GetLimits(); l.GetMaxAge().AsDuration() != 72*time.Hour || l.GetMaxBytes() != 50<<20 || l.GetMaxMsgs() != 20 {
		t.Errorf("after a restart metrics has limits %v", l)
	}
}

// A savepoint restored where the source's stream is gone (another NATS, or
// the stream deleted) creates it again with the source's limits.
func TestSourceLimitsSurviveARestore(t *testing.T) {
	tc := newCluster(t, 2*time.Minute)
	ctx, base := tc.ctx, tc.base
	a := tc.addOne(cluster.Config{DataDir: filepath.Join(base, "a"), Shards: 1})
	ca := tc.client(a)
	limits := &cepv1.SourceLimits{MaxAge: durationpb.New(48 * time.Hour), MaxMsgs: 500}
	if _, err := ca.sources.CreateSource(ctx, req(&cepv1.CreateSourceRequest{Name: "metrics", Key: "e.host", Limits: limits})); err != nil {
		t.Fatal(err)
	}
	sp, err := ca.savepoints.CreateSavepoint(ctx, req(&cepv1.CreateSavepointRequest{Target: "dir://" + filepath.Join(base, "savepoints")}))
	if err != nil {
		t.Fatal(err)
	}
	tc.stop(a)
	js := tc.jetStream()
	stream := keygroup.SourceStreamName("metrics")
	if err := js.DeleteStream(ctx, stream); err != nil {
		t.Fatal(err)
	}

	b := tc.addOne(cluster.Config{DataDir: filepath.Join(base, "b"), Shards: 1})
	cb := tc.client(b)
	// the stream is another than the one saved: the positions must be
	// said to count from its start
	if _, err := cb.savepoints.RestoreSavepoint(ctx, req(&cepv1.RestoreSavepointRequest{Savepoint: &cepv1.RestoreSavepointRequest_Location{Location: sp.Msg.Savepoint.Location},
		Positions: cepv1.PositionMapping_POSITION_MAPPING_FROM_START})); err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatalf("the restore did not create the stream again: %v", err)
	}
	if cfg := st.CachedInfo().Config; cfg.MaxAge != 48*time.Hour || cfg.MaxMsgs != 500 || cfg.MaxBytes != -1 {
		t.Errorf("restored stream: max age %v, msgs %d, bytes %d", cfg.MaxAge, cfg.MaxMsgs, cfg.MaxBytes)
	}
	got, err := cb.sources.GetSource(ctx, req(&cepv1.GetSourceRequest{Name: "metrics"}))
	if err != nil {
		t.Fatal(err)
	}
	if l := got.Msg.Source.GetLimits(); l.GetMaxAge().AsDuration() != 48*time.Hour || l.GetMaxMsgs() != 500 {
		t.Errorf("restored source has limits %v", l)
	}
}
