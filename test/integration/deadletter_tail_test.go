package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/cluster"
)

// receiveN takes n records of a tail, failing the test on an error or
// an end before them.
func receiveN(t *testing.T, s *connect.ServerStreamForClient[cepv1.Record], n int) []*cepv1.Record {
	t.Helper()
	var out []*cepv1.Record
	for len(out) < n && s.Receive() {
		out = append(out, s.Msg())
	}
	if len(out) < n {
		t.Fatalf("the tail ended after %d records, want %d: %v", len(out), n, s.Err())
	}
	return out
}

// MatchService.Tail with dead_letters streams the dead letters the output
// stream holds, record for record what a JetStream reader of
// cep.deadletter.<source> gets, all of them or one source's, with the
// limits of any tail; pattern records never show among them.
func TestTailDeadLetters(t *testing.T) {
	tc := newSingle(t, 2*time.Minute, cluster.Config{TailMaxStreams: 3, TailMaxStreamsPerCaller: 3})
	c := tc.deployOnBank(0, lflSpec)
	ctx, cancel := context.WithCancel(tc.ctx)
	defer cancel()

	// bad input: not JSON, and an event without the pattern's time field
	tc.publishRaw("bank.acc-5", "not json", `{"account":"acc-5","type":"LOGIN"}`)
	want := tc.waitOutputs("cep.deadletter.bank", 2, 20*time.Second)

	all, err := c.matches.Tail(ctx, req(&cepv1.TailRequest{DeadLetters: true, Start: cepv1.TailStart_TAIL_START_ALL}))
	if err != nil {
		t.Fatal(err)
	}
	defer all.Close()
	bank, err := c.matches.Tail(ctx, req(&cepv1.TailRequest{DeadLetters: true, DeadLetterSource: "bank", Start: cepv1.TailStart_TAIL_START_ALL}))
	if err != nil {
		t.Fatal(err)
	}
	defer bank.Close()
	for name, s := range map[string]*connect.ServerStreamForClient[cepv1.Record]{"all": all, "bank": bank} {
		got := receiveN(t, s, len(want))
		for i, r := range got {
			var body struct{ Source, Pattern, Reason string }
			if err := json.Unmarshal(r.Json, &body); err != nil {
				t.Fatalf("%s: record %d is not JSON: %s", name, i, r.Json)
			}
			if string(r.Json) != want[i] || r.Type != "deadletter" || r.Id == "" || r.Sequence == 0 || body.Source != "bank" || body.Reason == "" || r.Pattern != body.Pattern {
				t.Errorf("%s: record %d: %+v\nwant %s", name, i, r, want[i])
			}
		}
	}

	// a later dead letter of another source reaches the tail of all, not
	// that of bank; the next of bank reaches both, in order
	if _, err := c.sources.CreateSource(tc.ctx, req(&cepv1.CreateSourceRequest{Name: "shop", Key: "e.customer"})); err != nil {
		t.Fatal(err)
	}
	if _, err := c.patterns.DeployPattern(tc.ctx, req(&cepv1.DeployPatternRequest{Spec: strings.NewReplacer("name: lfl", "name: shop-lfl", "source: bank", "source: shop", "key: e.account", "key: e.customer").Replace(string(lflSpec))})); err != nil {
		t.Fatal(err)
	}
	tc.publishRaw("shop.c-1", "shop junk")
	tc.waitOutputs("cep.deadletter.shop", 1, 20*time.Second)
	tc.publishRaw("bank.acc-6", "bank junk")
	if r := receiveN(t, all, 2); !strings.Contains(string(r[0].Json), `"text":"shop junk"`) || !strings.Contains(string(r[1].Json), `"text":"bank junk"`) {
		t.Errorf("the tail of all dead letters: %s, %s", r[0].Json, r[1].Json)
	}
	if r := receiveN(t, bank, 1); !strings.Contains(string(r[0].Json), `"text":"bank junk"`) {
		t.Errorf("the tail of bank's dead letters got %s", r[0].Json)
	}

	// the same limit as any tail: a third open, a fourth refused
	// (a Tail call returns with its first record: these have some)
	third, err := c.matches.Tail(ctx, req(&cepv1.TailRequest{DeadLetters: true, DeadLetterSource: "shop", Start: cepv1.TailStart_TAIL_START_ALL}))
	if err != nil {
		t.Fatal(err)
	}
	defer third.Close()
	receiveN(t, third, 1)
	fourth, err := c.matches.Tail(ctx, req(&cepv1.TailRequest{DeadLetters: true}))
	if err == nil {
		fourth.Receive()
		err = fourth.Err()
		fourth.Close()
	}
	if connect.CodeOf(err) != connect.CodeResourceExhausted {
		t.Errorf("a fourth tail on a node serving 3: %v, want ResourceExhausted", err)
	}

	for _, bad := range []*cepv1.TailRequest{
		{DeadLetters: true, Pattern: "lfl"},
		{DeadLetters: true, DeadLetterSource: "*"},
		{DeadLetters: true, DeadLetterSource: "bank.>"},
		{DeadLetterSource: "bank"},
	} {
		s, err := c.matches.Tail(ctx, req(bad))
		if err == nil {
			s.Receive()
			err = s.Err()
			s.Close()
		}
		if connect.CodeOf(err) != connect.CodeInvalidArgument {
			t.Errorf("%v: %v, want InvalidArgument", bad, err)
		}
	}
}

