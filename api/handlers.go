package api

import (
	"context"
	"errors"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/api/gen/cep/v1/cepv1connect"
)

// The handlers are thin adapters: unwrap the request, call the backend, map
// its error, wrap the response. They hold no state beyond the backend, so
// they are as safe for concurrent use as the backend is.

var (
	_ cepv1connect.PatternServiceHandler   = (*patternHandler)(nil)
	_ cepv1connect.SourceServiceHandler    = (*sourceHandler)(nil)
	_ cepv1connect.ClusterServiceHandler   = (*clusterHandler)(nil)
	_ cepv1connect.SavepointServiceHandler = (*savepointHandler)(nil)
	_ cepv1connect.MatchServiceHandler     = (*matchHandler)(nil)
)

// errNoResponse is what a client sees when a backend breaks its contract by
// returning neither a response nor an error.
var errNoResponse = errors.New("api: backend returned no response")

// unary runs one backend call for a unary procedure.
func unary[Req, Res any](ctx context.Context, req *connect.Request[Req], call func(context.Context, *Req) (*Res, error)) (*connect.Response[Res], error) {
	res, err := call(ctx, req.Msg)
	if err != nil {
		return nil, toConnectError(err)
	}
	if res == nil {
		return nil, connect.NewError(connect.CodeInternal, errNoResponse)
	}
	return connect.NewResponse(res), nil
}

type patternHandler struct{ b PatternBackend }

func (h *patternHandler) ValidatePattern(ctx context.Context, req *connect.Request[cepv1.ValidatePatternRequest]) (*connect.Response[cepv1.ValidatePatternResponse], error) {
	return unary(ctx, req, h.b.Validate)
}

func (h *patternHandler) DeployPattern(ctx context.Context, req *connect.Request[cepv1.DeployPatternRequest]) (*connect.Response[cepv1.DeployPatternResponse], error) {
	return unary(ctx, req, h.b.Deploy)
}

func (h *patternHandler) UpdatePattern(ctx context.Context, req *connect.Request[cepv1.UpdatePatternRequest]) (*connect.Response[cepv1.UpdatePatternResponse], error) {
	return unary(ctx, req, h.b.Update)
}

func (h *patternHandler) DeletePattern(ctx context.Context, req *connect.Request[cepv1.DeletePatternRequest]) (*connect.Response[cepv1.DeletePatternResponse], error) {
	return unary(ctx, req, h.b.Delete)
}

func (h *patternHandler) ListPatterns(ctx context.Context, req *connect.Request[cepv1.ListPatternsRequest]) (*connect.Response[cepv1.ListPatternsResponse], error) {
	return unary(ctx, req, h.b.List)
}

func (h *patternHandler) GetPattern(ctx context.Context, req *connect.Request[cepv1.GetPatternRequest]) (*connect.Response[cepv1.GetPatternResponse], error) {
	return unary(ctx, req, h.b.Get)
}

func (h *patternHandler) ExplainPattern(ctx context.Context, req *connect.Request[cepv1.ExplainPatternRequest]) (*connect.Response[cepv1.ExplainPatternResponse], error) {
	return unary(ctx, req, h.b.Explain)
}

func (h *patternHandler) InspectKey(ctx context.Context, req *connect.Request[cepv1.InspectKeyRequest]) (*connect.Response[cepv1.InspectKeyResponse], error) {
	return unary(ctx, req, h.b.Inspect)
}

func (h *patternHandler) GetPatternStats(ctx context.Context, req *connect.Request[cepv1.GetPatternStatsRequest]) (*connect.Response[cepv1.GetPatternStatsResponse], error) {
	return unary(ctx, req, h.b.Stats)
}

type sourceHandler struct{ b SourceBackend }

func (h *sourceHandler) CreateSource(ctx context.Context, req *connect.Request[cepv1.CreateSourceRequest]) (*connect.Response[cepv1.CreateSourceResponse], error) {
	return unary(ctx, req, h.b.Create)
}

func (h *sourceHandler) ListSources(ctx context.Context, req *connect.Request[cepv1.ListSourcesRequest]) (*connect.Response[cepv1.ListSourcesResponse], error) {
	return unary(ctx, req, h.b.List)
}

func (h *sourceHandler) GetSource(ctx context.Context, req *connect.Request[cepv1.GetSourceRequest]) (*connect.Response[cepv1.GetSourceResponse], error) {
	return unary(ctx, req, h.b.Get)
}

func (h *sourceHandler) DeleteSource(ctx context.Context, req *connect.Request[cepv1.DeleteSourceRequest]) (*connect.Response[cepv1.DeleteSourceResponse], error) {
	return unary(ctx, req, h.b.Delete)
}

