package integration

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cepcluster/cep/cluster"
	"github.com/cepcluster/cep/internal/testutil"
	"github.com/cepcluster/cep/keygroup"
)

// A source stream deleted behind the cluster's back is reported by the
// shard leaders reading it (cep_source_stream_missing 1, and a warning),
// until a stream of that name is back.
func TestMissingSourceStreamIsReported(t *testing.T) {
	tc := newSingle(t, 60*time.Second, cluster.Config{StreamCheckEvery: 100 * time.Millisecond})
	ctx := tc.ctx
	tc.deployOnBank(0, lflSpec)
	js := tc.jetStream()
	st, err := js.Stream(ctx, "CEP_SRC_BANK")
	if err != nil {
		t.Fatal(err)
	}
	cfg := st.CachedInfo().Config
	missing := func(want float64) error {
		if v, _ := tc.metricValue(0, "cep_source_stream_missing", `stream="CEP_SRC_BANK"`); v != want {
			return fmt.Errorf("cep_source_stream_missing %v, want %v", v, want)
		}
		return nil
	}
	if err := js.DeleteStream(ctx, "CEP_SRC_BANK"); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyEvery(t, 10*time.Second, poll, func() error { return missing(1) })
	if _, err := js.CreateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyEvery(t, 10*time.Second, poll, func() error { return missing(0) })
}

// The output stream is created bounded in size (a flood of dead letters
// cannot fill the disk), keeps the retention limits an operator gives it
// (`nats stream edit`) across node restarts, and a node started with limits sets
// them; the subjects and duplicate window the cluster relies on come back
// if they were changed.
func TestOutputStreamLimits(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a node three times")
	}
	tc := newSingle(t, 60*time.Second, cluster.Config{})
	ctx := tc.ctx
	config := func() jetstream.StreamConfig {
		t.Helper()
		st, err := tc.jetStream().Stream(ctx, cluster.OutputStream)
		if err != nil {
			t.Fatal(err)
		}
		return st.CachedInfo().Config
	}
	cfg := config()
	if cfg.MaxAge != 0 || cfg.MaxBytes != cluster.DefaultOutputMaxBytes || cfg.Duplicates != cluster.OutputDuplicateWin {
		t.Fatalf("a new output stream: max age %v, max bytes %d, duplicate window %v", cfg.MaxAge, cfg.MaxBytes, cfg.Duplicates)
	}
	// an operator sets limits and (by mistake) drops a subject
	cfg.MaxAge, cfg.MaxBytes, cfg.Subjects = 2*time.Hour, 1<<30, cfg.Subjects[:1]
	if _, err := tc.jetStream().UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}

	tc.restart(0)
	cfg = config()
	if cfg.MaxAge != 2*time.Hour || cfg.MaxBytes != 1<<30 || !slices.Equal(cfg.Subjects, []string{keygroup.OutputSubjectRoot + ">", keygroup.DeadLetterRoot + ">"}) {
		t.Fatalf("after a restart: max age %v, max bytes %d, subjects %v", cfg.MaxAge, cfg.MaxBytes, cfg.Subjects)
	}

	tc.cfgs[0].OutputLimits = cluster.OutputLimits{MaxAge: 3 * time.Hour}
	tc.restart(0)
	if cfg = config(); cfg.MaxAge != 3*time.Hour || cfg.MaxBytes != 1<<30 || cfg.Duplicates != cluster.OutputDuplicateWin {
		t.Fatalf("started with a max age: max age %v, max bytes %d, duplicate window %v", cfg.MaxAge, cfg.MaxBytes, cfg.Duplicates)
	}
}

// Events a shard had not read when the stream's limits (here a purge)
// removed them are lost to its patterns; the shard leader says so when it
// resumes reading, naming the positions.
func TestRemovedEventsAreReported(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a node twice")
	}
	tc := newCluster(t, 60*time.Second)
	ctx := tc.ctx
	var logs lockedBuffer
	tc.addOne(cluster.Config{DataDir: filepath.Join(tc.base, "n1"), Logger: logs.warnings()})
	tc.deployOnBank(0, lflSpec)
	lines := bankEvents(31, 30)
	byAccount := func(e map[string]any) string { return fmt.Sprint(e["account"]) }
	tc.publish("bank", byAccount, lines[:10])
	tc.waitApplied(0, 1, "lfl")
	testutil.EventuallyEvery(t, 10*time.Second, poll, func() error {
		if v, _ := tc.metricValue(0, "cep_ingest_lag_messages"); v != 0 {
			return fmt.Errorf("ingest lag %v", v)
		}
		return nil
	})
	tc.stop(0)
	tc.publish("bank", byAccount, lines[10:])
	st, err := tc.jetStream().Stream(ctx, "CEP_SRC_BANK")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Purge(ctx, jetstream.WithPurgeSequence(16)); err != nil {
		t.Fatal(err)
	}
	tc.startReady(0)
	testutil.EventuallyEvery(t, 10*time.Second, poll, func() error {
		if !strings.Contains(logs.String(), `msg="events were removed from the stream before this shard read them`) ||
			!strings.Contains(logs.String(), "stream=CEP_SRC_BANK from=11 to=15") {
			return fmt.Errorf("no warning in the log:\n%s", logs.String())
		}
		return nil
	})
}
