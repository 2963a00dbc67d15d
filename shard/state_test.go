package shard

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/cepcluster/cep/keygroup"
	"github.com/cepcluster/cep/nfa"
)

const abSpec = `{"name":"ab","key":"e.k","time":"e.ts","within":100,"stages":[{"name":"a","where":"e.t == \"A\""},{"name":"b","where":"e.t == \"B\""}]}`

func deployOp(spec string, version uint64, policy UpdatePolicy) *Deploy {
	var s struct {
		Name string `json:"name"`
	}
	json.Unmarshal([]byte(spec), &s)
	return &Deploy{Name: s.Name, Version: version, Spec: []byte(spec), Sources: []string{"src"}, Subject: "cep.out." + s.Name, Policy: policy}
}

func ev(pos uint64, k, t string, ts int64) Event {
	return Event{Pos: pos, Block: keygroup.BlockOf(keygroup.OfKey(k, 16), 16), Data: []byte(fmt.Sprintf(`{"k":%q,"t":%q,"ts":%d}`, k, t, ts))}
}

func eventsOp(es ...Event) EventsOp { return EventsOp{Source: "src", Events: es} }

func payloads(s *State) []string {
	var out []string
	for _, r := range s.Outbox() {
		out = append(out, r.Subject+" "+string(r.Payload))
	}
	return out
}

func TestApplyMatchesAndDedupes(t *testing.T) {
	s := NewState(0, 15, 16)
	s.Apply(&Batch{Ops: []Op{deployOp(abSpec, 1, PolicyReset)}})
	s.Apply(&Batch{Ops: []Op{eventsOp(ev(1, "x", "A", 10), ev(2, "x", "B", 20), ev(3, "x", "C", 30))}})
	// a replayed batch (e.g. re-read after failover) changes nothing
	s.Apply(&Batch{Ops: []Op{eventsOp(ev(1, "x", "A", 10), ev(2, "x", "B", 20), ev(3, "x", "C", 30))}})
	out := payloads(s)
	if len(out) != 1 || !strings.Contains(out[0], `"type":"match"`) || !strings.HasPrefix(out[0], "cep.out.ab ") {
		t.Fatalf("outbox: %v", out)
	}
	if c := s.Counters(); c.Duplicates != 3 || c.Events != 3 {
		t.Fatalf("counters: %+v", c)
	}
	var rec struct{ ID string }
	json.Unmarshal([]byte(strings.TrimPrefix(out[0], "cep.out.ab ")), &rec)
	if rec.ID == "" || rec.ID != s.Outbox()[0].ID {
		t.Fatalf("record id %q, outbox id %q", rec.ID, s.Outbox()[0].ID)
	}
	s.Apply(&Batch{Ops: []Op{AckOp{Seq: s.Outbox()[0].Seq}}})
	if len(s.Outbox()) != 0 {
		t.Fatal("ack did not truncate the outbox")
	}
}

func TestApplyDeadLetters(t *testing.T) {
	s := NewState(0, 15, 16)
	s.Apply(&Batch{Ops: []Op{deployOp(abSpec, 1, PolicyReset)}})
	s.Apply(&Batch{Ops: []Op{eventsOp(
		Event{Pos: 1, Block: 3, Data: []byte(`not json`)},
		Event{Pos: 2, Block: keygroup.BlockOf(keygroup.OfKey("x", 16), 16), Data: []byte(`{"k":"x","t":"A"}`)}, // no ts
		ev(3, "x", "A", 10),
	)}})
	out := payloads(s)
	if len(out) != 2 || !strings.HasPrefix(out[0], "cep.deadletter.src ") || !strings.Contains(out[1], `"reason":"time e.ts`) {
		t.Fatalf("outbox: %v", strings.Join(out, "\n"))
	}
	if c := s.Counters(); c.DeadLetters != 2 {
		t.Fatalf("counters %+v", c)
	}
}

