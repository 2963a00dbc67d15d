package api

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/api/gen/cep/v1/cepv1connect"
)

// expect returns a backend method that checks it got want (t.Errorf, as it
// runs on the server's goroutine) and answers res.
func expect[Req, Res proto.Message](t *testing.T, want Req, res Res) func(context.Context, Req) (Res, error) {
	return func(_ context.Context, got Req) (Res, error) {
		if !proto.Equal(got, want) {
			t.Errorf("backend got %T %v, want %v", got, got, want)
		}
		return res, nil
	}
}

// checkCall checks one unary call's result against want.
func checkCall[Res any](t *testing.T, name string, res *connect.Response[Res], err error, want proto.Message) {
	t.Helper()
	if err != nil {
		t.Errorf("%s: %v", name, err)
		return
	}
	if got := any(res.Msg).(proto.Message); !proto.Equal(got, want) {
		t.Errorf("%s: got %v, want %v", name, got, want)
	}
}

func samplePattern() *cepv1.Pattern {
	return &cepv1.Pattern{
		Name:          "login-fail-logout",
		Version:       3,
		Spec:          "name: login-fail-logout\nstages:\n  - name: login\n    where: e.type == \"LOGIN\"\n",
		Format:        cepv1.SpecFormat_SPEC_FORMAT_SPEC,
		Sources:       []string{"bank", "web"},
		OutputSubject: "cep.out.login-fail-logout",
		CreatedIndex:  17,
		UpdatedIndex:  1<<63 + 5, // beyond float64 precision: checks JSON uint64 handling
		State:         cepv1.PatternState_PATTERN_STATE_DRAINING,
	}
}

func sampleSource() *cepv1.Source {
	return &cepv1.Source{Name: "bank", Stream: "CEP_BANK", Subjects: []string{"bank.>", "cards.*"}, KeyGroups: 256, Managed: true, CreatedIndex: 9}
}

func sampleSavepoint() *cepv1.Savepoint {
	return &cepv1.Savepoint{
		Id:           "sp-0007",
		Location:     "dir:///var/lib/cep/savepoints/sp-0007",
		CreatedIndex: 4242,
		CreatedTime:  timestamppb.New(time.Date(2025, 3, 1, 12, 30, 0, 123000000, time.UTC)),
		ShardCount:   4,
		KeyGroups:    256,
		SourcePositions: []*cepv1.SourcePosition{
			{Source: "bank", Stream: "CEP_BANK", Sequence: 1001},
			{Source: "web", Stream: "WEB", Sequence: 7},
		},
		PatternVersions: []*cepv1.PatternVersion{{Name: "login-fail-logout", Version: 3}},
	}
}

