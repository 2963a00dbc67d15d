package shard

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/cepcluster/cep/cluster/plan"
	"github.com/cepcluster/cep/internal/multiset"
	"github.com/cepcluster/cep/internal/offline"
	"github.com/cepcluster/cep/internal/workload"
	"github.com/cepcluster/cep/keygroup"
)

const metaGroups = 256

// metaEvent is line as read from the source stream at position pos: on
// its key's subject, so in its key's block.
func metaEvent(pos uint64, line string) Event {
	var e struct{ Account string }
	if err := json.Unmarshal([]byte(line), &e); err != nil {
		panic(err)
	}
	return Event{Pos: pos, Block: keygroup.BlockOf(keygroup.OfKey(e.Account, metaGroups), metaGroups), Data: []byte(line)}
}

// catchUp has the reader read from the shard's position to the end of
// evs, as a new leader does.
func (r *metaReplica) catchUp(t *testing.T, evs []Event) {
	t.Helper()
	r.after = r.s.Positions()["src"]
	if int(r.after) >= len(evs) {
		return
	}
	if b := r.entry(evs[r.after:]); b != nil {
		if err := r.s.Apply(b); err != nil {
			t.Fatalf("read from position %d: %v", b.Ops[0].(EventsOp).After, err)
		}
	}
}

// metaReplica is one shard's state as a replica holds it, and where its
// leader's reader is.
type metaReplica struct {
	s     *State
	after uint64 // the last position the reader proposed (EventsOp.After)
}

// entry is the entry of the events of evs that the shard reads (its
// blocks), as its leader proposes them, or nil for none.
func (r *metaReplica) entry(evs []Event) *Batch {
	var own []Event
	for _, e := range evs {
		if plan.ReadsBlock(e.Block, r.s.first, r.s.last, metaGroups) {
			own = append(own, e)
		}
	}
	if len(own) == 0 {
		return nil
	}
	b := &Batch{Ops: []Op{EventsOp{Source: "src", Events: own, After: r.after}}}
	r.after = plan.NextAfter(r.after, false, own, func(e Event) (uint64, int) { return e.Pos, e.Block })
	return b
}

// feed applies the entry of evs. An entry refused (one before it was
// not applied) has the reader read again from the shard's position, up
// to the last of evs, as the leader does: all of all (positions count
// from 1).
func (r *metaReplica) feed(t *testing.T, all, evs []Event) {
	t.Helper()
	b := r.entry(evs)
	if b == nil {
		return
	}
	err := r.s.Apply(b)
	var gap *GapError
	if err == nil || !errors.As(err, &gap) {
		if err != nil {
			t.Fatal(err)
		}
		return
	}
	r.after = r.s.Positions()["src"]
	if b := r.entry(all[r.after:evs[len(evs)-1].Pos]); b != nil {
		if err := r.s.Apply(b); err != nil {
			t.Fatalf("read again from position %d: %v", gap.Applied, err)
		}
	}
}

// records are the records of the states' outboxes, without their ids,
// sorted.
func metaRecords(ss ...*State) []string {
	var out []string
	for _, s := range ss {
		for _, r := range s.Outbox() {
			out = append(out, string(r.Payload))
		}
	}
	sort.Strings(out)
	return out
}

