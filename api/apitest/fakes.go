// Package apitest provides fake API backends for tests: structs of XxxFunc
// fields, so a test sets only the methods it exercises; an unset method
// fails with ErrUnset.
package apitest

import (
	"context"
	"errors"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
)

// ErrUnset is returned by a fake method the test did not set (an Internal
// error at the client).
var ErrUnset = errors.New("fake: method not set by the test")

func call[Req, Res any](f func(context.Context, *Req) (*Res, error), ctx context.Context, req *Req) (*Res, error) {
	if f == nil {
		return nil, ErrUnset
	}
	return f(ctx, req)
}

// Patterns fakes api.PatternBackend.
type Patterns struct {
	ValidateFunc func(context.Context, *cepv1.ValidatePatternRequest) (*cepv1.ValidatePatternResponse, error)
	DeployFunc   func(context.Context, *cepv1.DeployPatternRequest) (*cepv1.DeployPatternResponse, error)
	UpdateFunc   func(context.Context, *cepv1.UpdatePatternRequest) (*cepv1.UpdatePatternResponse, error)
	DeleteFunc   func(context.Context, *cepv1.DeletePatternRequest) (*cepv1.DeletePatternResponse, error)
	ListFunc     func(context.Context, *cepv1.ListPatternsRequest) (*cepv1.ListPatternsResponse, error)
	GetFunc      func(context.Context, *cepv1.GetPatternRequest) (*cepv1.GetPatternResponse, error)
	ExplainFunc  func(context.Context, *cepv1.ExplainPatternRequest) (*cepv1.ExplainPatternResponse, error)
	InspectFunc  func(context.Context, *cepv1.InspectKeyRequest) (*cepv1.InspectKeyResponse, error)
	StatsFunc    func(context.Context, *cepv1.GetPatternStatsRequest) (*cepv1.GetPatternStatsResponse, error)
}

func (f *Patterns) Stats(ctx context.Context, req *cepv1.GetPatternStatsRequest) (*cepv1.GetPatternStatsResponse, error) {
	return call(f.StatsFunc, ctx, req)
}

func (f *Patterns) Inspect(ctx context.Context, req *cepv1.InspectKeyRequest) (*cepv1.InspectKeyResponse, error) {
	return call(f.InspectFunc, ctx, req)
}

func (f *Patterns) Explain(ctx context.Context, req *cepv1.ExplainPatternRequest) (*cepv1.ExplainPatternResponse, error) {
	return call(f.ExplainFunc, ctx, req)
}

func (f *Patterns) Validate(ctx context.Context, req *cepv1.ValidatePatternRequest) (*cepv1.ValidatePatternResponse, error) {
	return call(f.ValidateFunc, ctx, req)
}

func (f *Patterns) Deploy(ctx context.Context, req *cepv1.DeployPatternRequest) (*cepv1.DeployPatternResponse, error) {
	return call(f.DeployFunc, ctx, req)
}

func (f *Patterns) Update(ctx context.Context, req *cepv1.UpdatePatternRequest) (*cepv1.UpdatePatternResponse, error) {
	return call(f.UpdateFunc, ctx, req)
}

func (f *Patterns) Delete(ctx context.Context, req *cepv1.DeletePatternRequest) (*cepv1.DeletePatternResponse, error) {
	return call(f.DeleteFunc, ctx, req)
}

func (f *Patterns) List(ctx context.Context, req *cepv1.ListPatternsRequest) (*cepv1.ListPatternsResponse, error) {
	return call(f.ListFunc, ctx, req)
}

func (f *Patterns) Get(ctx context.Context, req *cepv1.GetPatternRequest) (*cepv1.GetPatternResponse, error) {
	return call(f.GetFunc, ctx, req)
}

// Sources fakes api.SourceBackend.
type Sources struct {
	CreateFunc func(context.Context, *cepv1.CreateSourceRequest) (*cepv1.CreateSourceResponse, error)
	ListFunc   func(context.Context, *cepv1.ListSourcesRequest) (*cepv1.ListSourcesResponse, error)
	GetFunc    func(context.Context, *cepv1.GetSourceRequest) (*cepv1.GetSourceResponse, error)
	DeleteFunc func(context.Context, *cepv1.DeleteSourceRequest) (*cepv1.DeleteSourceResponse, error)
	SampleFunc func(context.Context, *cepv1.SampleSourceRequest) (*cepv1.SampleSourceResponse, error)
}

// Sample makes Sources an api.SourceSampleBackend too.
func (f *Sources) Sample(ctx context.Context, req *cepv1.SampleSourceRequest) (*cepv1.SampleSourceResponse, error) {
	return call(f.SampleFunc, ctx, req)
}

func (f *Sources) Create(ctx context.Context, req *cepv1.CreateSourceRequest) (*cepv1.CreateSourceResponse, error) {
	return call(f.CreateFunc, ctx, req)
}

