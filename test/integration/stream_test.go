package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cepcluster/cep/cluster"
	"github.com/cepcluster/cep/keygroup"
)

// A source stream deleted behind the cluster's back is reported by the
// shard leaders reading it (cep_source_stream_missing 1, and a warning),
// until a stream of that name is back.
func TestMissingSourceStreamIsReported(t *testing.T) {
	n := startConfigured(t, cluster.Config{StreamCheckEvery: 100 * time.Millisecond})
	defer n.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	deployOnBank(t, ctx, n, lflSpec)
	js := jetStream(t, n.NATSURL())
	st, err := js.Stream(ctx, "CEP_SRC_BANK")
	if err != nil {
		t.Fatal(err)
	}
	cfg := st.CachedInfo().Config
	missing := func(want float64) error {
		if v, _ := metricValue(t, n, "cep_source_stream_missing", `stream="CEP_SRC_BANK"`); v != want {
			return fmt.Errorf("cep_source_stream_missing %v, want %v", v, want)
		}
		return nil
	}
	if err := js.DeleteStream(ctx, "CEP_SRC_BANK"); err != nil {
		t.Fatal(err)
	}
	checkFor(t, 10*time.Second, func() error { return missing(1) })
	if _, err := js.CreateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	checkFor(t, 10*time.Second, func() error { return missing(0) })
}

// The output stream keeps the retention limits an operator gives it (`nats
// stream edit`) across node restarts, and a node started with limits sets
// them; the subjects and duplicate window the cluster relies on come back
// if they were changed.
func TestOutputStreamLimits(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a node three times")
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	config := func(n *cluster.Node) jetstream.StreamConfig {
		t.Helper()
		st, err := jetStream(t, n.NATSURL()).Stream(ctx, cluster.OutputStream)
		if err != nil {
			t.Fatal(err)
		}
		return st.CachedInfo().Config
	}
	n := startConfigured(t, cluster.Config{DataDir: dir})
	cfg := config(n)
	if cfg.MaxAge != 0 || cfg.MaxBytes != -1 || cfg.Duplicates != cluster.OutputDuplicateWin {
		t.Fatalf("a new output stream: max age %v, max bytes %d, duplicate window %v", cfg.MaxAge, cfg.MaxBytes, cfg.Duplicates)
	}
	// an operator sets limits and (by mistake) drops a subject
	cfg.MaxAge, cfg.MaxBytes, cfg.Subjects = 2*time.Hour, 1<<30, cfg.Subjects[:1]
	if _, err := jetStream(t, n.NATSURL()).UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	n.Close()

	n = startConfigured(t, cluster.Config{DataDir: dir})
	cfg = config(n)
	if cfg.MaxAge != 2*time.Hour || cfg.MaxBytes != 1<<30 || !slices.Equal(cfg.Subjects, []string{keygroup.OutputSubjectRoot + ">", keygroup.DeadLetterRoot + ">"}) {
		t.Fatalf("after a restart: max age %v, max bytes %d, subjects %v", cfg.MaxAge, cfg.MaxBytes, cfg.Subjects)
	}
	n.Close()

	n = startConfigured(t, cluster.Config{DataDir: dir, OutputLimits: cluster.OutputLimits{MaxAge: 3 * time.Hour}})
	defer n.Close()
	if cfg = config(n); cfg.MaxAge != 3*time.Hour || cfg.MaxBytes != 1<<30 || cfg.Duplicates != cluster.OutputDuplicateWin {
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
	base := t.TempDir()
	ns := embeddedNATS(t, base)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var logs lockedBuffer
	cfg := cluster.Config{DataDir: filepath.Join(base, "n1"), NATSURL: ns.ClientURL(),
		Logger: logs.warnings()}
	n := startConfigured(t, cfg)
	deployOnBank(t, ctx, n, lflSpec)
	lines := bankEvents(31, 30)
	byAccount := func(e map[string]any) string { return fmt.Sprint(e["account"]) }
	publish(t, ns.ClientURL(), "bank", byAccount, lines[:10])
	waitApplied(t, n.APIAddr(), 1, "lfl")
	checkFor(t, 10*time.Second, func() error {
		if v, _ := metricValue(t, n, "cep_ingest_lag_messages"); v != 0 {
			return fmt.Errorf("ingest lag %v", v)
		}
		return nil
	})
	n.Close()
	publish(t, ns.ClientURL(), "bank", byAccount, lines[10:])
	st, err := jetStream(t, ns.ClientURL()).Stream(ctx, "CEP_SRC_BANK")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Purge(ctx, jetstream.WithPurgeSequence(16)); err != nil {
		t.Fatal(err)
	}
	n = startConfigured(t, cfg)
	defer n.Close()
	checkFor(t, 10*time.Second, func() error {
		if !strings.Contains(logs.String(), `msg="events were removed from the stream before this shard read them`) ||
			!strings.Contains(logs.String(), "stream=CEP_SRC_BANK from=11 to=15") {
			return fmt.Errorf("no warning in the log:\n%s", logs.String())
		}
		return nil
	})
}