// SampleSource is served when the source backend is also a
// SourceSampleBackend, and Unimplemented otherwise.
func (h *sourceHandler) SampleSource(ctx context.Context, req *connect.Request[cepv1.SampleSourceRequest]) (*connect.Response[cepv1.SampleSourceResponse], error) {
	sb, ok := h.b.(SourceSampleBackend)
	if !ok {
		return nil, connect.NewError(connect.CodeUnimplemented, errors.New("api: this server does not sample sources"))
	}
	return unary(ctx, req, sb.Sample)
}

type clusterHandler struct{ b ClusterBackend }

func (h *clusterHandler) GetStatus(ctx context.Context, req *connect.Request[cepv1.GetStatusRequest]) (*connect.Response[cepv1.GetStatusResponse], error) {
	return unary(ctx, req, h.b.Status)
}

func (h *clusterHandler) ListShards(ctx context.Context, req *connect.Request[cepv1.ListShardsRequest]) (*connect.Response[cepv1.ListShardsResponse], error) {
	return unary(ctx, req, h.b.Shards)
}

func (h *clusterHandler) SplitShard(ctx context.Context, req *connect.Request[cepv1.SplitShardRequest]) (*connect.Response[cepv1.SplitShardResponse], error) {
	return unary(ctx, req, h.b.SplitShard)
}

func (h *clusterHandler) RemoveNode(ctx context.Context, req *connect.Request[cepv1.RemoveNodeRequest]) (*connect.Response[cepv1.RemoveNodeResponse], error) {
	return unary(ctx, req, h.b.RemoveNode)
}

// GetPublishAccess is served when the cluster backend is also a
// PublishAccessBackend, and Unimplemented otherwise.
func (h *clusterHandler) GetPublishAccess(ctx context.Context, req *connect.Request[cepv1.GetPublishAccessRequest]) (*connect.Response[cepv1.GetPublishAccessResponse], error) {
	pb, ok := h.b.(PublishAccessBackend)
	if !ok {
		return nil, connect.NewError(connect.CodeUnimplemented, errors.New("api: this server does not hand out publish access"))
	}
	return unary(ctx, req, pb.PublishAccess)
}

// GetSubscribeAccess is served when the cluster backend is also a
// SubscribeAccessBackend, and Unimplemented otherwise.
func (h *clusterHandler) GetSubscribeAccess(ctx context.Context, req *connect.Request[cepv1.GetSubscribeAccessRequest]) (*connect.Response[cepv1.GetSubscribeAccessResponse], error) {
	sb, ok := h.b.(SubscribeAccessBackend)
	if !ok {
		return nil, connect.NewError(connect.CodeUnimplemented, errors.New("api: this server does not hand out subscribe access"))
	}
	return unary(ctx, req, sb.SubscribeAccess)
}

type savepointHandler struct{ b SavepointBackend }

func (h *savepointHandler) CreateSavepoint(ctx context.Context, req *connect.Request[cepv1.CreateSavepointRequest]) (*connect.Response[cepv1.CreateSavepointResponse], error) {
	return unary(ctx, req, h.b.Create)
}

func (h *savepointHandler) ListSavepoints(ctx context.Context, req *connect.Request[cepv1.ListSavepointsRequest]) (*connect.Response[cepv1.ListSavepointsResponse], error) {
	return unary(ctx, req, h.b.List)
}

func (h *savepointHandler) RestoreSavepoint(ctx context.Context, req *connect.Request[cepv1.RestoreSavepointRequest]) (*connect.Response[cepv1.RestoreSavepointResponse], error) {
	return unary(ctx, req, h.b.Restore)
}

func (h *savepointHandler) DeleteSavepoint(ctx context.Context, req *connect.Request[cepv1.DeleteSavepointRequest]) (*connect.Response[cepv1.DeleteSavepointResponse], error) {
	return unary(ctx, req, h.b.Delete)
}

type matchHandler struct{ b MatchBackend }

// errNilRecord is returned to a backend that sends a nil record.
var errNilRecord = errors.New("api: nil record")

func (h *matchHandler) Tail(ctx context.Context, req *connect.Request[cepv1.TailRequest], stream *connect.ServerStream[cepv1.Record]) error {
	send := func(r *cepv1.Record) error {
		if r == nil {
			return errNilRecord
		}
		// for every codec: grpcurl and other reflection clients speak the
		// binary one and print json as base64
		if r.Record == nil {
			r = withRecord(r)
		}
		return stream.Send(r)
	}
	ctx = withCaller(ctx, CallerKeyOf(ctx, req.Header(), req.Peer()))
	return toConnectError(h.b.Tail(ctx, req.Msg, send))
}

// withRecord is r with Record set from its JSON: the record then prints
// as an object rather than as base64. A payload that
// is not a JSON object leaves it unset (json still has it).
func withRecord(r *cepv1.Record) *cepv1.Record {
	st := &structpb.Struct{}
	if protojson.Unmarshal(r.Json, st) != nil {
		return r
	}
	out := proto.Clone(r).(*cepv1.Record) // every field, those added later too
	out.Record = st
	return out
}