// TestPassThrough sends every unary RPC with populated messages under every
// protocol and checks that the backend sees the request and the client the
// response, field for field.
func TestPassThrough(t *testing.T) {
	b, p, s, c, sp, _ := allFakes()

	validateReq := &cepv1.ValidatePatternRequest{Spec: "SELECT * FROM bank MATCH_RECOGNIZE (...)", Format: cepv1.SpecFormat_SPEC_FORMAT_SQL, Name: "q1"}
	validateRes := &cepv1.ValidatePatternResponse{
		Valid: false, Format: cepv1.SpecFormat_SPEC_FORMAT_SQL,
		Error: &cepv1.SpecError{Message: "line 1:36: expected PARTITION, ORDER", Line: 1, Column: 36},
	}
	p.ValidateFunc = expect(t, validateReq, validateRes)
	deployReq := &cepv1.DeployPatternRequest{Spec: samplePattern().Spec, Name: "login-fail-logout", OutputSubject: "alerts.login"}
	deployRes := &cepv1.DeployPatternResponse{Pattern: samplePattern()}
	p.DeployFunc = expect(t, deployReq, deployRes)
	updateReq := &cepv1.UpdatePatternRequest{Spec: "{}", Format: cepv1.SpecFormat_SPEC_FORMAT_SPEC, Name: "login-fail-logout", Policy: cepv1.UpdatePolicy_UPDATE_POLICY_MIGRATE}
	updateRes := &cepv1.UpdatePatternResponse{Pattern: samplePattern()}
	p.UpdateFunc = expect(t, updateReq, updateRes)
	deleteReq := &cepv1.DeletePatternRequest{Name: "login-fail-logout"}
	deleted := samplePattern()
	deleted.State = cepv1.PatternState_PATTERN_STATE_DELETING
	deleteRes := &cepv1.DeletePatternResponse{Pattern: deleted}
	p.DeleteFunc = expect(t, deleteReq, deleteRes)
	listRes := &cepv1.ListPatternsResponse{Patterns: []*cepv1.Pattern{samplePattern(), {Name: "b", Version: 1, State: cepv1.PatternState_PATTERN_STATE_ACTIVE}}}
	p.ListFunc = expect(t, &cepv1.ListPatternsRequest{}, listRes)
	getReq := &cepv1.GetPatternRequest{Name: "login-fail-logout"}
	getRes := &cepv1.GetPatternResponse{Pattern: samplePattern()}
	p.GetFunc = expect(t, getReq, getRes)

	createSourceReq := &cepv1.CreateSourceRequest{Name: "bank", Subjects: []string{"bank.>", "cards.*"}, Stream: "EXISTING"}
	createSourceRes := &cepv1.CreateSourceResponse{Source: sampleSource()}
	s.CreateFunc = expect(t, createSourceReq, createSourceRes)
	listSourcesRes := &cepv1.ListSourcesResponse{Sources: []*cepv1.Source{sampleSource()}}
	s.ListFunc = expect(t, &cepv1.ListSourcesRequest{}, listSourcesRes)
	getSourceReq := &cepv1.GetSourceRequest{Name: "bank"}
	getSourceRes := &cepv1.GetSourceResponse{Source: sampleSource()}
	s.GetFunc = expect(t, getSourceReq, getSourceRes)

	statusRes := &cepv1.GetStatusResponse{
		Nodes: []*cepv1.Node{
			{Id: "n1", Address: "10.0.0.1:7946", ApiAddress: "10.0.0.1:7070", State: cepv1.NodeState_NODE_STATE_ALIVE, IsMetaLeader: true},
			{Id: "n2", Address: "10.0.0.2:7946", ApiAddress: "10.0.0.2:7070", State: cepv1.NodeState_NODE_STATE_SUSPECT},
		},
		Summary: &cepv1.ClusterSummary{Nodes: 2, Alive: 1, Suspect: 1, MetaLeaderId: "n1", MetaCommitIndex: 99, KeyGroups: 256, Shards: 2, ShardsWithoutLeader: 1, Patterns: 3, Sources: 1},
	}
	c.StatusFunc = expect(t, &cepv1.GetStatusRequest{}, statusRes)
	shardsRes := &cepv1.ListShardsResponse{Shards: []*cepv1.Shard{{
		Id: 1, KeyGroups: &cepv1.KeyGroupRange{First: 0, Last: 127}, LeaderNodeId: "n1",
		Replicas: []*cepv1.Replica{
			{NodeId: "n1", Suffrage: cepv1.Suffrage_SUFFRAGE_VOTER, AppliedIndex: 50},
			{NodeId: "n2", Suffrage: cepv1.Suffrage_SUFFRAGE_NONVOTER, AppliedIndex: 12},
		},
		CommitIndex: 51, LastAppliedIndex: 50, Patterns: 3, PartialMatches: 12345, BufferedEvents: 678,
	}, {Id: 2, KeyGroups: &cepv1.KeyGroupRange{First: 128, Last: 255}}}}
	c.ShardsFunc = expect(t, &cepv1.ListShardsRequest{}, shardsRes)

	createSpReq := &cepv1.CreateSavepointRequest{Target: "nats://savepoints"}
	createSpRes := &cepv1.CreateSavepointResponse{Savepoint: sampleSavepoint()}
	sp.CreateFunc = expect(t, createSpReq, createSpRes)
	listSpRes := &cepv1.ListSavepointsResponse{Savepoints: []*cepv1.Savepoint{sampleSavepoint(), {Id: "sp-0001"}}}
	sp.ListFunc = expect(t, &cepv1.ListSavepointsRequest{}, listSpRes)
	restoreReq := &cepv1.RestoreSavepointRequest{Savepoint: &cepv1.RestoreSavepointRequest_Location{Location: "dir:///backup/sp-0007"}, ShardCount: 8}
	restoreRes := &cepv1.RestoreSavepointResponse{Savepoint: sampleSavepoint(), ShardCount: 8, RestoredIndex: 5000}
	sp.RestoreFunc = expect(t, restoreReq, restoreRes)

	ts := startServer(t, NewHandler(b))
	ctx := t.Context()
	for _, pr := range protocols {
		t.Run(pr.name, func(t *testing.T) {
			hc := pr.http(ts)
			pc := cepv1connect.NewPatternServiceClient(hc, ts.URL, pr.opts...)
			res1, err := pc.ValidatePattern(ctx, connect.NewRequest(validateReq))
			checkCall(t, "ValidatePattern", res1, err, validateRes)
			res2, err := pc.DeployPattern(ctx, connect.NewRequest(deployReq))
			checkCall(t, "DeployPattern", res2, err, deployRes)
			res3, err := pc.UpdatePattern(ctx, connect.NewRequest(updateReq))
			checkCall(t, "UpdatePattern", res3, err, updateRes)
			res4, err := pc.DeletePattern(ctx, connect.NewRequest(deleteReq))
			checkCall(t, "DeletePattern", res4, err, deleteRes)
			res5, err := pc.ListPatterns(ctx, connect.NewRequest(&cepv1.ListPatternsRequest{}))
			checkCall(t, "ListPatterns", res5, err, listRes)
			res6, err := pc.GetPattern(ctx, connect.NewRequest(getReq))
			checkCall(t, "GetPattern", res6, err, getRes)

			sc := cepv1connect.NewSourceServiceClient(hc, ts.URL, pr.opts...)
			res7, err := sc.CreateSource(ctx, connect.NewRequest(createSourceReq))
			checkCall(t, "CreateSource", res7, err, createSourceRes)
			res8, err := sc.ListSources(ctx, connect.NewRequest(&cepv1.ListSourcesRequest{}))
			checkCall(t, "ListSources", res8, err, listSourcesRes)
			res9, err := sc.GetSource(ctx, connect.NewRequest(getSourceReq))
			checkCall(t, "GetSource", res9, err, getSourceRes)

			cc := cepv1connect.NewClusterServiceClient(hc, ts.URL, pr.opts...)
			res10, err := cc.GetStatus(ctx, connect.NewRequest(&cepv1.GetStatusRequest{}))
			checkCall(t, "GetStatus", res10, err, statusRes)
			res11, err := cc.ListShards(ctx, connect.NewRequest(&cepv1.ListShardsRequest{}))
			checkCall(t, "ListShards", res11, err, shardsRes)

			spc := cepv1connect.NewSavepointServiceClient(hc, ts.URL, pr.opts...)
			res12, err := spc.CreateSavepoint(ctx, connect.NewRequest(createSpReq))
			checkCall(t, "CreateSavepoint", res12, err, createSpRes)
			res13, err := spc.ListSavepoints(ctx, connect.NewRequest(&cepv1.ListSavepointsRequest{}))
			checkCall(t, "ListSavepoints", res13, err, listSpRes)
			res14, err := spc.RestoreSavepoint(ctx, connect.NewRequest(restoreReq))
			checkCall(t, "RestoreSavepoint", res14, err, restoreRes)
		})
	}
}

