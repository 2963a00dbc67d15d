// Package api is the cluster's public RPC surface: the protobuf definitions,
// the code buf generates from them, and thin Connect handlers that pass each
// call to a backend interface declared here. It holds no cluster logic.
//
// # Layout
//
//	api/proto/cep/v1/*.proto           the API (package cep.v1), one file per service
//	api/gen/cep/v1                     generated messages (package cepv1)
//	api/gen/cep/v1/cepv1connect        generated Connect clients and handler interfaces
//	api/*.go                           backends, handlers, error mapping, auth, server
//
// The generated code is committed. Change a .proto, then run make generate
// (buf and the two plugins are pinned in scripts/tools.sh and installed into
// ./bin); make checkgenerate fails when api/gen is stale.
//
// # Services
//
//   - PatternService: validate, deploy, update (drain, reset or migrate
//     partial matches), delete, list and get patterns, written as pattern-v1
//     documents or MATCH_RECOGNIZE queries.
//   - SourceService: register the JetStream streams and subjects patterns read.
//   - ClusterService: nodes and their liveness; shards, replicas and load.
//   - SavepointService: write, list and restore savepoints.
//   - MatchService: tail a pattern's output records.
//
// # Use
//
// The node implements one backend per service (PatternBackend,
// SourceBackend, ClusterBackend, SavepointBackend, MatchBackend), usually as
// adapters over the cluster package, and serves them:
//
//	tokens, err := api.ReadTokenFile("tokens") // lines "ROLE TOKEN"
//	h := api.NewHandler(api.Backends{Patterns: p, Sources: s, Cluster: c,
//		Savepoints: sp, Matches: m})
//	srv := api.Server(":7070", api.Authorize(tokens, h)) // HTTP/1.1 and h2c
//	go srv.ListenAndServe()
//	...
//	srv.Shutdown(ctx)
//
// Authorize lets a call through when its bearer token's role (admin,
// operator, reader; node for the cluster's members) may make it, by one
// table of every procedure (AccessOf), deciding on the headers before the
// body is read; WithToken (one admin token) and WithTokens do the same as
// interceptors for embedders.
//
// The handler also answers gRPC health checks and server reflection, so
// grpcurl and grpc_health_probe work against it:
//
//	grpcurl -plaintext localhost:7070 list
//	grpcurl -plaintext -d '{"name":"p"}' localhost:7070 cep.v1.PatternService/GetPattern
//
// A tail's records reach JSON clients (grpcurl, browsers) with the record
// as a JSON object in Record.record as well as in Record.json, which
// binary clients read. CORS lets browser pages of given origins call the
// handler; RPCMetrics, an interceptor, counts and times the calls for
// Prometheus.
//
// Clients use the generated constructors, for example
// cepv1connect.NewPatternServiceClient(http.DefaultClient, url,
// api.WithClientToken(token)), adding connect.WithGRPC() to speak gRPC.
//
// # Threading
//
// Handlers hold nothing but their backend and are safe for concurrent use;
// net/http calls them from one goroutine per request. Backends must therefore
// be safe for concurrent use too. A call's context is cancelled when the
// client disconnects or its deadline passes, and backends should return
// promptly then. MatchBackend.Tail runs for the life of the stream on the
// request's goroutine and must call send from that goroutine only.
//
// # Errors
//
// Backends return plain Go errors. Those a client can act on wrap one of the
// sentinels ErrNotFound, ErrAlreadyExists, ErrInvalidArgument,
// ErrFailedPrecondition, ErrUnavailable or ErrResourceExhausted with %w, and
// a typed validation error may instead implement InvalidArgument() bool. One function,
// toConnectError, turns them into Connect codes of the same names; context
// cancellation and deadlines become Canceled and DeadlineExceeded, and
// anything else Internal. The client sees the error's full text as the
// message, so it should name what was wrong (`pattern "p": stage "b": field
// "times": ...`). Nothing in this package inspects error text.
package api