func (f *Sources) List(ctx context.Context, req *cepv1.ListSourcesRequest) (*cepv1.ListSourcesResponse, error) {
	return call(f.ListFunc, ctx, req)
}

func (f *Sources) Get(ctx context.Context, req *cepv1.GetSourceRequest) (*cepv1.GetSourceResponse, error) {
	return call(f.GetFunc, ctx, req)
}

func (f *Sources) Delete(ctx context.Context, req *cepv1.DeleteSourceRequest) (*cepv1.DeleteSourceResponse, error) {
	return call(f.DeleteFunc, ctx, req)
}

// Cluster fakes api.ClusterBackend.
type Cluster struct {
	StatusFunc func(context.Context, *cepv1.GetStatusRequest) (*cepv1.GetStatusResponse, error)
	ShardsFunc func(context.Context, *cepv1.ListShardsRequest) (*cepv1.ListShardsResponse, error)
	RemoveFunc func(context.Context, *cepv1.RemoveNodeRequest) (*cepv1.RemoveNodeResponse, error)
	SplitFunc  func(context.Context, *cepv1.SplitShardRequest) (*cepv1.SplitShardResponse, error)
}

func (f *Cluster) SplitShard(ctx context.Context, req *cepv1.SplitShardRequest) (*cepv1.SplitShardResponse, error) {
	return call(f.SplitFunc, ctx, req)
}

func (f *Cluster) Status(ctx context.Context, req *cepv1.GetStatusRequest) (*cepv1.GetStatusResponse, error) {
	return call(f.StatusFunc, ctx, req)
}

func (f *Cluster) Shards(ctx context.Context, req *cepv1.ListShardsRequest) (*cepv1.ListShardsResponse, error) {
	return call(f.ShardsFunc, ctx, req)
}

func (f *Cluster) RemoveNode(ctx context.Context, req *cepv1.RemoveNodeRequest) (*cepv1.RemoveNodeResponse, error) {
	return call(f.RemoveFunc, ctx, req)
}

// Savepoints fakes api.SavepointBackend.
type Savepoints struct {
	CreateFunc  func(context.Context, *cepv1.CreateSavepointRequest) (*cepv1.CreateSavepointResponse, error)
	ListFunc    func(context.Context, *cepv1.ListSavepointsRequest) (*cepv1.ListSavepointsResponse, error)
	RestoreFunc func(context.Context, *cepv1.RestoreSavepointRequest) (*cepv1.RestoreSavepointResponse, error)
	DeleteFunc  func(context.Context, *cepv1.DeleteSavepointRequest) (*cepv1.DeleteSavepointResponse, error)
}

func (f *Savepoints) Create(ctx context.Context, req *cepv1.CreateSavepointRequest) (*cepv1.CreateSavepointResponse, error) {
	return call(f.CreateFunc, ctx, req)
}

func (f *Savepoints) List(ctx context.Context, req *cepv1.ListSavepointsRequest) (*cepv1.ListSavepointsResponse, error) {
	return call(f.ListFunc, ctx, req)
}

func (f *Savepoints) Restore(ctx context.Context, req *cepv1.RestoreSavepointRequest) (*cepv1.RestoreSavepointResponse, error) {
	return call(f.RestoreFunc, ctx, req)
}

func (f *Savepoints) Delete(ctx context.Context, req *cepv1.DeleteSavepointRequest) (*cepv1.DeleteSavepointResponse, error) {
	return call(f.DeleteFunc, ctx, req)
}

// Matches fakes api.MatchBackend.
type Matches struct {
	TailFunc func(context.Context, *cepv1.TailRequest, func(*cepv1.Record) error) error
}

func (f *Matches) Tail(ctx context.Context, req *cepv1.TailRequest, send func(*cepv1.Record) error) error {
	if f.TailFunc == nil {
		return ErrUnset
	}
	return f.TailFunc(ctx, req, send)
}

// PublishingCluster fakes an api.ClusterBackend that is also an
// api.PublishAccessBackend and an api.SubscribeAccessBackend.
type PublishingCluster struct {
	*Cluster
	AccessFunc    func(context.Context, *cepv1.GetPublishAccessRequest) (*cepv1.GetPublishAccessResponse, error)
	SubscribeFunc func(context.Context, *cepv1.GetSubscribeAccessRequest) (*cepv1.GetSubscribeAccessResponse, error)
}

func (f *PublishingCluster) SubscribeAccess(ctx context.Context, req *cepv1.GetSubscribeAccessRequest) (*cepv1.GetSubscribeAccessResponse, error) {
	return call(f.SubscribeFunc, ctx, req)
}

func (f *PublishingCluster) PublishAccess(ctx context.Context, req *cepv1.GetPublishAccessRequest) (*cepv1.GetPublishAccessResponse, error) {
	return call(f.AccessFunc, ctx, req)
}
