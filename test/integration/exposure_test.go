package integration

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cepcluster/cep/cluster"
)

// Attacks on a node's API port that must fail: reading the command line
// (it holds --token) from the profiler, profiling without the token, and
// making the node read a large body without the token.
func TestAPIExposesNothingWithoutTheToken(t *testing.T) {
	const token = "s3cret"
	tc := newSingle(t, time.Minute, cluster.Config{APIToken: token, Pprof: true})
	base := "http://" + tc.nodes[0].APIAddr()
	get := func(path, auth string) (int, string) {
		req, _ := http.NewRequestWithContext(tc.ctx, http.MethodGet, base+path, nil)
		if auth != "" {
			req.Header.Set("Authorization", "Bearer "+auth)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var b bytes.Buffer
		b.ReadFrom(res.Body)
		return res.StatusCode, b.String()
	}
	if code, body := get("/debug/pprof/cmdline", token); code != http.StatusNotFound || strings.Contains(body, token) {
		t.Errorf("the command line: HTTP %d %q", code, body)
	}
	if code, _ := get("/debug/pprof/", ""); code != http.StatusUnauthorized {
		t.Errorf("profiles without the token: HTTP %d", code)
	}
	if code, _ := get("/debug/pprof/", token); code != http.StatusOK {
		t.Errorf("profiles with the token: HTTP %d", code)
	}
	if code, _ := get("/healthz", ""); code != http.StatusOK {
		t.Errorf("/healthz without the token: HTTP %d", code)
	}
	req, _ := http.NewRequestWithContext(tc.ctx, http.MethodPost, base+"/cep.v1.PatternService/DeployPattern", bytes.NewReader(make([]byte, 3<<20)))
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized {
		t.Errorf("a 3 MiB body without the token: HTTP %d", res.StatusCode)
	}
}
