package main

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cepcluster/cep/api"
	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
)

// cepctl calls again what the cluster answered it could not do for a
// moment: a read, a change the server says it did not apply, and a change
// with a request id (one of its own, the same on every try), which the
// cluster applies once; never another change that may have been applied.
func TestRetriesUnavailable(t *testing.T) {
	var lists, deletes, removes atomic.Int32
	var deleteIDs []string
	deleteErr := fmt.Errorf("%w: no metadata leader yet (the cluster is electing one): the change was not applied; retry", api.ErrUnavailable)
	mayHave := fmt.Errorf("%w: the metadata leader changed while the change was committed; it may have been applied: check before you retry", api.ErrUnavailable)
	url := startAPI(t, api.Backends{Cluster: &fakeCluster{
		RemoveFunc: func(context.Context, *cepv1.RemoveNodeRequest) (*cepv1.RemoveNodeResponse, error) {
			removes.Add(1)
			return nil, mayHave
		},
	}, Patterns: &fakePatterns{
		ListFunc: func(context.Context, *cepv1.ListPatternsRequest) (*cepv1.ListPatternsResponse, error) {
			if lists.Add(1) <= 2 {
				return nil, fmt.Errorf("%w: shard 3 has no leader", api.ErrUnavailable)
			}
			return &cepv1.ListPatternsResponse{Patterns: []*cepv1.Pattern{{Name: "login-fail", Version: 1}}}, nil
		},
		DeleteFunc: func(_ context.Context, r *cepv1.DeletePatternRequest) (*cepv1.DeletePatternResponse, error) {
			deleteIDs = append(deleteIDs, r.RequestId)
			if deletes.Add(1) <= 2 {
				return nil, deleteErr
			}
			return &cepv1.DeletePatternResponse{}, nil
		},
	}})

	r := cepctl(t, url, "pattern", "list").mustOK(t)
	if !hasRowPrefix(r.stdout, "login-fail") || lists.Load() != 3 {
		t.Errorf("after %d calls:\n%s", lists.Load(), r.stdout)
	}
	cepctl(t, url, "pattern", "delete", "login-fail").mustOK(t)
	if deletes.Load() != 3 {
		t.Errorf("delete called %d times, want 3", deletes.Load())
	}

	if id := deleteIDs[0]; id == "" || deleteIDs[1] != id || deleteIDs[2] != id {
		t.Errorf("the delete's tries sent request ids %q, want one id on every try", deleteIDs)
	}

	// with a request id, a change that may have been applied is sent
	// again (with the same id); the next command has an id of its own
	deletes.Store(0)
	deleteErr = mayHave
	cepctl(t, url, "pattern", "delete", "login-fail").mustOK(t)
	if deletes.Load() != 3 || deleteIDs[3] == deleteIDs[0] || deleteIDs[4] != deleteIDs[3] {
		t.Errorf("a change with a request id that may have been applied: %d tries, ids %q", deletes.Load(), deleteIDs)
	}
	// without one (node remove takes none), it is called once
	cepctl(t, url, "node", "remove", "n3").mustFail(t, "the cluster is unavailable: ", "it may have been applied")
	if removes.Load() != 1 {
		t.Errorf("a change without a request id that may have been applied sent %d times", removes.Load())
	}

	// bounded: a read still unavailable after the budget fails
	defer func(b time.Duration) { retryBudget = b }(retryBudget)
	retryBudget = 500 * time.Millisecond
	lists.Store(-100)
	cepctl(t, url, "pattern", "list").mustFail(t, "the cluster is unavailable: ", "shard 3 has no leader")
	if n := lists.Load() + 100; n < 2 || n > 5 {
		t.Errorf("%d calls in a budget of 500ms with backoffs of 100ms doubling", n)
	}
}

// hasRowPrefix reports whether a line of out starts with the field first.
func hasRowPrefix(out, first string) bool {
	for _, r := range fields(out) {
		if len(r) > 0 && r[0] == first {
			return true
		}
	}
	return false
}
