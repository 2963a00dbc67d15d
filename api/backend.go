package api

import (
	"context"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
)

// The backends below are what the handlers need from the rest of the node
// (the cluster package's Service, whose Backends the node serves). They
// speak the generated message types so that a handler is a pure
// pass-through.
//
// Contract for every method:
//   - It may be called from many goroutines at once; implementations must be
//     safe for concurrent use.
//   - It must not keep or modify the request after it returns.
//   - It returns either a non-nil response or an error, never both nil.
//   - Errors callers can act on wrap one of the sentinels in errors.go (or
//     implement InvalidArgument() bool); anything else reaches the client as
//     Internal. ctx is the call's context: it is cancelled when the client
//     goes away or its deadline passes.

// PatternBackend deploys and manages patterns for [cepv1connect.PatternServiceHandler].
type PatternBackend interface {
	// Validate parses and checks a spec. An invalid spec is not an error: it
	// is a response with Valid false and Error set.
	Validate(context.Context, *cepv1.ValidatePatternRequest) (*cepv1.ValidatePatternResponse, error)
	// Deploy adds a pattern once its deploy is committed. An invalid spec
	// wraps ErrInvalidArgument, a taken name ErrAlreadyExists.
	Deploy(context.Context, *cepv1.DeployPatternRequest) (*cepv1.DeployPatternResponse, error)
	// Update replaces a pattern's spec under the request's policy.
	Update(context.Context, *cepv1.UpdatePatternRequest) (*cepv1.UpdatePatternResponse, error)
	// Delete removes a pattern; an unknown name wraps ErrNotFound.
	Delete(context.Context, *cepv1.DeletePatternRequest) (*cepv1.DeletePatternResponse, error)
	// List returns every pattern, sorted by name.
	List(context.Context, *cepv1.ListPatternsRequest) (*cepv1.ListPatternsResponse, error)
	// Get returns one pattern; an unknown name wraps ErrNotFound.
	Get(context.Context, *cepv1.GetPatternRequest) (*cepv1.GetPatternResponse, error)
	// Explain draws a deployed pattern's automaton, or a given spec's; an
	// unknown name wraps ErrNotFound, an invalid spec ErrInvalidArgument.
	Explain(context.Context, *cepv1.ExplainPatternRequest) (*cepv1.ExplainPatternResponse, error)
	// Inspect shows what a deployed pattern holds for one key; an unknown
	// name wraps ErrNotFound, a shard without a leader ErrUnavailable.
	Inspect(context.Context, *cepv1.InspectKeyRequest) (*cepv1.InspectKeyResponse, error)
	// Stats sums the patterns' counters over the shards' leaders; a shard
	// whose leader does not answer is listed missing, not an error.
	Stats(context.Context, *cepv1.GetPatternStatsRequest) (*cepv1.GetPatternStatsResponse, error)
}

// SourceBackend registers event sources for [cepv1connect.SourceServiceHandler].
type SourceBackend interface {
	// Create registers a source; a taken name wraps ErrAlreadyExists.
	Create(context.Context, *cepv1.CreateSourceRequest) (*cepv1.CreateSourceResponse, error)
	// List returns every source, sorted by name.
	List(context.Context, *cepv1.ListSourcesRequest) (*cepv1.ListSourcesResponse, error)
	// Get returns one source; an unknown name wraps ErrNotFound.
	Get(context.Context, *cepv1.GetSourceRequest) (*cepv1.GetSourceResponse, error)
	// Delete removes a source no pattern reads; an unknown name wraps
	// ErrNotFound, one a pattern reads ErrFailedPrecondition.
	Delete(context.Context, *cepv1.DeleteSourceRequest) (*cepv1.DeleteSourceResponse, error)
}

