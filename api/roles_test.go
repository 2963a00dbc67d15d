package api

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"connectrpc.com/connect"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/api/gen/cep/v1/cepv1connect"
)

// wantAccess is what each role may call, written out here apart from the
// table it checks: a procedure the protos gain fails the test until both
// say who may call it.
var wantAccess = map[string][]Role{
	"/cep.v1.PatternService/ValidatePattern":    {RoleReader, RoleOperator, RoleAdmin},
	"/cep.v1.PatternService/ListPatterns":       {RoleReader, RoleOperator, RoleAdmin, RoleNode},
	"/cep.v1.PatternService/GetPattern":         {RoleReader, RoleOperator, RoleAdmin, RoleNode},
	"/cep.v1.PatternService/ExplainPattern":     {RoleReader, RoleOperator, RoleAdmin},
	"/cep.v1.PatternService/InspectKey":         {RoleReader, RoleOperator, RoleAdmin, RoleNode},
	"/cep.v1.PatternService/GetPatternStats":    {RoleReader, RoleOperator, RoleAdmin, RoleNode},
	"/cep.v1.PatternService/DeployPattern":      {RoleOperator, RoleAdmin, RoleNode},
	"/cep.v1.PatternService/UpdatePattern":      {RoleOperator, RoleAdmin, RoleNode},
	"/cep.v1.PatternService/DeletePattern":      {RoleOperator, RoleAdmin, RoleNode},
	"/cep.v1.SourceService/ListSources":         {RoleReader, RoleOperator, RoleAdmin, RoleNode},
	"/cep.v1.SourceService/GetSource":           {RoleReader, RoleOperator, RoleAdmin, RoleNode},
	"/cep.v1.SourceService/CreateSource":        {RoleOperator, RoleAdmin, RoleNode},
	"/cep.v1.SourceService/DeleteSource":        {RoleOperator, RoleAdmin, RoleNode},
	"/cep.v1.SavepointService/ListSavepoints":   {RoleReader, RoleOperator, RoleAdmin, RoleNode},
	"/cep.v1.SavepointService/CreateSavepoint":  {RoleOperator, RoleAdmin, RoleNode},
	"/cep.v1.SavepointService/RestoreSavepoint": {RoleOperator, RoleAdmin, RoleNode},
	"/cep.v1.SavepointService/DeleteSavepoint":  {RoleOperator, RoleAdmin, RoleNode},
	"/cep.v1.ClusterService/GetStatus":          {RoleReader, RoleOperator, RoleAdmin, RoleNode},
	"/cep.v1.ClusterService/GetPublishAccess":   {RoleOperator, RoleAdmin},
	"/cep.v1.ClusterService/GetSubscribeAccess": {RoleReader, RoleOperator, RoleAdmin},
	"/cep.v1.SourceService/SampleSource":        {RoleOperator, RoleAdmin},
	"/cep.v1.ClusterService/ListShards":         {RoleReader, RoleOperator, RoleAdmin, RoleNode},
	"/cep.v1.ClusterService/RemoveNode":         {RoleAdmin, RoleNode},
	"/cep.v1.ClusterService/SplitShard":         {RoleAdmin, RoleNode},
	"/cep.v1.MatchService/Tail":                 {RoleReader, RoleOperator, RoleAdmin},
}

var allRoles = []Role{RoleNone, RoleReader, RoleOperator, RoleAdmin, RoleNode}

// TestEveryProcedureHasARole checks the table against the generated
// descriptors: every method of every cep.v1 service has an entry (so a
// new RPC cannot be forgotten: it would need admin), the table names no
// procedure the protos do not have, and each role's access is the one
// wantAccess states.
func TestEveryProcedureHasARole(t *testing.T) {
	_ = cepv1.File_cep_v1_pattern_proto
	methods := apiMethods()
	if len(methods) < len(wantAccess) {
		t.Fatalf("found %d methods in package cep.v1, want at least %d", len(methods), len(wantAccess))
	}
	seen := map[string]bool{}
	for _, md := range methods {
		proc := procedureOf(md)
		seen[proc] = true
		a, known := AccessOf(proc)
		if !known {
			t.Errorf("%s has no entry in the role table (procedures in roles.go)", proc)
			continue
		}
		want, ok := wantAccess[proc]
		if !ok {
			t.Errorf("%s: the test does not say who may call it (wantAccess)", proc)
			continue
		}
		for _, r := range allRoles {
			if got := a.Allows(r); got != slices.Contains(want, r) {
				t.Errorf("%s: role %s allowed = %v, want %v", proc, r, got, !got)
			}
		}
	}
	for proc := range procedures {
		if !seen[proc] {
			t.Errorf("the role table lists %s, which no proto declares", proc)
		}
	}
}

