package api

import (
	"errors"
	"sync/atomic"
	"testing"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"

	"github.com/cepcluster/cep/api/gen/cep/v1/cepv1connect"
)

// TestHealthFollowsReady checks that gRPC health reports what Ready says at
// the time of the call, for the server and each mounted service, and still
// refuses names it does not serve.
func TestHealthFollowsReady(t *testing.T) {
	b, _, _, _, _, _ := allFakes()
	var notReady atomic.Bool
	b.Ready = func() error {
		if notReady.Load() {
			return errors.New("shard 1 has no leader")
		}
		return nil
	}
	ts := startServer(t, NewHandler(b))
	services := []string{""}
	for _, svc := range protoServices(t) {
		services = append(services, string(svc.FullName()))
	}
	for _, opts := range [][]connect.ClientOption{{connect.WithGRPC()}, nil} {
		hc := grpchealth.NewClient(ts.H2C, ts.URL, opts...)
		for _, state := range []struct {
			notReady bool
			want     grpchealth.Status
		}{{false, grpchealth.StatusServing}, {true, grpchealth.StatusNotServing}, {false, grpchealth.StatusServing}} {
			notReady.Store(state.notReady)
			for _, name := range services {
				res, err := hc.Check(t.Context(), &grpchealth.CheckRequest{Service: name})
				if err != nil {
					t.Errorf("Check(%q) with notReady=%v: %v", name, state.notReady, err)
					continue
				}
				if res.Status != state.want {
					t.Errorf("Check(%q) with notReady=%v = %v, want %v", name, state.notReady, res.Status, state.want)
				}
			}
			_, err := hc.Check(t.Context(), &grpchealth.CheckRequest{Service: "cep.v1.NoSuchService"})
			if code := connect.CodeOf(err); code != connect.CodeNotFound {
				t.Errorf("Check(unknown) with notReady=%v: got %v, want not found", state.notReady, err)
			}
		}
	}

	// A server without Ready keeps answering SERVING.
	plain := startServer(t, NewHandler(Backends{Cluster: b.Cluster}))
	res, err := grpchealth.NewClient(plain.H2C, plain.URL, connect.WithGRPC()).Check(t.Context(), &grpchealth.CheckRequest{Service: cepv1connect.ClusterServiceName})
	if err != nil || res.Status != grpchealth.StatusServing {
		t.Errorf("without Ready: %v, %v; want serving", res, err)
	}
}
