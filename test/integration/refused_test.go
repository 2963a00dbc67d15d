package integration

import (
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/cluster"
	"github.com/cepcluster/cep/internal/workload"
	"github.com/cepcluster/cep/keygroup"
	"github.com/cepcluster/cep/shard"
)

// Raft refuses an entry the leader proposes while a leadership transfer is
// in progress, and takes the next one once the transfer has failed: the
// leader still leads, with entries in flight on either side of the refused
// one. The events of a refused entry are read again, not skipped, both
// those read for the patterns and those re-keyed into a derived source:
// the records equal the offline engine's (the followedByAny sequence of
// the fault suite, whose lost branch showed it, by account and by user).
func TestRefusedEntryIsReadAgain(t *testing.T) {
	var refusedEvents, refusedForward atomic.Bool
	stream := keygroup.SourceStreamName("bank")
	tc := newSingle(t, 90*time.Second, cluster.Config{IngestBatch: 10, Testing: &cluster.Testing{
		RefuseProposal: func(_ uint64, s string, kind shard.OpKind, first, last uint64) bool {
			// once of each kind, an entry well inside the events, with
			// more after it
			if s != stream || first > 300 || last < 300 {
				return false
			}
			switch kind {
			case shard.OpEvents:
				return refusedEvents.CompareAndSwap(false, true)
			case shard.OpForward:
				return refusedForward.CompareAndSwap(false, true)
			}
			return false
		},
	}})
	userSpec := byUser(killAnySpec)
	c := tc.deployOnBank(0, killAnySpec)
	tc.deploy(c, &cepv1.DeployPatternRequest{Spec: string(userSpec)})
	lines := workload.Sessions(rand.New(rand.NewPCG(7, 1)), 1000)
	tc.publish("bank", func(e map[string]any) string { return fmt.Sprint(e["account"]) }, lines)
	for _, spec := range [][]byte{killAnySpec, userSpec} {
		name := specName(t, spec)
		want := withoutIDs(offline(t, spec, lines))
		got := withoutIDs(tc.outputsOnceThere("cep.out."+name, len(want), 30*time.Second))
		if d := differsFromOffline(got, want, string(spec)); d != "" {
			t.Fatalf("%s, after an entry refused: %s", name, d)
		}
	}
	if !refusedEvents.Load() || !refusedForward.Load() {
		t.Fatalf("entries refused: of events %v, re-keying %v: the test checks less than it says", refusedEvents.Load(), refusedForward.Load())
	}
}
