package leader

import (
	"testing"
	"time"

	"github.com/cepcluster/cep/watermark"
)

// Reports from the network are checked before they are taken.
func TestDecodeClockReport(t *testing.T) {
	for _, bad := range []string{``, `{`, `[]`, `{"shard":0,"clocks":[]}`, `{"shard":2,"clocks":[{"pattern":"","source":"s","wm":1}]}`,
		`{"shard":2,"clocks":[{"pattern":"p","source":"","wm":1}]}`, `{"shard":2,"clocks":[{"pattern":"p","source":"s","wm":"x"}]}`} {
		if _, ok := decodeClockReport([]byte(bad)); ok {
			t.Errorf("decoded %q", bad)
		}
	}
	rep, ok := decodeClockReport([]byte(`{"shard":2,"clocks":[{"pattern":"p","source":"s","wm":-9223372036854775808,"idle":true}]}`))
	if !ok || rep.Shard != 2 || rep.Clocks[0].Watermark != watermark.MinTime || !rep.Clocks[0].Idle {
		t.Fatalf("decoded %+v, %v", rep, ok)
	}
}

// A clock is combined only once every shard has reported; a shard's
// reported watermark only moves up (a former leader's late report does not
// take it back), while its idle flag follows the latest report at the
// same watermark.
func TestClockTable(t *testing.T) {
	now := time.Unix(1000, 0)
	tb := &clockTable{parts: map[clockKey]map[uint64]watermark.Part{}, now: func() time.Time { return now }}
	k := clockKey{"p", "s"}
	own := watermark.Part{Watermark: 500}
	if _, ok := tb.combined(k, []uint64{1, 2, 3}, 1, own); ok {
		t.Fatal("combined without reports of shards 2 and 3")
	}
	tb.take(&clockReport{Shard: 2, Clocks: []clockEntry{{Pattern: "p", Source: "s", Watermark: 300}}})
	tb.take(&clockReport{Shard: 3, Clocks: []clockEntry{{Pattern: "p", Source: "s", Watermark: 100, Idle: true}}})
	// shard 3 is left out only against what the others showed for
	// clockSettle: its part of a burst may be on its way
	if wm, ok := tb.combined(k, []uint64{1, 2, 3}, 1, own); !ok || wm != watermark.MinTime {
		t.Fatalf("combined %d, %v at once; want nothing yet", wm, ok)
	}
	now = now.Add(clockSettle)
	if wm, ok := tb.combined(k, []uint64{1, 2, 3}, 1, own); !ok || wm != 300 {
		t.Fatalf("combined %d, %v; want 300 (shard 3 idle)", wm, ok)
	}
	tb.take(&clockReport{Shard: 2, Clocks: []clockEntry{{Pattern: "p", Source: "s", Watermark: 400}}})
	if wm, _ := tb.combined(k, []uint64{1, 2, 3}, 1, own); wm != 300 {
		t.Fatalf("combined %d right after shard 2 moved, want its settled 300", wm)
	}
	now = now.Add(clockSettle)
	if wm, _ := tb.combined(k, []uint64{1, 2, 3}, 1, own); wm != 400 {
		t.Fatalf("combined %d once shard 2's 400 settled, want 400", wm)
	}
	tb.take(&clockReport{Shard: 2, Clocks: []clockEntry{{Pattern: "p", Source: "s", Watermark: 200}}}) // late, lower
	if wm, _ := tb.combined(k, []uint64{1, 2, 3}, 1, own); wm != 400 {
		t.Fatalf("a lower report took shard 2 back: %d", wm)
	}
	tb.take(&clockReport{Shard: 3, Clocks: []clockEntry{{Pattern: "p", Source: "s", Watermark: 100}}}) // busy again
	if wm, _ := tb.combined(k, []uint64{1, 2, 3}, 1, own); wm != 100 {
		t.Fatalf("combined %d with shard 3 busy again, want 100", wm)
	}
	if wm, ok := tb.combined(k, []uint64{1, 2}, 1, watermark.Part{Watermark: 900, Idle: true}); !ok || wm != 400 {
		t.Fatalf("combined over shards 1 and 2: %d, %v; want 400", wm, ok)
	}
}

// A pattern deleted and deployed again starts its clock anew: what the
// other shards reported of the deployment before (ahead of the new one,
// and a shard's part never taken lower) is dropped, and the new
// deployment's lower reports are taken; a report without a version (an
// older release) is taken as before.
func TestClockTableNewDeploymentStartsAnew(t *testing.T) {
	now := time.Unix(1000, 0)
	tb := &clockTable{parts: map[clockKey]map[uint64]watermark.Part{}, now: func() time.Time { return now }}
	k := clockKey{"p", "s"}
	shards := []uint64{1, 2}
	tb.deployed(k, 1)
	tb.take(&clockReport{Shard: 2, Clocks: []clockEntry{{Pattern: "p", Source: "s", Watermark: 5000, Version: 1}}})
	if wm, ok := tb.combined(k, shards, 1, watermark.Part{Watermark: 6000}); !ok || wm != 5000 {
		t.Fatalf("version 1: %d, %v; want 5000", wm, ok)
	}
	// deleted and deployed again as version 2: shard 2's report of
	// version 1 still arrives, and so does its first of version 2
	tb.deployed(k, 2)
	if _, ok := tb.combined(k, shards, 1, watermark.Part{Watermark: 100}); ok {
		t.Fatal("version 2 combined with shard 2's part of version 1")
	}
	tb.take(&clockReport{Shard: 2, Clocks: []clockEntry{{Pattern: "p", Source: "s", Watermark: 5000, Version: 1}}})
	if _, ok := tb.combined(k, shards, 1, watermark.Part{Watermark: 100}); ok {
		t.Fatal("a late report of version 1 was taken for version 2")
	}
	tb.take(&clockReport{Shard: 2, Clocks: []clockEntry{{Pattern: "p", Source: "s", Watermark: 80, Version: 2}}})
	if wm, ok := tb.combined(k, shards, 1, watermark.Part{Watermark: 100}); !ok || wm != 80 {
		t.Fatalf("version 2: %d, %v; want 80 (the lower of the new deployment's parts)", wm, ok)
	}
	tb.take(&clockReport{Shard: 2, Clocks: []clockEntry{{Pattern: "p", Source: "s", Watermark: 90}}})
	if wm, _ := tb.combined(k, shards, 1, watermark.Part{Watermark: 100}); wm != 90 {
		t.Fatalf("a report without a version: %d, want 90", wm)
	}
}