// codeError is a typed validation error in the style of nfa.PatternError
// that asks for InvalidArgument through the interface, not a sentinel.
type codeError struct{ stage, field string }

func (e *codeError) Error() string {
	return fmt.Sprintf("pattern %q: stage %q: field %q: must be > 0", "p", e.stage, e.field)
}
func (e *codeError) InvalidArgument() bool { return true }

// notInvalid implements the interface but declines.
type notInvalid struct{}

func (notInvalid) Error() string         { return "declined" }
func (notInvalid) InvalidArgument() bool { return false }

// errorCases are backend errors and what the client must see. An empty
// message means "the error's own text".
var errorCases = []struct {
	name string
	err  error
	code connect.Code
	msg  string
}{
	{"not found", fmt.Errorf("pattern %q: %w", "p", ErrNotFound), connect.CodeNotFound, ""},
	{"already exists", fmt.Errorf("pattern %q: %w", "p", ErrAlreadyExists), connect.CodeAlreadyExists, ""},
	{"invalid argument", fmt.Errorf("target %q: scheme must be dir or nats: %w", "s3://x", ErrInvalidArgument), connect.CodeInvalidArgument, ""},
	{"failed precondition", fmt.Errorf("savepoint has 128 key groups, cluster 256: %w", ErrFailedPrecondition), connect.CodeFailedPrecondition, ""},
	{"unavailable", fmt.Errorf("shard 3 has no leader: %w", ErrUnavailable), connect.CodeUnavailable, ""},
	{"bare sentinel", ErrNotFound, connect.CodeNotFound, "api: not found"},
	{"typed invalid argument", fmt.Errorf("deploy: %w", &codeError{"failed", "times"}), connect.CodeInvalidArgument, ""},
	{"interface declines", notInvalid{}, connect.CodeInternal, ""},
	{"canceled", fmt.Errorf("waiting for commit: %w", context.Canceled), connect.CodeCanceled, ""},
	{"deadline", fmt.Errorf("waiting for commit: %w", context.DeadlineExceeded), connect.CodeDeadlineExceeded, ""},
	{"sentinel wins over ctx", fmt.Errorf("%w: %w", ErrUnavailable, context.DeadlineExceeded), connect.CodeUnavailable, ""},
	{"other", errors.New("raft: log corrupt at index 7"), connect.CodeInternal, ""},
	{"connect error passes", fmt.Errorf("wrapped: %w", connect.NewError(connect.CodePermissionDenied, errors.New("read-only node"))), connect.CodePermissionDenied, "read-only node"},
}