// An event over MaxEventBytes is dead-lettered naming the bound and no
// pattern takes it; a dead letter carries at most MaxDeadLetterData of
// its event, with the event's size.
func TestApplyEventBytesBounded(t *testing.T) {
	s := NewState(0, 15, 16)
	s.Apply(&Batch{Ops: []Op{deployOp(abSpec, 1, PolicyReset)}})
	block := keygroup.BlockOf(keygroup.OfKey("x", 16), 16)
	pad := func(n int) string { return strings.Repeat("p", n) }
	big := []byte(fmt.Sprintf(`{"k":"x","t":"A","ts":10,"pad":%q}`, pad(MaxEventBytes)))
	// a valid event of 200 KiB with no time: refused by the pattern
	mid := []byte(fmt.Sprintf(`{"k":"x","t":"A","pad":%q}`, pad(200<<10)))
	s.Apply(&Batch{Ops: []Op{eventsOp(Event{Pos: 1, Block: block, Data: big}, Event{Pos: 2, Block: block, Data: mid}, ev(3, "x", "B", 20))}})
	type deadLetter struct {
		Pattern   string          `json:"pattern"`
		Reason    string          `json:"reason"`
		Text      string          `json:"text"`
		Truncated int             `json:"truncated"`
		Data      json.RawMessage `json:"data"`
	}
	var recs []deadLetter
	for _, r := range s.Outbox() {
		if r.Subject != DeadLetterSubject("src") {
			t.Fatalf("a record on %s: %.200s", r.Subject, r.Payload)
		}
		if len(r.Payload) > MaxDeadLetterData+1024 {
			t.Fatalf("a dead letter of %d bytes", len(r.Payload))
		}
		var one deadLetter
		if err := json.Unmarshal(r.Payload, &one); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, one)
	}
	if len(recs) != 2 {
		t.Fatalf("%d dead letters, want 2", len(recs))
	}
	if r := recs[0]; r.Pattern != "" || !strings.Contains(r.Reason, "MaxEventBytes") || r.Truncated != len(big) || len(r.Text) != MaxDeadLetterData || r.Data != nil {
		t.Fatalf("the event over MaxEventBytes: pattern %q, reason %q, truncated %d, text of %d bytes", r.Pattern, r.Reason, r.Truncated, len(r.Text))
	}
	if r := recs[1]; r.Pattern != "ab" || !strings.Contains(r.Reason, "time e.ts") || r.Truncated != len(mid) || len(r.Text) != MaxDeadLetterData {
		t.Fatalf("an event of 200 KiB refused by its pattern: pattern %q, reason %q, truncated %d, text of %d bytes", r.Pattern, r.Reason, r.Truncated, len(r.Text))
	}
}

// An event several patterns refuse gets one dead letter naming each
// refusal, carrying the event once (a bad event read by N patterns was
// written N times).
func TestApplyOneDeadLetterPerEvent(t *testing.T) {
	s := NewState(0, 15, 16)
	other := strings.Replace(abSpec, `"name":"ab"`, `"name":"other"`, 1)
	s.Apply(&Batch{Ops: []Op{deployOp(abSpec, 1, PolicyReset), deployOp(other, 2, PolicyReset)}})
	block := keygroup.BlockOf(keygroup.OfKey("x", 16), 16)
	s.Apply(&Batch{Ops: []Op{eventsOp(Event{Pos: 1, Block: block, Data: []byte(`{"k":"x","t":"A"}`)})}}) // no ts
	out := s.Outbox()
	if len(out) != 1 {
		t.Fatalf("%d dead letters for one event two patterns refuse, want 1: %v", len(out), payloads(s))
	}
	var rec struct {
		Pattern, Reason string
		Refusals        []struct{ Pattern, Reason string }
		Data            json.RawMessage
	}
	if err := json.Unmarshal(out[0].Payload, &rec); err != nil {
		t.Fatal(err)
	}
	if len(rec.Refusals) != 2 || rec.Refusals[0].Pattern != rec.Pattern || rec.Refusals[0].Reason != rec.Reason ||
		!strings.Contains(rec.Reason, "time e.ts") || !strings.Contains(rec.Refusals[1].Reason, "time e.ts") || rec.Refusals[0].Pattern == rec.Refusals[1].Pattern || len(rec.Data) == 0 {
		t.Fatalf("dead letter %s", out[0].Payload)
	}
	if c := s.Counters(); c.DeadLetters != 1 {
		t.Fatalf("dead-lettered events: %d", c.DeadLetters)
	}
	for _, pc := range s.PatternCounters() {
		if pc.DeadLetters != 1 {
			t.Fatalf("pattern %s counts %d refusals", pc.Name, pc.DeadLetters)
		}
	}
}

