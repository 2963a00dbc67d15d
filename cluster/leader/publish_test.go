package leader

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cepcluster/cep/shard"
)

// A record NATS does not take is summarised on a dead-letter subject
// within the bounds, whatever its subject: a re-keyed event's on its
// derived source's, an output record's under cep.deadletter.output.
func TestUndeliverableSubjectWithinBounds(t *testing.T) {
	longTok := strings.Repeat("k", 5000)
	for _, tc := range []struct {
		rec  shard.OutRecord
		want string
	}{
		{shard.OutRecord{ID: "fw-orders.k0123abcd-7", Subject: "orders.k0123abcd." + longTok, Payload: []byte(`{"customer":"x"}`)}, "cep.deadletter.orders.k0123abcd"},
		{shard.OutRecord{ID: "r1", Subject: "cep.out." + longTok, Payload: []byte(`{}`)}, "cep.deadletter.output"},
		{shard.OutRecord{ID: "r2", Subject: "cep.out.lfl", Payload: []byte(`{}`)}, "cep.deadletter.output.lfl"},
	} {
		subject, data := undeliverable(tc.rec, "why", true)
		if subject != tc.want {
			t.Errorf("%s: summary on %q, want %q", tc.rec.ID, subject, tc.want)
		}
		var sum struct {
			Subject      string
			SubjectBytes int
			ID, Reason   string
			Data         json.RawMessage
		}
		if err := json.Unmarshal(data, &sum); err != nil || sum.ID != tc.rec.ID || sum.Reason != "why" || sum.SubjectBytes != len(tc.rec.Subject) ||
			len(sum.Subject) > 200 || string(sum.Data) != string(tc.rec.Payload) {
			t.Errorf("%s: summary %s", tc.rec.ID, data)
		}
		if _, data := undeliverable(tc.rec, "why", false); strings.Contains(string(data), `"data"`) {
			t.Errorf("%s: summary without data carries it: %s", tc.rec.ID, data)
		}
	}
}

// Errors about the message itself are refusals for good; NATS being away
// or the stream missing are not.
func TestRefusedForGood(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nats.ErrBadSubject, true},
		{nats.ErrMaxPayload, true},
		{fmt.Errorf("publish: %w", &jetstream.APIError{ErrorCode: jetstream.JSErrCodeStreamMessageExceedsMaximum}), true},
		{nats.ErrConnectionClosed, false},
		{nats.ErrNoResponders, false},
		{jetstream.ErrNoStreamResponse, false},
		{&jetstream.APIError{ErrorCode: jetstream.JSErrCodeStreamNotFound}, false},
		{context.DeadlineExceeded, false},
	} {
		if got := refusedForGood(tc.err); got != tc.want {
			t.Errorf("refusedForGood(%v) = %v", tc.err, got)
		}
	}
}
