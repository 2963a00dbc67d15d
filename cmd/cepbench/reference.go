package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

const (
	refStream  = "BENCH_REF"
	refSubject = "benchref"
)

// refResult is the plain JetStream consumer the cluster is compared with.
type refResult struct {
	Events              int       `json:"events"`
	PublishSeconds      float64   `json:"publish_seconds"`
	PublishEventsPerSec float64   `json:"publish_events_per_sec"`
	ConsumeSeconds      float64   `json:"consume_seconds"`
	EventsPerSec        float64   `json:"events_per_sec"` // the median run's
	RunsEventsPerSec    []float64 `json:"runs_events_per_sec"`
	FetchBatch          int       `json:"fetch_batch"`
	Ack                 string    `json:"ack"`
	// CPU is the machine's over all the reads (each read the same events)
	CPU *cpuUsage `json:"machine_cpu,omitempty"`
	// Own is the benchmark process's (the NATS server and the consumer)
	Own *ownCPU `json:"own_cpu,omitempty"`
}

// runReference publishes the events to a plain stream (no subject
// transform) and reads them back with a pull consumer: Fetch in batches,
// explicit acknowledgements (the last message of each batch with the
// AckAll policy, or every message with --ref-ack each). The rate is the
// events over the time from the first Fetch to the last acknowledgement
// (confirmed by the server). The stream is read runs times, each time by a
// new consumer, and the median rate is the reference (this machine's rates
// vary by a third from one read to the next). The stream is deleted
// afterwards.
func runReference(ctx context.Context, nc *nats.Conn, p *publisher, evs *events, nkeys, batch int, ackEach bool, runs int, log *slog.Logger) (refResult, error) {
	res := refResult{Events: evs.len(), FetchBatch: batch, Ack: "all"}
	if ackEach {
		res.Ack = "each"
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return res, err
	}
	if err := js.DeleteStream(ctx, refStream); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		return res, err
	}
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name: refStream, Subjects: []string{refSubject + ".*"}, Storage: jetstream.FileStorage, Retention: jetstream.LimitsPolicy,
	})
	if err != nil {
		return res, fmt.Errorf("create %s: %w", refStream, err)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := js.DeleteStream(dctx, refStream); err != nil {
			log.Warn("delete reference stream", "err", err)
		}
	}()

	log.Info("reference: publishing", "events", evs.len(), "stream", refStream)
	pub, err := p.publishAll(ctx, evs, subjects(refSubject, nkeys))
	if err != nil {
		return res, fmt.Errorf("reference publish: %w", err)
	}
	res.PublishSeconds = pub.Seconds()
	res.PublishEventsPerSec = float64(evs.len()) / pub.Seconds()

	cpu, own := startCPU(), startOwn(nil)
	for i := range runs {
		d, err := consumeReference(ctx, st, fmt.Sprintf("ref%d", i), evs.len(), batch, ackEach, log)
		if err != nil {
			return res, err
		}
		res.RunsEventsPerSec = append(res.RunsEventsPerSec, float64(evs.len())/d.Seconds())
	}
	res.CPU = cpu.stop(runs * evs.len())
	if res.Own, err = own.stop(runs * evs.len()); err != nil {
		log.Warn("reference: own CPU unknown", "err", err)
	}
	rates := slices.Clone(res.RunsEventsPerSec)
	slices.Sort(rates)
	res.EventsPerSec = rates[len(rates)/2]
	res.ConsumeSeconds = float64(evs.len()) / res.EventsPerSec
	return res, nil
}

// consumeReference reads the whole reference stream once with a new
// durable pull consumer and returns the time from the first Fetch to the
// last acknowledgement.
func consumeReference(ctx context.Context, st jetstream.Stream, name string, n, batch int, ackEach bool, log *slog.Logger) (time.Duration, error) {
	policy := jetstream.AckAllPolicy
	if ackEach {
		policy = jetstream.AckExplicitPolicy
	}
	cons, err := st.CreateConsumer(ctx, jetstream.ConsumerConfig{
		Durable: name, AckPolicy: policy, DeliverPolicy: jetstream.DeliverAllPolicy,
		MaxAckPending: 10 * batch, AckWait: 5 * time.Minute,
	})
	if err != nil {
		return 0, fmt.Errorf("reference consumer: %w", err)
	}
	log.Info("reference: consuming", "consumer", name, "batch", batch, "ack", policy)
	got, empty := 0, 0
	start := time.Now()
	for got < n {
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		b, err := cons.Fetch(min(batch, n-got), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return 0, fmt.Errorf("fetch: %w", err)
		}
		var last jetstream.Msg
		for m := range b.Messages() {
			got++
			last = m
			if ackEach && got < n {
				if err := m.Ack(); err != nil {
					return 0, err
				}
			}
		}
		if err := b.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
			return 0, fmt.Errorf("fetch: %w", err)
		}
		if last == nil {
			if empty++; empty >= 3 {
				return 0, fmt.Errorf("reference consumer: %d of %d messages, then nothing for 3 fetches", got, n)
			}
			continue
		}
		empty = 0
		switch {
		case got == n:
			actx, cancel := context.WithTimeout(ctx, 10*time.Second)
			err = last.DoubleAck(actx)
			cancel()
		case !ackEach:
			err = last.Ack()
		}
		if err != nil {
			return 0, fmt.Errorf("ack: %w", err)
		}
	}
	return time.Since(start), nil
}
