package main

import (
	"context"
	"fmt"
	"time"

	"connectrpc.com/connect"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/nfa"
)

// historyQuery says which of a source's stored events to read: the events
// the source's JetStream stream still holds, read through the API's tail
// of a source (the reader role; nothing in the cluster changes).
type historyQuery struct {
	Source string
	// Key, when set, reads only the part of the stream that holds this key
	// of the source's own key expression (other keys of that part come
	// too: Keep tells them apart).
	Key string
	// From and To bound the time the events were stored (zero: no bound);
	// To is exclusive.
	From, To time.Time
	// Last, when above 0, keeps only the last Last events read (after the
	// other bounds and Keep).
	Last int
	// Keep, when set, says which events to keep.
	Keep func(event []byte) bool
	// Max, when above 0, bounds the events kept (without Last): the history
	// is held in memory, and a read past it fails.
	Max int
}

// storedEvent is one event of a source's history.
type storedEvent struct {
	Source   string
	Sequence uint64 // its stream sequence
	StoredAt int64  // Unix milliseconds
	JSON     []byte
}

// readSourceHistory reads the stored events q asks for, in stream order,
// up to those stored when the read began.
func readSourceHistory(ctx context.Context, c *apiClients, q historyQuery) ([]storedEvent, error) {
	req := &cepv1.TailRequest{Source: q.Source, SourceKey: q.Key, Start: cepv1.TailStart_TAIL_START_ALL, StopAtEnd: true}
	if !q.From.IsZero() {
		req.Start, req.StartTimeMs = cepv1.TailStart_TAIL_START_TIME, max(q.From.UnixMilli(), 1)
	}
	stream, err := c.matches.Tail(ctx, connect.NewRequest(req))
	if err != nil {
		return nil, fmt.Errorf("read source %s: %w", q.Source, err)
	}
	defer stream.Close()
	var out []storedEvent
	for stream.Receive() {
		r := stream.Msg()
		if !q.To.IsZero() && r.GetStoredAtMs() >= q.To.UnixMilli() {
			return trimLast(out, q.Last), nil // stored in order: the rest is later still
		}
		if r.GetType() != "event" {
			// a server from before source tails answers with a pattern's tail
			return nil, fmt.Errorf("read source %s: the server does not serve a source's stored events (it predates them)", q.Source)
		}
		if q.Keep != nil && !q.Keep(r.GetJson()) {
			continue
		}
		if q.Max > 0 && q.Last == 0 && len(out) == q.Max {
			return nil, fmt.Errorf("read source %s: more than %d events stored; read a shorter time", q.Source, q.Max)
		}
		out = append(out, storedEvent{Source: q.Source, Sequence: r.GetSequence(), StoredAt: r.GetStoredAtMs(), JSON: r.GetJson()})
		if q.Last > 0 && len(out) > 2*q.Last {
			out = append(out[:0], out[len(out)-q.Last:]...) // bounded memory
		}
	}
	if err := stream.Err(); err != nil {
		return nil, fmt.Errorf("read source %s: %w", q.Source, err)
	}
	return trimLast(out, q.Last), nil
}

func trimLast(events []storedEvent, last int) []storedEvent {
	if last > 0 && len(events) > last {
		return events[len(events)-last:]
	}
	return events
}

// keepKey keeps the events whose key under p's key expression is key:
// what Key reads is a part of the stream that holds other keys too. An
// event whose key cannot be computed is left out.
func keepKey(p *nfa.Pattern, key string) func([]byte) bool {
	m := nfa.NewMatcher(p)
	return func(event []byte) bool {
		in, _, isWM, err := nfa.ParseLine(event)
		if err != nil || isWM {
			return false
		}
		k, err := m.KeyOf(in)
		return err == nil && k == key
	}
}
