package cluster

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"

	"connectrpc.com/connect"

	"github.com/cepcluster/cep/api"
	"github.com/cepcluster/cep/api/apitest"
	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/api/gen/cep/v1/cepv1connect"
	"github.com/cepcluster/cep/cluster/meta"
)

// Each kind of refused metadata command reaches a client with its Connect
// code and the message clients have always got, from the metadata leader
// and through a node that forwards the change to it.
func TestMapErrKinds(t *testing.T) {
	m := meta.New()
	apply := func(idx uint64, c meta.Command) error {
		_, err := m.Apply(idx, c)
		return err
	}
	if err := errors.Join(
		apply(1, meta.Init{ClusterID: "c", KeyGroups: 256, Shards: []meta.ShardInfo{{ID: 1, First: 0, Last: 255, Replicas: []string{"n1"}}}}),
		apply(2, meta.PutSource{Source: &meta.Source{Name: "bank", Stream: "BANK"}}),
		apply(3, meta.PutPattern{Create: true, Pattern: &meta.Pattern{Name: "p", Sources: []string{"bank"}}}),
	); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		err  error
		code connect.Code
		msg  string
	}{
		{"exists", apply(4, meta.PutSource{Source: &meta.Source{Name: "bank"}}), connect.CodeAlreadyExists,
			`api: already exists: source "bank"`},
		{"exists with detail", apply(5, meta.PutPattern{Create: true, Pattern: &meta.Pattern{Name: "p", Sources: []string{"bank"}}}), connect.CodeAlreadyExists,
			`api: already exists: pattern "p" (version 1); use update to change it`},
		{"not found", apply(6, meta.DeletePattern{Name: "nope"}), connect.CodeNotFound,
			`api: not found: pattern "nope"`},
		{"precondition", apply(7, meta.DeleteSource{Name: "bank"}), connect.CodeFailedPrecondition,
			`api: failed precondition: source "bank" is read by pattern(s) p; delete them first`},
		{"conflict", apply(7, meta.PutPattern{Expect: 9, Pattern: &meta.Pattern{Name: "p", Sources: []string{"bank"}}}), connect.CodeFailedPrecondition,
			`api: failed precondition: cluster: changed concurrently; retry: pattern "p" is at version 1`},
		{"invalid", apply(8, meta.SplitShard{ShardID: 1, At: 4}), connect.CodeInvalidArgument,
			`api: invalid argument: shard 1 (key groups 0-255) splits at a multiple of 8 after its first key group, not at 4`},
		{"no leader", errNotMetaLeader, connect.CodeUnavailable,
			`api: unavailable: no metadata leader yet (the cluster is electing one): the change was not applied; retry`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			leader := httptest.NewServer(api.NewHandler(api.Backends{Patterns: &apitest.Patterns{
				DeleteFunc: func(context.Context, *cepv1.DeletePatternRequest) (*cepv1.DeletePatternResponse, error) {
					return nil, mapErr(tc.err)
				}}}))
			defer leader.Close()
			// a node that does not lead returns the leader's answer as is
			follower := httptest.NewServer(api.NewHandler(api.Backends{Patterns: &apitest.Patterns{
				DeleteFunc: func(ctx context.Context, r *cepv1.DeletePatternRequest) (*cepv1.DeletePatternResponse, error) {
					res, err := cepv1connect.NewPatternServiceClient(leader.Client(), leader.URL).DeletePattern(ctx, connect.NewRequest(r))
					if err != nil {
						return nil, err
					}
					return res.Msg, nil
				}}}))
			defer follower.Close()
			for _, srv := range []*httptest.Server{leader, follower} {
				_, err := cepv1connect.NewPatternServiceClient(srv.Client(), srv.URL).DeletePattern(context.Background(), connect.NewRequest(&cepv1.DeletePatternRequest{}))
				var ce *connect.Error
				if !errors.As(err, &ce) || ce.Code() != tc.code || ce.Message() != tc.msg {
					t.Errorf("%v:\n got %v\nwant %v: %s", tc.err, err, tc.code, tc.msg)
				}
			}
		})
	}
}

func TestSourceSubjects(t *testing.T) {
	for _, tc := range []struct {
		subj  string
		have  []string
		valid bool
		want  bool
	}{
		{"shop.orders.eu.>", []string{"shop.orders.>"}, true, true},
		{"shop.orders.*", []string{"shop.orders.>"}, true, true},
		{"shop.orders.eu", []string{"shop.orders.*"}, true, true},
		{"shop.orders.*", []string{"shop.orders.eu"}, true, false},
		{"shop.orders.>", []string{"shop.orders.*"}, true, false},
		{"shop.returns.>", []string{"shop.orders.>"}, true, false},
		{"shop.>", []string{"shop.orders.>", "shop.returns.>"}, true, false},
		{"a.b", []string{"a.b.c"}, true, false},
		{"a.b.c", []string{"a.b"}, true, false},
		{"a.*.c", []string{"a.*.*", "x"}, true, true},
		{"a.>.b", nil, false, false},
		{"a..b", nil, false, false},
		{"a.b*", nil, false, false},
		{"a b", nil, false, false},
		{"", nil, false, false},
	} {
		if err := validSubject(tc.subj); (err == nil) != tc.valid {
			t.Errorf("validSubject(%q) = %v, want valid %v", tc.subj, err, tc.valid)
		}
		if tc.valid {
			if got := coveredBy(tc.subj, tc.have); got != tc.want {
				t.Errorf("coveredBy(%q, %v) = %v, want %v", tc.subj, tc.have, got, tc.want)
			}
		}
	}
}

// A reader's documents compile one at a time on a node: a second waits
// for the first's turn to end, or gives up with its context.
func TestCompileTurns(t *testing.T) {
	s := &Service{compiling: make(chan struct{}, 1)}
	release, err := s.compileTurn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.compileTurn(ctx); !errors.Is(err, api.ErrUnavailable) {
		t.Fatalf("a second turn while the first runs: %v, want to wait and give up with its context", err)
	}
	release()
	release2, err := s.compileTurn(ctx) // free: taken even with a context that ended
	if err != nil {
		t.Fatalf("a turn after the first ended: %v", err)
	}
	release2()
}