func TestUpdatePolicies(t *testing.T) {
	v2 := strings.Replace(abSpec, `"within":100`, `"within":50`, 1)
	for _, tc := range []struct {
		policy UpdatePolicy
		spec   string
		want   int // matches after the update for x's partial match started before it
	}{
		{PolicyReset, v2, 0},
		{PolicyDrain, v2, 1},
		{PolicyMigrate, v2, 1}, // x's partial match at stage b still fits
		{PolicyMigrate, strings.Replace(abSpec, `"name":"b"`, `"name":"c"`, 1), 0}, // stage b is gone
	} {
		s := NewState(0, 15, 16)
		s.Apply(&Batch{Ops: []Op{deployOp(abSpec, 1, PolicyReset), eventsOp(ev(1, "x", "A", 10), ev(2, "y", "C", 11))}})
		s.Apply(&Batch{Ops: []Op{deployOp(tc.spec, 2, tc.policy), eventsOp(ev(3, "x", "B", 20), ev(4, "z", "C", 30))}})
		n := 0
		for _, p := range payloads(s) {
			if strings.Contains(p, `"type":"match"`) {
				n++
			}
		}
		if n != tc.want {
			t.Errorf("policy %d: %d matches, want %d: %v", tc.policy, n, tc.want, payloads(s))
		}
		if tc.policy == PolicyDrain {
			if info := s.Patterns()[0]; info.Draining != 0 || info.Version != 2 {
				t.Errorf("after draining: %+v", info)
			}
		}
	}
}

func TestBatchRoundTrip(t *testing.T) {
	rekeyed := deployOp(abSpec, 8, PolicyMigrate)
	rekeyed.Reads = []string{"src.k0011aabb"}
	rekeyed.MaxPartialMatches, rekeyed.Records = -1, RecordMatch|RecordLate
	rekeyed.MaxKeys = 12345
	derived := ev(3, "z", "A", 12)
	derived.OriginPos = 77
	b := &Batch{Ops: []Op{
		deployOp(abSpec, 7, PolicyDrain),
		rekeyed,
		eventsOp(ev(1, "x", "A", 10), ev(2, "y", "B", 11), derived),
		ForwardOp{Source: "src", Target: "src.k0011aabb", Events: []Event{ev(4, "w", "B", 13)}, After: 3},
		WatermarkOp{Pattern: "ab", Time: -5},
		TickOp{Time: 1234},
		DeleteOp{Pattern: "ab"},
		AckOp{Seq: 99},
		SkipOp{Source: "src", Seq: 41},
		SkipOp{Source: "src", Target: "src.k0011aabb", Seq: 42},
	}}
	enc := b.Encode(nil)
	got, err := DecodeBatch(enc)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Encode(nil), enc) {
		t.Fatal("round trip changed the batch")
	}
	if !reflect.DeepEqual(got, b) {
		t.Fatalf("decoded %+v, want %+v", got, b)
	}
	for i := 0; i < len(enc); i++ {
		if _, err := DecodeBatch(enc[:i]); err == nil {
			t.Fatalf("truncated at %d decoded without error", i)
		}
	}
}