// ClusterBackend reports membership and placement for
// [cepv1connect.ClusterServiceHandler].
type ClusterBackend interface {
	// Status lists the nodes and summarises the cluster.
	Status(context.Context, *cepv1.GetStatusRequest) (*cepv1.GetStatusResponse, error)
	// Shards lists the shards with their replicas and load.
	Shards(context.Context, *cepv1.ListShardsRequest) (*cepv1.ListShardsResponse, error)
	// RemoveNode starts removing a node; an unknown one wraps ErrNotFound,
	// the last one ErrFailedPrecondition.
	RemoveNode(context.Context, *cepv1.RemoveNodeRequest) (*cepv1.RemoveNodeResponse, error)
	// SplitShard splits a shard; an unknown one wraps ErrNotFound, a bad
	// split point ErrInvalidArgument, one that cannot split now
	// ErrFailedPrecondition.
	SplitShard(context.Context, *cepv1.SplitShardRequest) (*cepv1.SplitShardResponse, error)
}

// PublishAccessBackend is a ClusterBackend that also hands out access to
// publish events (ClusterService.GetPublishAccess); a ClusterBackend that
// is not one leaves that procedure Unimplemented.
type PublishAccessBackend interface {
	// PublishAccess returns the NATS URLs and the publisher credentials;
	// ErrFailedPrecondition when the cluster has none to give.
	PublishAccess(context.Context, *cepv1.GetPublishAccessRequest) (*cepv1.GetPublishAccessResponse, error)
}

// SubscribeAccessBackend is a ClusterBackend that also hands out access
// to read the output and dead letters from NATS
// (ClusterService.GetSubscribeAccess).
type SubscribeAccessBackend interface {
	// SubscribeAccess returns the NATS URLs, the subscriber credentials
	// and the subjects they may read; ErrFailedPrecondition when the
	// cluster has none to give.
	SubscribeAccess(context.Context, *cepv1.GetSubscribeAccessRequest) (*cepv1.GetSubscribeAccessResponse, error)
}

// SourceSampleBackend is a SourceBackend that also returns the last
// events of a source (SourceService.SampleSource).
type SourceSampleBackend interface {
	// Sample returns up to the request's limit of the source's last
	// events, oldest first; an unknown name wraps ErrNotFound.
	Sample(context.Context, *cepv1.SampleSourceRequest) (*cepv1.SampleSourceResponse, error)
}

// SavepointBackend writes and restores savepoints for
// [cepv1connect.SavepointServiceHandler].
type SavepointBackend interface {
	// Create writes a savepoint to the request's target and returns it once
	// every shard has written its part.
	Create(context.Context, *cepv1.CreateSavepointRequest) (*cepv1.CreateSavepointResponse, error)
	// List returns the recorded savepoints, newest first.
	List(context.Context, *cepv1.ListSavepointsRequest) (*cepv1.ListSavepointsResponse, error)
	// Restore replaces the cluster's state with a savepoint's.
	Restore(context.Context, *cepv1.RestoreSavepointRequest) (*cepv1.RestoreSavepointResponse, error)
	// Delete removes a savepoint (and its files); an unknown id wraps
	// ErrNotFound.
	Delete(context.Context, *cepv1.DeleteSavepointRequest) (*cepv1.DeleteSavepointResponse, error)
}

// MatchBackend streams pattern output for [cepv1connect.MatchServiceHandler].
type MatchBackend interface {
	// Tail calls send for each record of the requested pattern, in order,
	// from the goroutine that called Tail (send is not safe for concurrent
	// use). It returns nil when the stream ends normally (the pattern was
	// deleted), the error of send if send fails (the client is gone), or
	// ctx's error once ctx is done. An unknown pattern wraps ErrNotFound.
	// CallerKey(ctx) names the caller, for limits per caller.
	Tail(ctx context.Context, req *cepv1.TailRequest, send func(*cepv1.Record) error) error
}

// Backends holds one backend per service. A nil backend leaves its service
// unmounted: its procedures answer Unimplemented, and health and reflection
// do not list it.
type Backends struct {
	Patterns   PatternBackend
	Sources    SourceBackend
	Cluster    ClusterBackend
	Savepoints SavepointBackend
	Matches    MatchBackend
	// Ready, if set, decides what gRPC health reports: SERVING while it
	// returns nil, NOT_SERVING otherwise, so that probes (Kubernetes,
	// Envoy) see what /readyz sees. Nil means always SERVING.
	Ready func() error
}