// TestUnknownProcedureNeedsAdmin: what the table does not list (a new RPC,
// a path of no procedure) is the admin's alone.
func TestUnknownProcedureNeedsAdmin(t *testing.T) {
	for _, proc := range []string{"/cep.v1.ClusterService/GrantPublish", "/cep.v1.Nope/X", "/other"} {
		a, known := AccessOf(proc)
		if known {
			t.Errorf("%s: known", proc)
		}
		for _, r := range allRoles {
			if a.Allows(r) != (r == RoleAdmin) {
				t.Errorf("%s: role %s allowed = %v", proc, r, a.Allows(r))
			}
		}
	}
}

// roleTokens has one token of each role; tokenOf gives a role's.
func roleTokens(t *testing.T) *Tokens {
	t.Helper()
	tk := &Tokens{}
	for _, r := range allRoles[1:] {
		if err := tk.Add(r, tokenOf(r)); err != nil {
			t.Fatal(err)
		}
	}
	return tk
}

func tokenOf(r Role) string { return "tok-" + r.String() + "-0123456789abcdef" }

// TestAuthorizeEveryProcedureEveryRole calls every procedure of the
// descriptors with each role's token (and none, and a wrong one) through
// Authorize: the handler behind it runs exactly when wantAccess allows the
// role, reads no byte of the body otherwise, and the refusal is 401
// (Unauthenticated) without a valid token, 403 (PermissionDenied) with a
// role that falls short.
func TestAuthorizeEveryProcedureEveryRole(t *testing.T) {
	reached := 0
	h := Authorize(roleTokens(t), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { reached++ }))
	for _, md := range apiMethods() {
		proc := procedureOf(md)
		for _, r := range allRoles {
			token := tokenOf(r)
			if r == RoleNone {
				token = ""
			}
			body := &countingBody{left: 1 << 10}
			req := httptest.NewRequest(http.MethodPost, proc, body)
			req.Header.Set("Content-Type", "application/json")
			if md.IsStreamingServer() || md.IsStreamingClient() {
				req.Header.Set("Content-Type", "application/connect+json")
			}
			if token != "" {
				req.Header.Set("Authorization", "Bearer "+token)
			}
			before := reached
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			allowed := slices.Contains(wantAccess[proc], r)
			if got := reached > before; got != allowed {
				t.Errorf("%s as %s: reached the handler = %v, want %v (HTTP %d)", proc, r, got, allowed, rec.Code)
			}
			if allowed {
				continue
			}
			if body.read.Load() > 0 {
				t.Errorf("%s as %s: refused after reading %d bytes of the body", proc, r, body.read.Load())
			}
			want := http.StatusForbidden
			if r == RoleNone {
				want = http.StatusUnauthorized
			}
			if md.IsStreamingServer() {
				want = http.StatusOK // a Connect stream's error is in its end message
			}
			if rec.Code != want {
				t.Errorf("%s as %s: HTTP %d, want %d", proc, r, rec.Code, want)
			}
			wantText := "permission_denied"
			if r == RoleNone {
				wantText = "unauthenticated"
			}
			if !strings.Contains(rec.Body.String(), wantText) {
				t.Errorf("%s as %s: %s, want a Connect %s error", proc, r, rec.Body, wantText)
			}
		}
	}
	// a wrong token is no token
	req := httptest.NewRequest(http.MethodPost, cepv1connect.PatternServiceListPatternsProcedure, strings.NewReader("{}"))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+tokenOf(RoleAdmin)+"x")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusUnauthorized {
		t.Errorf("a wrong token: HTTP %d", rec.Code)
	}
}

