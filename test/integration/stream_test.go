package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/cepcluster/cep/cluster"
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