// Entries of batch version 3 (no bound, no record types in deployments),
// 4 (no bound on keys), 5 (no clock), 6 (no position entries of events
// follow on), 7 (no ingest time) and 8 (no bound on bytes held) are still
// read: logs and snapshots written by the releases before hold them.
func TestDecodesVersion3Batch(t *testing.T) {
	dep := deployOp(abSpec, 7, PolicyDrain)
	b := &Batch{Ops: []Op{dep, eventsOp(ev(1, "x", "A", 10))}}
	enc := b.Encode(nil)
	// version 3 wrote the deployment without the last five fields (zero
	// varints around a zero byte, the clock flag, the bound on bytes),
	// version 4 without the last three, version 5 without the last two,
	// 6 to 8 without the bound on bytes; before 7 the events came right
	// after their source, before 8 without their ingest time
	deployEnd := bytes.Index(enc, []byte("cep.out.ab")) + len("cep.out.ab") + 1 + 1 // subject, policy, no reads
	if !bytes.Equal(enc[deployEnd:deployEnd+5], []byte{0, 0, 0, 0, 0}) {
		t.Fatalf("unexpected encoding of the new fields: % x", enc[deployEnd:deployEnd+5])
	}
	after := deployEnd + 5 + 1 + 1 + len("src") // the events' kind and source
	if enc[after] != 0 || enc[after+1] != 0 {
		t.Fatalf("unexpected encoding of the position events follow on and the ingest time: % x", enc[after:after+2])
	}
	for version, n := range map[byte]int{3: 5, 4: 3, 5: 2, 6: 1, 7: 1, 8: 1} {
		deploy := slices.Concat([]byte{version}, enc[1:deployEnd+5-n])
		var old []byte
		switch version {
		case 7:
			old = slices.Concat(deploy, enc[deployEnd+5:after+1], enc[after+2:])
		case 8:
			old = slices.Concat(deploy, enc[deployEnd+5:])
		default:
			old = slices.Concat(deploy, enc[deployEnd+5:after], enc[after+2:])
		}
		got, err := DecodeBatch(old)
		if err != nil {
			t.Fatalf("version %d: %v", version, err)
		}
		if !reflect.DeepEqual(got, b) {
			t.Fatalf("version %d: decoded %+v, want %+v", version, got, b)
		}
	}
}

// A deployment's record types decide what reaches the outbox (the others
// are still counted), and its bound applies to its matchers.
func TestDeployRecordTypesAndBound(t *testing.T) {
	events := eventsOp(ev(1, "x", "A", 10), ev(2, "x", "A", 20), ev(3, "x", "A", 30), ev(4, "x", "B", 40), ev(5, "x", "A", 300), ev(6, "x", "A", 1))
	for _, c := range []struct {
		bound   int64
		records RecordTypes
		want    []string // record types in the outbox
		dropped uint64
	}{
		{0, 0, []string{"match", "match", "match", "late"}, 0},
		{0, RecordMatch, []string{"match", "match", "match"}, 0},
		{0, RecordTimeout | RecordLate, []string{"late"}, 0},
		{2, 0, []string{"match", "match", "late"}, 1},
		{-1, RecordMatch, []string{"match", "match", "match"}, 0},
	} {
		d := deployOp(abSpec, 1, PolicyReset)
		d.MaxPartialMatches, d.Records = c.bound, c.records
		s := NewState(0, 15, 16)
		s.Apply(&Batch{Ops: []Op{d, events}})
		var got []string
		for _, r := range s.Outbox() {
			var rec struct{ Type string }
			json.Unmarshal(r.Payload, &rec)
			got = append(got, rec.Type)
		}
		info := s.PatternFailures()[0]
		if !slices.Equal(got, c.want) || info.Dropped != c.dropped || s.Counters().Matches+s.Counters().Late != 4-c.dropped {
			t.Errorf("bound %d, records %b: outbox %v (want %v), dropped %d (want %d), counters %+v", c.bound, c.records, got, c.want, info.Dropped, c.dropped, s.Counters())
		}
	}
}

