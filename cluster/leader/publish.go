package leader

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/hashicorp/raft"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cepcluster/cep/keygroup"
	"github.com/cepcluster/cep/shard"
)

// headerRoom is what a published record's headers (message id) may take
// of the server's max payload.
const headerRoom = 1024

// oversized is what is published instead of a record larger than the NATS
// server's max payload: on keygroup.DeadLetterRoot + "output.<rest of the
// record's subject>", the record's subject, id, type, pattern, key and
// times, its events counted by stage, and the reason. Forwarded events
// and dead letters of input events are never larger than the input they
// carry, so in practice this is a match or timeout with many events.
func oversized(o shard.OutRecord, max int64) (subject string, data []byte) {
	type about struct {
		Type      string `json:"type,omitempty"`
		Pattern   string `json:"pattern,omitempty"`
		Key       string `json:"key,omitempty"`
		Start     *int64 `json:"start,omitempty"`
		End       *int64 `json:"end,omitempty"`
		TimeoutAt *int64 `json:"timeoutAt,omitempty"`
	}
	var rec struct {
		about
		Events map[string][]json.RawMessage `json:"events"`
	}
	_ = json.Unmarshal(o.Payload, &rec) // what it holds is kept; a record is JSON
	out := struct {
		Subject string `json:"subject"`
		ID      string `json:"id"`
		Reason  string `json:"reason"`
		about
		Events map[string]int `json:"events,omitempty"`
	}{Subject: o.Subject, ID: o.ID, about: rec.about, Events: map[string]int{},
		Reason: fmt.Sprintf("the record's %d bytes exceed the NATS server's max payload of %d", len(o.Payload), max)}
	for stage, evs := range rec.Events {
		out.Events[stage] = len(evs)
	}
	data, _ = json.Marshal(out)
	rest := strings.TrimPrefix(strings.TrimPrefix(o.Subject, keygroup.OutputSubjectRoot), keygroup.DeadLetterRoot)
	return keygroup.DeadLetterRoot + "output." + rest, data
}

// publishRetrying runs publish until the session ends, starting it again
// after an error (JetStream not taking the output: the stream gone, full,
// unreachable) with a delay that doubles up to 5 s (with jitter), so that the session
// and its reading stay up — reading pauses by itself once the outbox
// holds its limit — and the node does not spin at the rate of the failure.
// Losing the leadership ends it.
func (r *Leader) publishRetrying(ctx context.Context) error {
	retry := newRetryDelay()
	for {
		retry.started()
		err := r.publish(ctx)
		if err == nil || ctx.Err() != nil || errors.Is(err, shard.ErrNotLeader) || !r.sh.IsLeader() {
			return err
		}
		d := retry.next()
		r.log.Warn("publishing the outbox failed; retrying", "err", err, "in", d)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(d):
		}
	}
}

// retryDelay spaces out the attempts of something that keeps failing:
// the first retry after about 100 ms, each next one after about twice the
// delay, up to about 5 s, and after about 100 ms again once an attempt
// lasted 10 s. Each delay is drawn from ±50 % of that (backoff's
// randomization): the leaders of many shards that lose NATS at the same
// moment then do not retry against it all at the same moments.
type retryDelay struct {
	b     *backoff.ExponentialBackOff
	began time.Time
}

func newRetryDelay() *retryDelay {
	return &retryDelay{b: &backoff.ExponentialBackOff{
		InitialInterval: 100 * time.Millisecond, RandomizationFactor: 0.5, Multiplier: 2, MaxInterval: 5 * time.Second,
	}}
}

// started records the start of an attempt.
func (r *retryDelay) started() { r.began = time.Now() }

// next is the delay before the attempt after the one that just failed.
func (r *retryDelay) next() time.Duration {
	const settled = 10 * time.Second
	if time.Since(r.began) > settled {
		r.b.Reset()
	}
	return r.b.NextBackOff()
}