// A pattern's tail ends, without error, when the pattern is deleted (the
// API's promise), after the records it had; a tail of dead letters goes on.
func TestTailEndsWhenThePatternIsDeleted(t *testing.T) {
	tc := newSingle(t, time.Minute, cluster.Config{})
	c := tc.deployOnBank(0, lflSpec)
	// another pattern on bank, so that its events are still read (and
	// dead-lettered) once lfl is gone
	tc.deploy(c, &cepv1.DeployPatternRequest{Spec: strings.Replace(string(lflSpec), "name: lfl", "name: other", 1)})
	ctx, cancel := context.WithCancel(tc.ctx)
	defer cancel()
	lines := bankEvents(7, 200)
	tc.publish("bank", func(e map[string]any) string { return fmt.Sprint(e["account"]) }, lines)
	want := tc.waitOutputs("cep.out.lfl", 1, 20*time.Second)
	s, err := c.matches.Tail(ctx, req(&cepv1.TailRequest{Pattern: "lfl", Start: cepv1.TailStart_TAIL_START_ALL}))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// (a stream call returns with its first record: one dead letter first)
	tc.publishRaw("bank.acc-5", "not json")
	tc.waitOutputs("cep.deadletter.bank", 1, 20*time.Second)
	dl, err := c.matches.Tail(ctx, req(&cepv1.TailRequest{DeadLetters: true, Start: cepv1.TailStart_TAIL_START_ALL}))
	if err != nil {
		t.Fatal(err)
	}
	defer dl.Close()
	receiveN(t, dl, 1)
	got := receiveN(t, s, len(want))
	if string(got[0].Json) != want[0] {
		t.Fatalf("first record %s, want %s", got[0].Json, want[0])
	}
	if _, err := c.patterns.DeletePattern(tc.ctx, req(&cepv1.DeletePatternRequest{Name: "lfl"})); err != nil {
		t.Fatal(err)
	}
	ended := make(chan error, 1)
	go func() {
		for s.Receive() {
		}
		ended <- s.Err()
	}()
	select {
	case err := <-ended:
		if err != nil {
			t.Fatalf("the tail of a deleted pattern ended with %v, want no error", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the tail of lfl still runs 10 s after the pattern was deleted")
	}
	// the dead letters' tail is not the pattern's: it still delivers
	tc.publishRaw("bank.acc-5", "not json")
	if r := receiveN(t, dl, 1); r[0].Type != "deadletter" {
		t.Fatalf("dead letter tail after the delete: %+v", r[0])
	}
}