// OpSkip sets a source's positions (or a derived source's forwarding
// position) while no pattern reads it, lower ones too (a stream deleted and
// created again numbers from 1 again); once a pattern reads it, it only
// moves them up. The events up to it are re-reads, the ones after it are
// read.
func TestSkip(t *testing.T) {
	s := NewState(0, 15, 16)
	positions := func(source string, want uint64) {
		t.Helper()
		for kg := 0; kg < 16; kg++ {
			if p := s.Position(kg, source); p != want {
				t.Fatalf("%s: key group %d at %d, want %d", source, kg, p, want)
			}
		}
	}
	s.Apply(&Batch{Ops: []Op{SkipOp{Source: "src", Seq: 9}}})
	positions("src", 9)
	s.Apply(&Batch{Ops: []Op{SkipOp{Source: "src", Seq: 5}, deployOp(abSpec, 1, PolicyReset)}})
	positions("src", 5) // the stream was created again
	if !s.Reads("src") || s.Reads("other") {
		t.Fatalf("Reads: src %v, other %v", s.Reads("src"), s.Reads("other"))
	}
	s.Apply(&Batch{Ops: []Op{SkipOp{Source: "src", Seq: 3}}}) // read: only up
	positions("src", 5)
	s.Apply(&Batch{Ops: []Op{eventsOp(ev(4, "x", "A", 10), ev(5, "x", "B", 20), ev(6, "x", "A", 30), ev(7, "x", "B", 40), ev(8, "x", "C", 99))}})
	out := payloads(s)
	if c := s.Counters(); c.Duplicates != 2 || c.Events != 3 || len(out) != 1 || !strings.Contains(out[0], `"start":30,"end":40`) {
		t.Fatalf("counters %+v, outbox %v", c, out)
	}
	s.Apply(&Batch{Ops: []Op{SkipOp{Source: "src", Target: "src.kuser", Seq: 9}, SkipOp{Source: "src", Target: "src.kuser", Seq: 2}}})
	if f := s.Forwarded()["src.kuser"]; f != 2 {
		t.Fatalf("forwarded %d, want 2 (nothing reads src.kuser)", f)
	}
	byUser := deployOp(strings.NewReplacer(`"e.k"`, `"e.user"`, `"ab"`, `"byuser"`).Replace(abSpec), 1, PolicyReset)
	byUser.Reads = []string{"src.kuser"}
	s.Apply(&Batch{Ops: []Op{byUser, SkipOp{Source: "src", Target: "src.kuser", Seq: 1}}})
	if f := s.Forwarded()["src.kuser"]; f != 2 {
		t.Fatalf("forwarded %d, want 2 (byuser reads src.kuser)", f)
	}
}

// A pattern over two sources aligns them: the watermark waits for the
// slower one, and the faster one is paused once it runs maxDrift ahead.
func TestTwoSourcesAligned(t *testing.T) {
	// the same with source a read through a derived (re-keyed) source
	for _, readA := range []string{"a", "a.k01020304"} {
		spec := `{"name":"two","source":["a","b"],"key":"e.k","time":"e.ts","maxDrift":10,"stages":[{"name":"x","where":"e.t == \"A\""},{"name":"y","where":"e.t == \"B\""}]}`
		s := NewState(0, 15, 16)
		d := deployOp(spec, 1, PolicyReset)
		d.Sources = []string{"a", "b"}
		if readA != "a" {
			d.Reads = []string{readA, "b"}
		}
		s.Apply(&Batch{Ops: []Op{d, TickOp{Time: 1000}}})
		s.Apply(&Batch{Ops: []Op{
			EventsOp{Source: readA, Events: []Event{ev(1, "x", "A", 5), ev(2, "x", "N", 100)}},
			EventsOp{Source: "b", Events: []Event{ev(1, "x", "B", 6)}},
		}})
		if !s.Paused(readA) || s.Paused("b") {
			t.Fatalf("%s: paused: a=%v b=%v, want a only", readA, s.Paused(readA), s.Paused("b"))
		}
		if n := len(s.Outbox()); n != 0 {
			t.Fatalf("%s: %d records before b caught up", readA, n)
		}
		s.Apply(&Batch{Ops: []Op{EventsOp{Source: "b", Events: []Event{ev(2, "y", "N", 100)}}}})
		if len(s.Outbox()) != 1 || !strings.Contains(string(s.Outbox()[0].Payload), `"type":"match"`) {
			t.Fatalf("%s: outbox after b caught up: %v", readA, payloads(s))
		}
		if s.Paused(readA) {
			t.Fatalf("%s still paused", readA)
		}
	}
}

