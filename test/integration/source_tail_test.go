package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/cluster"
	"github.com/cepcluster/cep/internal/testutil"
)

// A reader reads a source's stored events through the API's tail: all of
// them as published, in order; one key's block, holding every event of
// the key and not the other blocks'; from a stored time. The consumers it
// makes on the source's stream are gone when each read ends.
func TestSourceTailReaderReadsStoredEvents(t *testing.T) {
	tc := newSingle(t, 2*time.Minute, cluster.Config{Shards: 4, Tokens: tailReaders(t)})
	tc.createBank(tc.client(0, as("operator")))
	var lines []string
	for i := range 200 {
		lines = append(lines, fmt.Sprintf(`{"account":"acc-%d","n":%d,"ts":%d}`, i%50, i, 1000+i))
	}
	tc.publish("bank", func(ev map[string]any) string { return ev["account"].(string) }, lines)
	reader := tc.client(0, as("a"))
	js := tc.jetStream()
	consumers := func() int {
		st, err := js.Stream(tc.ctx, "CEP_SRC_BANK")
		if err != nil {
			t.Fatal(err)
		}
		info, err := st.Info(tc.ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info.State.Consumers
	}
	consumers0 := consumers()

	read := func(r *cepv1.TailRequest) []*cepv1.Record {
		t.Helper()
		r.Source, r.StopAtEnd = "bank", true
		ctx, cancel := context.WithTimeout(tc.ctx, 30*time.Second)
		defer cancel()
		s, err := reader.matches.Tail(ctx, req(r))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		var out []*cepv1.Record
		for s.Receive() {
			out = append(out, s.Msg())
		}
		if err := s.Err(); err != nil {
			t.Fatalf("tail %v: %v", r, err)
		}
		return out
	}
	texts := func(recs []*cepv1.Record) []string {
		var out []string
		for _, r := range recs {
			if r.Type != "event" || r.Sequence == 0 || r.StoredAtMs == 0 {
				t.Errorf("record %v", r)
			}
			out = append(out, string(r.Json))
		}
		return out
	}

	var all []*cepv1.Record
	testutil.EventuallyEvery(t, 10*time.Second, poll, func() error {
		if all = read(&cepv1.TailRequest{Start: cepv1.TailStart_TAIL_START_ALL}); len(all) != len(lines) {
			return fmt.Errorf("%d events read, %d published", len(all), len(lines))
		}
		return nil
	})
	if got := texts(all); !slices.Equal(got, lines) {
		t.Fatalf("the stored events are not those published, in order:\n%q", got)
	}

	key := texts(read(&cepv1.TailRequest{Start: cepv1.TailStart_TAIL_START_ALL, SourceKey: "acc-7"}))
	var mine []string
	for _, l := range key {
		var ev struct{ Account string }
		json.Unmarshal([]byte(l), &ev)
		if ev.Account == "acc-7" {
			mine = append(mine, l)
		}
	}
	var want []string
	for _, l := range lines {
		var ev struct{ Account string }
		json.Unmarshal([]byte(l), &ev)
		if ev.Account == "acc-7" {
			want = append(want, l)
		}
	}
	if !slices.Equal(mine, want) {
		t.Errorf("acc-7's block lacks some of its events:\n%q\nwant\n%q", mine, want)
	}
	if len(key) >= len(lines) {
		t.Errorf("acc-7's block is the whole stream (%d events): all 50 keys in one block", len(key))
	}

	from := all[120].StoredAtMs
	var later []string
	for _, r := range all {
		if r.StoredAtMs >= from {
			later = append(later, string(r.Json))
		}
	}
	if got := texts(read(&cepv1.TailRequest{Start: cepv1.TailStart_TAIL_START_TIME, StartTimeMs: from})); !slices.Equal(got, later) {
		t.Errorf("from %d: %d events, want the %d stored since", from, len(got), len(later))
	}
	testutil.EventuallyEvery(t, 5*time.Second, poll, func() error {
		if n := consumers(); n != consumers0 {
			return fmt.Errorf("%d consumers on the source's stream after the reads, %d before", n, consumers0)
		}
		return nil
	})
}