// TestRolesOverTheWire: a reader's deploy gets PermissionDenied in every
// protocol, as interceptor and in front; its list goes through; the admin
// token of WithToken still does everything.
func TestRolesOverTheWire(t *testing.T) {
	b, p, _, _, _, _ := allFakes()
	p.ListFunc = func(context.Context, *cepv1.ListPatternsRequest) (*cepv1.ListPatternsResponse, error) {
		return &cepv1.ListPatternsResponse{}, nil
	}
	p.DeployFunc = func(context.Context, *cepv1.DeployPatternRequest) (*cepv1.DeployPatternResponse, error) {
		return &cepv1.DeployPatternResponse{}, nil
	}
	tk := roleTokens(t)
	for name, h := range map[string]http.Handler{
		"interceptor": NewHandler(b, WithTokens(tk)),
		"in front":    Authorize(tk, NewHandler(b)),
	} {
		ts := startServer(t, h)
		for _, pr := range protocols {
			pc := func(r Role) cepv1connect.PatternServiceClient {
				return cepv1connect.NewPatternServiceClient(pr.http(ts), ts.URL, pr.with(WithClientToken(tokenOf(r)))...)
			}
			_, err := pc(RoleReader).DeployPattern(t.Context(), connect.NewRequest(&cepv1.DeployPatternRequest{Spec: "x"}))
			if connect.CodeOf(err) != connect.CodePermissionDenied || !strings.Contains(err.Error(), "/cep.v1.PatternService/DeployPattern needs operator, the token is reader's") {
				t.Errorf("%s %s: reader deploys: %v, want permission_denied naming the role it needs", name, pr.name, err)
			}
			if _, err := pc(RoleReader).ListPatterns(t.Context(), connect.NewRequest(&cepv1.ListPatternsRequest{})); err != nil {
				t.Errorf("%s %s: reader lists: %v", name, pr.name, err)
			}
			if _, err := pc(RoleOperator).DeployPattern(t.Context(), connect.NewRequest(&cepv1.DeployPatternRequest{Spec: "x"})); err != nil {
				t.Errorf("%s %s: operator deploys: %v", name, pr.name, err)
			}
		}
	}
}

// TestAuthorizeRole: the fixed-role guard of metrics, profiles and the
// node's internal endpoint; without user tokens it lets requests without
// one through as admin, never as node.
func TestAuthorizeRole(t *testing.T) {
	node := Access{Least: RoleNode, Node: true}
	for _, tc := range []struct {
		name   string
		tokens *Tokens
		a      Access
		token  string
		code   int
	}{
		{"reader metrics by reader", roleTokens(t), Access{Least: RoleReader}, tokenOf(RoleReader), 200},
		{"reader metrics without", roleTokens(t), Access{Least: RoleReader}, "", 401},
		{"reader metrics by node", roleTokens(t), Access{Least: RoleReader}, tokenOf(RoleNode), 403},
		{"admin profile by operator", roleTokens(t), Access{Least: RoleAdmin}, tokenOf(RoleOperator), 403},
		{"admin profile by admin", roleTokens(t), Access{Least: RoleAdmin}, tokenOf(RoleAdmin), 200},
		{"node part by admin", roleTokens(t), node, tokenOf(RoleAdmin), 403},
		{"node part by node", roleTokens(t), node, tokenOf(RoleNode), 200},
		{"open admin", nil, Access{Least: RoleAdmin}, "", 200},
		{"open, node part without", nodeOnly(t), node, "", 403},
		{"open, node part by node", nodeOnly(t), node, tokenOf(RoleNode), 200},
	} {
		h := AuthorizeRole(tc.tokens, tc.a, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
		req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		if tc.token != "" {
			req.Header.Set("Authorization", "Bearer "+tc.token)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != tc.code {
			t.Errorf("%s: HTTP %d, want %d", tc.name, rec.Code, tc.code)
		}
	}
}

func nodeOnly(t *testing.T) *Tokens {
	tk := &Tokens{}
	if err := tk.Add(RoleNode, tokenOf(RoleNode)); err != nil {
		t.Fatal(err)
	}
	return tk
}