// keyIn returns a key whose key group of k satisfies ok.
func keyIn(t *testing.T, k int, ok func(kg int) bool) string {
	for i := 0; i < 100000; i++ {
		key := fmt.Sprintf("key-%d", i)
		if ok(keygroup.OfKey(key, k)) {
			return key
		}
	}
	t.Fatal("no such key")
	return ""
}

// An event stored in a block the shard reads but whose key belongs to a key
// group elsewhere was published on another key's subject: the shard owning
// its key never reads it, so it is dead-lettered with the subject to use.
// An event of a block shared with a neighbour shard (more shards than
// blocks) that belongs to the neighbour is skipped without a word.
func TestApplyForeignEvents(t *testing.T) {
	const k = 64 // 32 blocks of 2 key groups
	s := NewState(0, 4, k)
	s.Apply(&Batch{Ops: []Op{deployOp(abSpec, 1, PolicyReset)}})
	far := keyIn(t, k, func(kg int) bool { return kg > 5 })
	neighbour := keyIn(t, k, func(kg int) bool { return kg == 5 })
	mine := keyIn(t, k, func(kg int) bool { return kg == 4 })
	data := func(key string) []byte { return []byte(fmt.Sprintf(`{"k":%q,"t":"A","ts":1}`, key)) }
	s.Apply(&Batch{Ops: []Op{eventsOp(
		Event{Pos: 1, Block: 0, Data: data(far)},
		Event{Pos: 2, Block: 2, Data: data(neighbour)},
		Event{Pos: 3, Block: 2, Data: data(mine)},
		Event{Pos: 4, Block: 9, Data: data(far)}, // a block of another shard
	)}})
	out := payloads(s)
	if len(out) != 1 || !strings.Contains(out[0], "published on another key") || !strings.Contains(out[0], "publish it on src."+far) {
		t.Fatalf("outbox: %v", strings.Join(out, "\n"))
	}
	c := s.Counters()
	if c.Misrouted != 2 || c.DeadLetters != 1 || c.Events != 3 {
		t.Fatalf("counters %+v", c)
	}
	if st := s.Patterns(); len(st) != 1 {
		t.Fatalf("patterns %v", st)
	}
	if n := s.patterns[0].m.Keys(); n != 1 {
		t.Fatalf("%d keys hold state, want 1 (%s)", n, mine)
	}
}

