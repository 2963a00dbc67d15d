package api

import (
	"context"
	"errors"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
)

// Fake backends: each method calls its XxxFunc field, or fails with
// errUnset (an Internal error at the client) when the test left it nil.

var errUnset = errors.New("fake: method not set by the test")

func callFake[Req, Res any](f func(context.Context, *Req) (*Res, error), ctx context.Context, req *Req) (*Res, error) {
	if f == nil {
		return nil, errUnset
	}
	return f(ctx, req)
}

var (
	_ PatternBackend   = (*fakePatterns)(nil)
	_ SourceBackend    = (*fakeSources)(nil)
	_ ClusterBackend   = (*fakeCluster)(nil)
	_ SavepointBackend = (*fakeSavepoints)(nil)
	_ MatchBackend     = (*fakeMatches)(nil)
)

type fakePatterns struct {
	ValidateFunc func(context.Context, *cepv1.ValidatePatternRequest) (*cepv1.ValidatePatternResponse, error)
	DeployFunc   func(context.Context, *cepv1.DeployPatternRequest) (*cepv1.DeployPatternResponse, error)
	UpdateFunc   func(context.Context, *cepv1.UpdatePatternRequest) (*cepv1.UpdatePatternResponse, error)
	DeleteFunc   func(context.Context, *cepv1.DeletePatternRequest) (*cepv1.DeletePatternResponse, error)
	ListFunc     func(context.Context, *cepv1.ListPatternsRequest) (*cepv1.ListPatternsResponse, error)
	GetFunc      func(context.Context, *cepv1.GetPatternRequest) (*cepv1.GetPatternResponse, error)
}

func (f *fakePatterns) Validate(ctx context.Context, req *cepv1.ValidatePatternRequest) (*cepv1.ValidatePatternResponse, error) {
	return callFake(f.ValidateFunc, ctx, req)
}

func (f *fakePatterns) Deploy(ctx context.Context, req *cepv1.DeployPatternRequest) (*cepv1.DeployPatternResponse, error) {
	return callFake(f.DeployFunc, ctx, req)
}

func (f *fakePatterns) Update(ctx context.Context, req *cepv1.UpdatePatternRequest) (*cepv1.UpdatePatternResponse, error) {
	return callFake(f.UpdateFunc, ctx, req)
}

func (f *fakePatterns) Delete(ctx context.Context, req *cepv1.DeletePatternRequest) (*cepv1.DeletePatternResponse, error) {
	return callFake(f.DeleteFunc, ctx, req)
}

func (f *fakePatterns) List(ctx context.Context, req *cepv1.ListPatternsRequest) (*cepv1.ListPatternsResponse, error) {
	return callFake(f.ListFunc, ctx, req)
}

func (f *fakePatterns) Get(ctx context.Context, req *cepv1.GetPatternRequest) (*cepv1.GetPatternResponse, error) {
	return callFake(f.GetFunc, ctx, req)
}

type fakeSources struct {
	CreateFunc func(context.Context, *cepv1.CreateSourceRequest) (*cepv1.CreateSourceResponse, error)
	ListFunc   func(context.Context, *cepv1.ListSourcesRequest) (*cepv1.ListSourcesResponse, error)
	GetFunc    func(context.Context, *cepv1.GetSourceRequest) (*cepv1.GetSourceResponse, error)
}

func (f *fakeSources) Create(ctx context.Context, req *cepv1.CreateSourceRequest) (*cepv1.CreateSourceResponse, error) {
	return callFake(f.CreateFunc, ctx, req)
}

func (f *fakeSources) List(ctx context.Context, req *cepv1.ListSourcesRequest) (*cepv1.ListSourcesResponse, error) {
	return callFake(f.ListFunc, ctx, req)
}

func (f *fakeSources) Get(ctx context.Context, req *cepv1.GetSourceRequest) (*cepv1.GetSourceResponse, error) {
	return callFake(f.GetFunc, ctx, req)
}

type fakeCluster struct {
	StatusFunc func(context.Context, *cepv1.GetStatusRequest) (*cepv1.GetStatusResponse, error)
	ShardsFunc func(context.Context, *cepv1.ListShardsRequest) (*cepv1.ListShardsResponse, error)
}

func (f *fakeCluster) Status(ctx context.Context, req *cepv1.GetStatusRequest) (*cepv1.GetStatusResponse, error) {
	return callFake(f.StatusFunc, ctx, req)
}

func (f *fakeCluster) Shards(ctx context.Context, req *cepv1.ListShardsRequest) (*cepv1.ListShardsResponse, error) {
	return callFake(f.ShardsFunc, ctx, req)
}

type fakeSavepoints struct {
	CreateFunc  func(context.Context, *cepv1.CreateSavepointRequest) (*cepv1.CreateSavepointResponse, error)
	ListFunc    func(context.Context, *cepv1.ListSavepointsRequest) (*cepv1.ListSavepointsResponse, error)
	RestoreFunc func(context.Context, *cepv1.RestoreSavepointRequest) (*cepv1.RestoreSavepointResponse, error)
}

func (f *fakeSavepoints) Create(ctx context.Context, req *cepv1.CreateSavepointRequest) (*cepv1.CreateSavepointResponse, error) {
	return callFake(f.CreateFunc, ctx, req)
}

func (f *fakeSavepoints) List(ctx context.Context, req *cepv1.ListSavepointsRequest) (*cepv1.ListSavepointsResponse, error) {
	return callFake(f.ListFunc, ctx, req)
}

func (f *fakeSavepoints) Restore(ctx context.Context, req *cepv1.RestoreSavepointRequest) (*cepv1.RestoreSavepointResponse, error) {
	return callFake(f.RestoreFunc, ctx, req)
}

type fakeMatches struct {
	TailFunc func(context.Context, *cepv1.TailRequest, func(*cepv1.Record) error) error
}

func (f *fakeMatches) Tail(ctx context.Context, req *cepv1.TailRequest, send func(*cepv1.Record) error) error {
	if f.TailFunc == nil {
		return errUnset
	}
	return f.TailFunc(ctx, req, send)
}

// allFakes returns a Backends with every service mounted on empty fakes.
func allFakes() (Backends, *fakePatterns, *fakeSources, *fakeCluster, *fakeSavepoints, *fakeMatches) {
	p, s, c, sp, m := &fakePatterns{}, &fakeSources{}, &fakeCluster{}, &fakeSavepoints{}, &fakeMatches{}
	return Backends{Patterns: p, Sources: s, Cluster: c, Savepoints: sp, Matches: m}, p, s, c, sp, m
}