// A shard's state, fed the fault suite's workload in batches as a leader
// proposes them, ends with the records of one uninterrupted state and of
// the offline engine, whatever happens at the batch boundaries: a
// snapshot restored (a restart, a raft snapshot installed on a new
// replica), restored again from the restored state's snapshot, the last
// batches read again with the next (a new leader resuming from the lowest
// position applied), an entry of one shard refused by Raft while the next
// is taken (the state refuses that one too, and the reader reads again
// from where the state is), a split (each side fed the blocks it reads,
// their records together).
func TestMetamorphicFaults(t *testing.T) {
	seeds := 8
	if testing.Short() {
		seeds = 3
	}
	// the fault suite's patterns and events (it kills leaders, adds a
	// node: a raft snapshot installed on it, a split; and removes one): a
	// sequence with next stages, and one of followedByAny stages, which
	// the engine keeps as trees per start event
	specs := [][]byte{workload.LFL("src"), workload.LFLAny("src")}
	for seed := uint64(1); seed <= uint64(seeds); seed++ {
		rng := rand.New(rand.NewPCG(seed, 99))
		lines := workload.Sessions(rng, 1500+rng.IntN(1500))
		var evs []Event
		for i, l := range lines {
			evs = append(evs, metaEvent(uint64(i+1), l))
		}
		deploy := &Batch{}
		for i, sp := range specs {
			name := []string{"lfl", "lfl-any"}[i]
			deploy.Ops = append(deploy.Ops, &Deploy{Name: name, Version: 1, Spec: sp,
				Sources: []string{"src"}, Subject: "cep.out." + name, Policy: PolicyReset})
		}
		ref := &metaReplica{s: NewState(0, metaGroups-1, metaGroups)}
		ref.s.Apply(deploy)
		// the perturbed shards: one at first, more after splits
		reps := []*metaReplica{{s: NewState(0, metaGroups-1, metaGroups)}}
		reps[0].s.Apply(deploy)
		var steps []string
		var batches [][]Event
		for from := 0; from < len(evs); {
			n := min(len(evs)-from, 1+rng.IntN(40))
			b := evs[from : from+n]
			from += n
			ref.feed(t, evs, b)
			switch rng.IntN(12) {
			case 0: // a restart, or a new replica's snapshot install
				for _, r := range reps {
					f := snap(t, r.s, "s")
					r.s = restore(t, r.s.first, r.s.last, f)
					if g := snap(t, r.s, "s"); !bytes.Equal(f, g) {
						t.Fatalf("seed %d: a restored state's snapshot differs from the one it was restored from", seed)
					}
				}
				steps = append(steps, fmt.Sprintf("restore@%d", from))
			case 1: // restored twice over: a replica installing a snapshot a restored one took
				for _, r := range reps {
					r.s = restore(t, r.s.first, r.s.last, snap(t, r.s, "s"))
					r.s = restore(t, r.s.first, r.s.last, snap(t, r.s, "s"))
				}
				steps = append(steps, fmt.Sprintf("restore2@%d", from))
			case 2: // a new leader reads again from the lowest position applied
				k := min(len(batches), 1+rng.IntN(3))
				var again []Event
				for _, ob := range batches[len(batches)-k:] {
					again = append(again, ob...)
				}
				if len(again) > 0 {
					for _, r := range reps {
						r.after = min(r.after, again[0].Pos-1)
					}
					b = append(slices.Clip(again), b...)
				}
				steps = append(steps, fmt.Sprintf("reread%d@%d", k, from))
			case 4: // Raft refuses a shard's entry (a leadership transfer), and takes the next
				r := reps[rng.IntN(len(reps))]
				r.entry(b) // proposed, never applied
				batches = append(batches, evs[from-n:from])
				steps = append(steps, fmt.Sprintf("refused@%d", from))
				for _, o := range reps {
					if o != r {
						o.feed(t, evs, b)
					}
				}
				continue
			case 3: // a split of the widest shard
				slices.SortFunc(reps, func(a, b *metaReplica) int { return (b.s.last - b.s.first) - (a.s.last - a.s.first) })
				r := reps[0]
				if r.s.last > r.s.first {
					at := r.s.first + 1 + rng.IntN(r.s.last-r.s.first)
					r.s.Apply(&Batch{Ops: []Op{Split{At: at, Shard: uint64(len(reps) + 1)}}})
					for _, so := range r.s.TakeSplitOff() {
						// its reader starts where the split left it and
						// reads what the shard split did not apply
						nr := &metaReplica{s: so.State}
						nr.catchUp(t, evs[:from-n])
						reps = append(reps, nr)
					}
					steps = append(steps, fmt.Sprintf("split%d@%d", at, from))
				}
			}
			batches = append(batches, evs[from-n:from])
			for _, r := range reps {
				r.feed(t, evs, b)
			}
		}
		// a reader goes on after the last entry refused
		for _, r := range reps {
			r.catchUp(t, evs)
		}
		// what the offline engine makes of the events, the fillers moving
		// the watermark past them
		asOffline := metaRecords(ref.s)
		// a shard's watermark follows its own events: a narrow one may
		// have no filler, so the end of time is logged for all
		var states []*State
		for _, r := range append(reps, ref) {
			r.s.Apply(&Batch{Ops: []Op{WatermarkOp{Pattern: "lfl", Time: 1 << 62}, WatermarkOp{Pattern: "lfl-any", Time: 1 << 62}}})
			if r != ref {
				states = append(states, r.s)
			}
		}
		want, got := metaRecords(ref.s), metaRecords(states...)
		if only1, only2 := multiset.Diff(got, want); len(only1)+len(only2) > 0 {
			t.Fatalf("seed %d (%s): %d records, the uninterrupted state %d\nonly perturbed: %s\nonly uninterrupted: %s",
				seed, strings.Join(steps, " "), len(got), len(want), firstOf(only1), firstOf(only2))
		}
		var engine, mine []string
		for _, sp := range specs {
			engine = append(engine, offline.Records(t, sp, lines)...)
		}
		for _, r := range asOffline {
			mine = append(mine, offline.WithoutID(r))
		}
		if only1, only2 := multiset.Diff(mine, engine); len(only1)+len(only2) > 0 {
			t.Fatalf("seed %d: %d records, the offline engine %d\nonly the shard: %s\nonly offline: %s",
				seed, len(mine), len(engine), firstOf(only1), firstOf(only2))
		}
		if len(want) < 100 {
			t.Fatalf("seed %d: only %d records: the workload checks little", seed, len(want))
		}
	}
}

// firstOf is the first records of recs, a line each, for a failure message.
func firstOf(recs []string) string {
	return strings.Join(recs[:min(len(recs), 4)], "\n    ")
}
