package cluster

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cepcluster/cep/api"
	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/cluster/meta"
	"github.com/cepcluster/cep/internal/testutil"
	"github.com/cepcluster/cep/snapshot"
)

// planPositions against a real JetStream: a source whose stream is the
// saved one keeps its positions; one whose stream is another is refused
// without a mapping, naming the source and both identities, and mapped
// as asked with one (a derived source to its stream's end, its re-keying
// to its origin's mapped position); one the savepoint has no identity of
// keeps its positions unless a mapping is given.
func TestPlanPositions(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, js := testutil.JetStream(t, testutil.StartNATS(t, testutil.NATSOptions{}))
	streams := map[string]jetstream.Stream{}
	for _, name := range []string{"BANK", "BANK_K", "SAME", "OLD"} {
		st, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{strings.ToLower(name) + ".>"}})
		if err != nil {
			t.Fatal(err)
		}
		streams[name] = st
	}
	publish := func(subject string, n int) {
		for range n {
			if _, err := js.Publish(ctx, subject, []byte(`{}`)); err != nil {
				t.Fatal(err)
			}
		}
	}
	publish("bank.a", 5)
	publish("bank_k.a", 3)
	last, err := streams["BANK"].GetMsg(ctx, 5)
	if err != nil {
		t.Fatal(err)
	}
	from := last.Time.Add(time.Microsecond)
	testutil.Eventually(t, 5*time.Second, func() error {
		if !time.Now().After(from) {
			return errors.New("the clock has not passed the last message")
		}
		return nil
	})
	publish("bank.a", 2) // 6 and 7: at or after from
	created := func(name string) int64 {
		c, err := streamCreated(ctx, js, name)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	srcs := []meta.Source{
		{Name: "bank", Stream: "BANK"},
		{Name: "bank.k", Stream: "BANK_K", Origin: "bank"},
		{Name: "same", Stream: "SAME"},
		{Name: "old", Stream: "OLD"},
	}
	saved := []snapshot.Source{
		{Name: "bank", Stream: "BANK", StreamCreated: created("BANK") - 1},
		{Name: "bank.k", Stream: "BANK_K", StreamCreated: 1},
		{Name: "same", Stream: "SAME", StreamCreated: created("SAME")},
		{Name: "old", Stream: "OLD"}, // written before identities were
	}
	m := meta.New()
	mode := func(k cepv1.PositionMapping) positionMode { return positionMode{kind: k, from: from} }

	_, err = planPositions(ctx, js, m, srcs, saved, mode(cepv1.PositionMapping_POSITION_MAPPING_UNSPECIFIED))
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	if !errors.Is(err, api.ErrFailedPrecondition) || strings.Contains(msg, "\n") ||
		!strings.Contains(msg, `source "bank": the savepoint's positions count in stream `+snapshot.StreamIdentity("BANK", created("BANK")-1)+`, this cluster reads `+snapshot.StreamIdentity("BANK", created("BANK"))) ||
		!strings.Contains(msg, `source "bank.k"`) || strings.Contains(msg, `"same"`) || strings.Contains(msg, `"old"`) {
		t.Fatalf("without a mapping: %v", err)
	}

	for _, c := range []struct {
		kind                 cepv1.PositionMapping
		positions, forwarded map[string]uint64
	}{
		{cepv1.PositionMapping_POSITION_MAPPING_KEEP, map[string]uint64{}, map[string]uint64{}},
		{cepv1.PositionMapping_POSITION_MAPPING_FROM_START, map[string]uint64{"bank": 0, "bank.k": 3, "old": 0}, map[string]uint64{"bank.k": 0}},
		{cepv1.PositionMapping_POSITION_MAPPING_FROM_END, map[string]uint64{"bank": 7, "bank.k": 3, "old": 0}, map[string]uint64{"bank.k": 7}},
		{cepv1.PositionMapping_POSITION_MAPPING_FROM_TIME, map[string]uint64{"bank": 5, "bank.k": 3, "old": 0}, map[string]uint64{"bank.k": 5}},
	} {
		plan, err := planPositions(ctx, js, m, srcs, saved, mode(c.kind))
		if err != nil {
			t.Fatalf("%v: %v", c.kind, err)
		}
		if !equalMaps(plan.positions, c.positions) || !equalMaps(plan.forwarded, c.forwarded) {
			t.Errorf("%v: positions %v forwarded %v, want %v and %v", c.kind, plan.positions, plan.forwarded, c.positions, c.forwarded)
		}
		cmd := meta.RestoreSavepoint{Sources: append([]meta.Source(nil), srcs...)}
		plan.apply(&cmd)
		for _, s := range cmd.Sources {
			if s.StreamCreated != created(s.Stream) {
				t.Errorf("%v: source %s restored with stream identity %d, its stream's is %d", c.kind, s.Name, s.StreamCreated, created(s.Stream))
			}
		}
	}
	// a time after every message: only what comes next
	plan, err := planPositions(ctx, js, m, srcs[:1], saved, positionMode{kind: cepv1.PositionMapping_POSITION_MAPPING_FROM_TIME, from: time.Now().Add(time.Hour)})
	if err != nil || plan.positions["bank"] != 7 {
		t.Fatalf("from a time after every message: %v %v", plan, err)
	}
}

func equalMaps(a, b map[string]uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