// A pattern keyed by e.user on a source partitioned by account reads the
// derived source: the shard re-keying the source forwards each event
// through the outbox under the user's subject, once, and the derived
// events, even when forwarded twice, are matched once.
func TestForwardAndDerivedEvents(t *testing.T) {
	const derived = "src.kuser"
	spec := `{"name":"byuser","key":"e.user","time":"e.ts","stages":[{"name":"a","where":"e.t == \"A\""},{"name":"b","where":"e.t == \"B\""}]}`
	dep := deployOp(spec, 1, PolicyReset)
	dep.Reads = []string{derived}
	// a second pattern with the same key reads the same derived source
	dep2 := deployOp(strings.Replace(spec, `"byuser"`, `"byuser2"`, 1), 1, PolicyReset)
	dep2.Reads = []string{derived}
	s := NewState(0, 15, 16)
	s.Apply(&Batch{Ops: []Op{dep, dep2}})
	evs := []Event{
		{Pos: 7, Block: 1, Data: []byte(`{"account":"a1","user":"u1","t":"A","ts":1}`)},
		{Pos: 8, Block: 2, Data: []byte(`{"account":"a2","user":"u1","t":"B","ts":2}`)},
		{Pos: 9, Block: 3, Data: []byte(`{"account":"a3","t":"A","ts":3}`)}, // no user
	}
	s.Apply(&Batch{Ops: []Op{ForwardOp{Source: "src", Target: derived, Events: evs}}})
	s.Apply(&Batch{Ops: []Op{ForwardOp{Source: "src", Target: derived, Events: evs[:2]}}}) // again: nothing new
	out := s.Outbox()
	if len(out) != 3 || out[0].Subject != derived+".u1" || out[0].ID != ForwardID(derived, 7) || string(out[0].Payload) != string(evs[0].Data) ||
		out[1].ID != ForwardID(derived, 8) || out[2].Subject != DeadLetterSubject("src") {
		t.Fatalf("outbox: %+v", out)
	}
	if p, ok := ForwardedPos(derived, out[1].ID); !ok || p != 8 {
		t.Fatalf("ForwardedPos(%q) = %d, %v", out[1].ID, p, ok)
	}
	if s.Forwarded()[derived] != 9 {
		t.Fatalf("forwarded %v", s.Forwarded())
	}
	// the derived stream delivers them (the second copy of 7 after a
	// re-keying shard lost its place), plus a final event for the watermark
	kg := keygroup.OfKey("u1", 16)
	blk := keygroup.BlockOf(kg, 16)
	derivedEvents := []Event{
		{Pos: 1, Block: blk, Data: evs[0].Data, OriginPos: 7},
		{Pos: 2, Block: blk, Data: evs[0].Data, OriginPos: 7},
		{Pos: 3, Block: blk, Data: evs[1].Data, OriginPos: 8},
		{Pos: 4, Block: blk, Data: []byte(`{"user":"u1","t":"C","ts":10}`), OriginPos: 10},
	}
	s.Apply(&Batch{Ops: []Op{AckOp{Seq: out[len(out)-1].Seq}}})
	s.Apply(&Batch{Ops: []Op{EventsOp{Source: derived, Events: derivedEvents}}})
	got := payloads(s)
	if len(got) != 2 || !strings.Contains(got[0], `"pattern":"byuser"`) || !strings.Contains(got[1], `"pattern":"byuser2"`) {
		t.Fatalf("records: %v", strings.Join(got, "\n"))
	}
	for _, r := range got {
		if !strings.Contains(r, `"type":"match"`) || !strings.Contains(r, `"key":"u1"`) {
			t.Fatalf("record %s", r)
		}
	}
	// the forwarded positions survive a snapshot
	back := restore(t, 0, 15, snap(t, s, "x"))
	if back.Forwarded()[derived] != 9 {
		t.Fatalf("restored forwarded %v", back.Forwarded())
	}
}

// Two matches of the same events taken by different stages are different
// records and get different ids (with optional stages one event completes
// a match as the first stage and another as the second, often in different
// steps, where Record.Dup does not tell them apart); the same match gets
// the same id.
func TestRecordIDTellsStagesApart(t *testing.T) {
	ev := [][]byte{[]byte(`{"t":"B"}`)}
	rec := func(stages ...string) *nfa.Record {
		r := &nfa.Record{Type: "match", Pattern: "p", Key: "k", Positions: []uint64{7, 9}}
		for _, s := range stages {
			r.Events = append(r.Events, nfa.StageEvents{Stage: s, Events: ev})
		}
		return r
	}
	asFirst, asSecond, both := rec("s0", "s0"), rec("s1", "s1"), rec("s0", "s1")
	asFirst.Events = []nfa.StageEvents{{Stage: "s0", Events: append(ev, ev[0])}}
	asSecond.Events = []nfa.StageEvents{{Stage: "s1", Events: append(ev, ev[0])}}
	ids := map[string]string{}
	for name, r := range map[string]*nfa.Record{"s0:2": asFirst, "s1:2": asSecond, "s0:1 s1:1": both} {
		id := RecordID("p", 1, r)
		if other, ok := ids[id]; ok {
			t.Fatalf("%s and %s get the same id %s", name, other, id)
		}
		ids[id] = name
		again := *r
		if RecordID("p", 1, &again) != id {
			t.Fatalf("%s: the id of a copy differs", name)
		}
	}
}

