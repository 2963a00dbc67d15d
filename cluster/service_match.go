package cluster

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cepcluster/cep/api"
	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
)

type matchBackend struct{ s *Service }

func (b matchBackend) Tail(ctx context.Context, r *cepv1.TailRequest, send func(*cepv1.Record) error) error {
	p := b.s.n.Meta().Patterns[r.Pattern]
	if p == nil || p.Deleted {
		return fmt.Errorf("%w: pattern %q", api.ErrNotFound, r.Pattern)
	}
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{p.OutputSubject}, DeliverPolicy: jetstream.DeliverNewPolicy}
	switch r.Start {
	case cepv1.TailStart_TAIL_START_ALL:
		cfg.DeliverPolicy = jetstream.DeliverAllPolicy
	case cepv1.TailStart_TAIL_START_SEQUENCE:
		cfg.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
		cfg.OptStartSeq = r.StartSequence
	}
	cons, err := b.s.n.js.OrderedConsumer(ctx, OutputStream, cfg)
	if err != nil {
		return fmt.Errorf("%w: %v", api.ErrUnavailable, err)
	}
	it, err := cons.Messages()
	if err != nil {
		return fmt.Errorf("%w: %v", api.ErrUnavailable, err)
	}
	defer it.Stop()
	go func() {
		<-ctx.Done()
		it.Stop()
	}()
	for {
		msg, err := it.Next()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("%w: %v", api.ErrUnavailable, err)
		}
		var head struct {
			Type, ID, Pattern, Key string
		}
		_ = json.Unmarshal(msg.Data(), &head)
		rec := &cepv1.Record{Type: head.Type, Id: head.ID, Pattern: head.Pattern, Key: head.Key, Json: msg.Data()}
		if md, err := msg.Metadata(); err == nil {
			rec.Sequence = md.Sequence.Stream
		}
		if err := send(rec); err != nil {
			return err
		}
	}
}
