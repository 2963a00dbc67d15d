package peer

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/cepcluster/cep/api"
	"github.com/cepcluster/cep/api/apitest"
	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
)

// MetaProgress is the commit index and leader a node's status gives; a
// node that does not answer GetStatus says nothing.
func TestMetaProgress(t *testing.T) {
	const token = "s3cret"
	status := func(f func(context.Context, *cepv1.GetStatusRequest) (*cepv1.GetStatusResponse, error)) Client {
		srv := httptest.NewServer(api.NewHandler(api.Backends{Cluster: &apitest.Cluster{StatusFunc: f}}, api.WithToken(token)))
		t.Cleanup(srv.Close)
		return New(srv.Client(), strings.TrimPrefix(srv.URL, "http://"), srv.URL, token)
	}
	ctx := context.Background()
	p := status(func(context.Context, *cepv1.GetStatusRequest) (*cepv1.GetStatusResponse, error) {
		return &cepv1.GetStatusResponse{Summary: &cepv1.ClusterSummary{MetaCommitIndex: 42, MetaLeaderId: "a"}}, nil
	})
	if commit, leader, err := p.MetaProgress(ctx); err != nil || commit != 42 || leader != "a" {
		t.Errorf("MetaProgress = %d, %q, %v", commit, leader, err)
	}
	p = status(func(context.Context, *cepv1.GetStatusRequest) (*cepv1.GetStatusResponse, error) {
		return nil, errors.New("broken")
	})
	if _, _, err := p.MetaProgress(ctx); err == nil {
		t.Error("MetaProgress of a failing node answered")
	}
	healthOnly := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(healthOnly.Close)
	p = New(healthOnly.Client(), strings.TrimPrefix(healthOnly.URL, "http://"), healthOnly.URL, token)
	if _, _, err := p.MetaProgress(ctx); err == nil {
		t.Error("MetaProgress of a node without the API answered")
	}
}