// PatternFailures says what Patterns says of failed conditions and emitted
// fields, counted as the matcher counts them (here: every event lacks the
// field a condition reads).
func TestPatternFailures(t *testing.T) {
	s := NewState(0, 15, 16)
	spec := `{"name":"amounts","key":"e.k","time":"e.ts","emit":{"c":"e.currency"},"stages":[{"name":"a","where":"e.amount > 1"},{"name":"b","where":"e.t == \"B\""}]}`
	s.Apply(&Batch{Ops: []Op{deployOp(abSpec, 1, PolicyReset), deployOp(spec, 1, PolicyReset)}})
	s.Apply(&Batch{Ops: []Op{eventsOp(ev(1, "x", "A", 10), ev(2, "x", "B", 20), ev(3, "y", "A", 30), ev(4, "y", "C", 40))}})
	full, failures := s.Patterns(), s.PatternFailures()
	if len(full) != 2 || len(failures) != 2 {
		t.Fatalf("%d patterns, %d with failures", len(full), len(failures))
	}
	for i, f := range failures {
		p := full[i]
		if f.Name != p.Name || f.Version != p.Version || f.ConditionErrors != p.ConditionErrors || f.EmitErrors != p.EmitErrors ||
			f.FirstConditionError != p.FirstConditionError || f.FirstEmitError != p.FirstEmitError {
			t.Errorf("PatternFailures %+v, Patterns %+v", f, p)
		}
	}
	if f := failures[1]; f.Name != "amounts" || f.ConditionErrors == 0 || f.FirstConditionError != "e.amount > 1: no such key: amount" {
		t.Errorf("amounts: %+v", f)
	}
	if f := failures[0]; f.Name != "ab" || f.ConditionErrors != 0 || f.FirstConditionError != "" {
		t.Errorf("ab: %+v", f)
	}
}

// MapPositions moves a read source's positions down as well as up (unlike
// OpSkip): after it, the events numbered above the mapped position are
// read even where they are at or below what was applied before — a new
// stream's numbering.
func TestMapPositions(t *testing.T) {
	s := NewState(0, 15, 16)
	s.Apply(&Batch{Ops: []Op{deployOp(abSpec, 1, PolicyReset)}})
	s.Apply(&Batch{Ops: []Op{eventsOp(ev(1, "x", "N", 1), ev(2, "x", "N", 2), ev(3, "x", "N", 3))}})
	s.MapPositions("src", 0)
	for kg := 0; kg < 16; kg++ {
		if p := s.Position(kg, "src"); p != 0 {
			t.Fatalf("key group %d at %d after mapping to 0", kg, p)
		}
	}
	// the new stream's 1 and 2 are new events, not re-reads
	s.Apply(&Batch{Ops: []Op{eventsOp(ev(1, "x", "A", 10), ev(2, "x", "B", 20), ev(3, "x", "C", 99))}})
	if c := s.Counters(); c.Duplicates != 0 || len(s.Outbox()) != 1 {
		t.Fatalf("counters %+v, outbox %v", c, payloads(s))
	}
	s.MapForwarded("src.kuser", 7)
	if f := s.Forwarded()["src.kuser"]; f != 7 {
		t.Fatalf("forwarded %d, want 7", f)
	}
}
