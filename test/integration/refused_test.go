package integration

import (
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cepcluster/cep/cluster"
	"github.com/cepcluster/cep/keygroup"
)

// Raft refuses an entry the leader proposes while a leadership transfer is
// in progress, and takes the next one once the transfer has failed: the
// leader still leads, with entries of events in flight on either side of
// the refused one. The events of the refused entry are read again, not
// skipped: the records equal the offline engine's (the followedByAny
// sequence of the fault suite, whose lost branch showed it).
func TestRefusedEntryIsReadAgain(t *testing.T) {
	var refused atomic.Int32
	stream := keygroup.SourceStreamName("bank")
	tc := newSingle(t, 90*time.Second, cluster.Config{IngestBatch: 10, Testing: &cluster.Testing{
		RefuseProposal: func(_ uint64, s string, first, last uint64) bool {
			// once, an entry well inside the events, with more after it
			return s == stream && first <= 300 && last >= 300 && refused.CompareAndSwap(0, 1)
		},
	}})
	tc.deployOnBank(0, killAnySpec)
	lines := sessionEvents(rand.New(rand.NewPCG(7, 1)), 1000)
	tc.publish("bank", func(e map[string]any) string { return fmt.Sprint(e["account"]) }, lines)
	want := withoutIDs(offline(t, killAnySpec, lines))
	got := withoutIDs(tc.outputsOnceThere("cep.out.lfl-any", len(want), 30*time.Second))
	if refused.Load() == 0 {
		t.Fatal("no entry was refused: the test checks nothing")
	}
	if d := differsFromOffline(got, want, string(killAnySpec)); d != "" {
		t.Fatalf("after an entry refused: %s", d)
	}
}