// TestErrorMapping checks every sentinel's code and message end to end,
// under every protocol, for a unary and a streaming procedure.
func TestErrorMapping(t *testing.T) {
	b, p, _, _, _, m := allFakes()
	byName := map[string]error{}
	for _, tc := range errorCases {
		byName[tc.name] = tc.err
	}
	p.GetFunc = func(_ context.Context, req *cepv1.GetPatternRequest) (*cepv1.GetPatternResponse, error) {
		return nil, byName[req.Name]
	}
	m.TailFunc = func(_ context.Context, req *cepv1.TailRequest, send func(*cepv1.Record) error) error {
		if err := send(&cepv1.Record{Type: "match", Sequence: 1}); err != nil {
			return err
		}
		return byName[req.Pattern]
	}
	ts := startServer(t, NewHandler(b))
	for _, pr := range protocols {
		t.Run(pr.name, func(t *testing.T) {
			pc := cepv1connect.NewPatternServiceClient(pr.http(ts), ts.URL, pr.opts...)
			mc := cepv1connect.NewMatchServiceClient(pr.http(ts), ts.URL, pr.opts...)
			for _, tc := range errorCases {
				want := tc.msg
				if want == "" {
					want = tc.err.Error()
				}
				_, err := pc.GetPattern(t.Context(), connect.NewRequest(&cepv1.GetPatternRequest{Name: tc.name}))
				checkError(t, "unary "+tc.name, err, tc.code, want)

				stream, err := mc.Tail(t.Context(), connect.NewRequest(&cepv1.TailRequest{Pattern: tc.name}))
				if err != nil {
					t.Fatalf("Tail: %v", err)
				}
				if !stream.Receive() {
					t.Errorf("stream %s: no record before the error: %v", tc.name, stream.Err())
				}
				if stream.Receive() {
					t.Errorf("stream %s: unexpected second record", tc.name)
				}
				checkError(t, "stream "+tc.name, stream.Err(), tc.code, want)
				stream.Close()
			}
		})
	}
}

func checkError(t *testing.T, name string, err error, code connect.Code, msg string) {
	t.Helper()
	var ce *connect.Error
	if !errors.As(err, &ce) {
		t.Errorf("%s: got %v, want a *connect.Error", name, err)
		return
	}
	if ce.Code() != code || ce.Message() != msg {
		t.Errorf("%s: got %v %q, want %v %q", name, ce.Code(), ce.Message(), code, msg)
	}
}

// TestNilResponse checks that a backend breaking its contract gives the
// client Internal, not a panic or an empty success.
func TestNilResponse(t *testing.T) {
	b, p, _, _, _, m := allFakes()
	p.ListFunc = func(context.Context, *cepv1.ListPatternsRequest) (*cepv1.ListPatternsResponse, error) {
		return nil, nil
	}
	m.TailFunc = func(_ context.Context, _ *cepv1.TailRequest, send func(*cepv1.Record) error) error { return send(nil) }
	ts := startServer(t, NewHandler(b))
	pc := cepv1connect.NewPatternServiceClient(ts.H2C, ts.URL, connect.WithGRPC())
	_, err := pc.ListPatterns(t.Context(), connect.NewRequest(&cepv1.ListPatternsRequest{}))
	checkError(t, "nil response", err, connect.CodeInternal, errNoResponse.Error())

	mc := cepv1connect.NewMatchServiceClient(ts.H2C, ts.URL)
	stream, err := mc.Tail(t.Context(), connect.NewRequest(&cepv1.TailRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	if stream.Receive() {
		t.Fatal("nil record was sent")
	}
	checkError(t, "nil record", stream.Err(), connect.CodeInternal, errNilRecord.Error())
}
