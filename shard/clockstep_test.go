package shard

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	"pgregory.net/rapid"
)

// procSpec runs on processing time (no "time"): its windows and timeouts
// are the ticks' and the ingest times' the leader logs from its wall clock.
const procSpec = `{"name":"proc","key":"e.k","within":50,"stages":[{"name":"a","where":"e.t == \"A\""},{"name":"b","contiguity":"followedBy","where":"e.t == \"B\""}]}`

// TestWallClockStepsChangeNothing: a shard leader's wall clock may step
// back (or jump ahead) between the times it logs, in ticks and in events'
// ingest times. Applying such a log must give exactly what the same log
// gives with each time raised to the highest of its kind logged before it
// (the clock as it should have read, never back; an event's processing
// time is the last tick's, so ticks and ingest times are two sequences):
// no timeout fired twice, no window reopened, no record moved. Both a processing-time pattern and an
// event-time one are deployed.
func TestWallClockStepsChangeNothing(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		stepped := NewState(0, 15, 16)
		steady := NewState(0, 15, 16)
		deploys := &Batch{Ops: []Op{deployOp(procSpec, 1, PolicyReset), deployOp(abSpec, 1, PolicyReset)}}
		stepped.Apply(deploys)
		steady.Apply(deploys)
		wall, highTick, highIngest := int64(1_700_000_000_000), int64(0), int64(0)
		pos := uint64(0)
		n := rapid.IntRange(1, 60).Draw(rt, "ops")
		for i := range n {
			// the wall clock moves on, or steps back or ahead
			switch rapid.IntRange(0, 9).Draw(rt, fmt.Sprintf("clock%d", i)) {
			case 0:
				wall -= rapid.Int64Range(1, 10_000).Draw(rt, fmt.Sprintf("back%d", i))
			case 1:
				wall += rapid.Int64Range(100, 10_000).Draw(rt, fmt.Sprintf("ahead%d", i))
			default:
				wall += rapid.Int64Range(0, 40).Draw(rt, fmt.Sprintf("on%d", i))
			}
			var raw, clamped Op
			if rapid.Bool().Draw(rt, fmt.Sprintf("tick%d", i)) {
				highTick = max(highTick, wall)
				raw, clamped = TickOp{Time: wall}, TickOp{Time: highTick}
			} else {
				var es []Event
				for j := range rapid.IntRange(1, 3).Draw(rt, fmt.Sprintf("events%d", i)) {
					pos++
					k := rapid.SampledFrom([]string{"x", "y"}).Draw(rt, fmt.Sprintf("key%d.%d", i, j))
					typ := rapid.SampledFrom([]string{"A", "B", "C"}).Draw(rt, fmt.Sprintf("type%d.%d", i, j))
					es = append(es, ev(pos, k, typ, int64(pos)*10))
				}
				highIngest = max(highIngest, wall)
				raw = EventsOp{Source: "src", Events: es, Ingest: wall}
				clamped = EventsOp{Source: "src", Events: es, Ingest: highIngest}
			}
			stepped.Apply(&Batch{Ops: []Op{raw}})
			steady.Apply(&Batch{Ops: []Op{clamped}})
		}
		got, want := payloads(stepped), payloads(steady)
		if !reflect.DeepEqual(got, want) {
			rt.Fatalf("a stepped clock changed the records:\n got %v\nwant %v", got, want)
		}
		ids := map[string]bool{}
		for _, r := range stepped.Outbox() {
			var v struct {
				ID string `json:"id"`
			}
			if err := json.Unmarshal(r.Payload, &v); err != nil || v.ID == "" {
				rt.Fatalf("a record without an id: %s", r.Payload)
			}
			if ids[v.ID] {
				rt.Fatalf("record %s twice: %v", v.ID, got)
			}
			ids[v.ID] = true
		}
	})
}