// publish sends the outbox to JetStream, each record with its id as the
// message id (so a re-publish after failover is de-duplicated), and logs
// an acknowledgement once JetStream has stored them.
func (r *Leader) publish(ctx context.Context) error {
	// records per round: bounds the publishes awaiting their acks
	const round = 4096
	applied := r.sh.FSM().Applied()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	var sent uint64 // highest outbox seq published in this term
	// the acknowledgement of the previous round is logged while the next
	// round is published (one in flight)
	var acking raft.ApplyFuture
	waitAck := func() error {
		if acking == nil {
			return nil
		}
		f := acking
		acking = nil
		return shard.Result(ctx, f)
	}
	defer waitAck()
	// refused are the records JetStream refused for good in this term, by
	// outbox seq, with why: each is published as a dead-letter summary
	// instead, and acknowledged through the log like any record, so every
	// replica drops it from its outbox
	refused := map[uint64]string{}
round:
	for {
		var recs []shard.OutRecord
		r.sh.FSM().View(func(s *shard.State, _ uint64) {
			ob := s.Outbox()
			i := sort.Search(len(ob), func(i int) bool { return ob[i].Seq > sent })
			recs = append(recs, ob[i:min(len(ob), i+round)]...)
		})
		if len(recs) > 0 {
			futures := make([]jetstream.PubAckFuture, 0, len(recs))
			max := r.env.NATS().MaxPayload() // the server's, known once connected
			for _, o := range recs {
				msg := &nats.Msg{Subject: o.Subject, Data: o.Payload, Header: nats.Header{}}
				switch bad := keygroup.CheckSubjectBounds(o.Subject); {
				case refused[o.Seq] != "":
					// JetStream refused it before: it would at every try
					msg.Subject, msg.Data = undeliverable(o, refused[o.Seq], false)
				case bad != nil:
					// NATS would close the node's connection for it (a
					// control line too long), at every try and on every
					// replica that takes the shard over
					msg.Subject, msg.Data = undeliverable(o, "its subject "+bad.Error(), true)
					r.env.Metrics.Refused(RefusedSubject)
					r.log.Warn("an output record's subject is past the bound on subjects: a summary goes to the dead-letter subject",
						"id", o.ID, "subject_bytes", len(o.Subject), "err", bad, "dead_letter", msg.Subject)
				case int64(len(o.Payload)) > max-headerRoom:
					// the server would refuse it at every try and the shard
					// would never publish past it
					msg.Subject, msg.Data = oversized(o, max)
					r.env.Metrics.Refused(RefusedPayload)
					r.log.Warn("an output record exceeds the NATS max payload: its summary goes to the dead-letter subject",
						"id", o.ID, "subject", o.Subject, "bytes", len(o.Payload), "max_payload", max, "dead_letter", msg.Subject)
				}
				if strings.HasPrefix(o.ID, "fw-") {
					// a forwarded event: its readers skip a second copy by
					// its origin position, so the server need not track it
					msg.Header.Set(forwardHeader, o.ID)
				} else {
					msg.Header.Set(jetstream.MsgIDHeader, o.ID)
				}
				f, err := r.env.JetStream().PublishMsgAsync(msg)
				if err != nil {
					if refusedForGood(err) && refused[o.Seq] == "" {
						refused[o.Seq] = "NATS refused it: " + err.Error()
						r.env.Metrics.Refused(RefusedServer)
						r.log.Warn("NATS refuses an output record: a summary goes to the dead-letter subject", "id", o.ID, "err", err)
						continue round
					}
					return err
				}
				futures = append(futures, f)
			}
			for i, f := range futures {
				select {
				case <-f.Ok():
				case err := <-f.Err():
					if o := recs[i]; refusedForGood(err) && refused[o.Seq] == "" {
						// the round again, this record's summary in its
						// place (the records before it are de-duplicated)
						refused[o.Seq] = "JetStream refused it: " + err.Error()
						r.env.Metrics.Refused(RefusedServer)
						r.log.Warn("JetStream refuses an output record: a summary goes to the dead-letter subject", "id", o.ID, "err", err)
						continue round
					}
					return err
				case <-ctx.Done():
					return nil
				}
			}
			sent = recs[len(recs)-1].Seq
			if err := waitAck(); err != nil {
				return err
			}
			if !r.sh.IsLeader() {
				return shard.ErrNotLeader
			}
			acking = r.sh.ProposeAsync(&shard.Batch{Ops: []shard.Op{shard.AckOp{Seq: sent}}})
			continue
		}
		if err := waitAck(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-applied:
		case <-tick.C:
		}
	}
}

// refusedForGood reports whether a publish error is about the message
// itself (its subject, its size), so that publishing it again fails
// again, rather than about NATS being unreachable or the stream missing.
func refusedForGood(err error) bool {
	if errors.Is(err, nats.ErrBadSubject) || errors.Is(err, nats.ErrMaxPayload) || errors.Is(err, nats.ErrBadHeaderMsg) {
		return true
	}
	var api *jetstream.APIError
	if errors.As(err, &api) {
		switch api.ErrorCode {
		case jetstream.JSErrCodeStreamMessageExceedsMaximum, jetstream.JSErrCodeBadRequest:
			return true
		}
	}
	return false
}

// undeliverable is what is published instead of a record NATS does not
// take (reason): a summary naming the record's id, the start and length
// of its subject and the reason, with the record itself when withData
// (only its subject was refused: it is within the max payload). It goes
// to the dead-letter subject of its source for a forwarded event
// (DeadLetterRoot + the derived source's name), else, as oversized
// records do, to DeadLetterRoot + "output." + the rest of its subject, or
// DeadLetterRoot + "output" when that is past the bounds.
func undeliverable(o shard.OutRecord, reason string, withData bool) (subject string, data []byte) {
	subject = keygroup.DeadLetterRoot + "output"
	rest := strings.TrimPrefix(strings.TrimPrefix(o.Subject, keygroup.OutputSubjectRoot), keygroup.DeadLetterRoot)
	if s := subject + "." + rest; !strings.HasPrefix(o.ID, "fw-") && keygroup.CheckSubjectBounds(s) == nil {
		subject = s
	}
	if strings.HasPrefix(o.ID, "fw-") {
		// "<origin>.k<hash>.<key token>"
		if toks := strings.SplitN(o.Subject, ".", 3); len(toks) == 3 {
			if s := keygroup.DeadLetterRoot + toks[0] + "." + toks[1]; keygroup.CheckSubjectBounds(s) == nil {
				subject = s
			}
		}
	}
	head := o.Subject
	if len(head) > 128 {
		head = head[:128] + "…"
	}
	out := struct {
		Subject      string          `json:"subject"`
		SubjectBytes int             `json:"subjectBytes"`
		ID           string          `json:"id"`
		Reason       string          `json:"reason"`
		Data         json.RawMessage `json:"data,omitempty"`
	}{Subject: strings.ToValidUTF8(head, "?"), SubjectBytes: len(o.Subject), ID: o.ID, Reason: reason}
	if withData && json.Valid(o.Payload) {
		out.Data = o.Payload
	}
	data, _ = json.Marshal(out)
	return subject, data
}
