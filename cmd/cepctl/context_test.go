package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cepcluster/cep/api"
)

// recordingAPI serves a cluster status over the real API handler and
// records the bearer token of each call.
type recordingAPI struct {
	url    string
	mu     sync.Mutex
	tokens []string
}

func (r *recordingAPI) last() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.tokens) == 0 {
		return "(no call)"
	}
	return r.tokens[len(r.tokens)-1]
}

func newRecordingAPI(t *testing.T) *recordingAPI {
	r := &recordingAPI{}
	h := api.NewHandler(api.Backends{Cluster: statusCluster()})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.tokens = append(r.tokens, strings.TrimPrefix(req.Header.Get("Authorization"), "Bearer "))
		r.mu.Unlock()
		h.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	r.url = srv.URL
	return r
}

// Contexts name clusters' settings in the config file (mode 0600, token
// files by path, never tokens); the one in use is --context, else
// CEPCTL_CONTEXT, else the current one, and the environment and flags
// override it.
func TestContexts(t *testing.T) {
	dir := t.TempDir()
	xdg := filepath.Join(dir, "xdg")
	env := map[string]string{"XDG_CONFIG_HOME": xdg}
	a, b := newRecordingAPI(t), newRecordingAPI(t)
	tokA, tokB := filepath.Join(dir, "a.token"), filepath.Join(dir, "b.token")
	os.WriteFile(tokA, []byte("tok-a-secret\n"), 0o600)
	os.WriteFile(tokB, []byte("tok-b-secret\n"), 0o600)
	run := func(env map[string]string, args ...string) result {
		t.Helper()
		return cepctlEnv(t, env, "", args...)
	}
	run(env, "context", "current").mustFail(t, "no context in use")
	run(env, "context", "set", "a", "--server", a.url, "--token-file", tokA).mustOK(t)
	run(env, "context", "set", "b", "--server", b.url, "--token-file", tokB, "--nats", "nats://127.0.0.1:4999").mustOK(t)
	run(env, "context", "set", "c", "--token", "tok-c-secret").mustFail(t, "a context keeps a token file, not a token")
	run(env, "context", "set", "c", "--token-file", filepath.Join(dir, "none")).mustFail(t, "--token-file")
	run(env, "context", "set", "bad name").mustFail(t, `context name "bad name"`)

	file := filepath.Join(xdg, "cep", "cepctl.yaml")
	content, err := os.ReadFile(file)
	fi, _ := os.Stat(file)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("%s: %v, mode %v", file, err, fi.Mode())
	}
	if strings.Contains(string(content), "secret") || !strings.Contains(string(content), tokA) || strings.Contains(string(content), `"c"`) {
		t.Errorf("the config file holds a token, or lacks the token file's path, or a refused context:\n%s", content)
	}

	if got := strings.TrimSpace(run(env, "context", "current").mustOK(t).stdout); got != "a" {
		t.Errorf("the first context is not the current one: %q", got)
	}
	// status calls the server it resolves; want says which got the calls,
	// and with which token
	status := func(what string, want *recordingAPI, token string, env map[string]string, args ...string) {
		t.Helper()
		for _, s := range []*recordingAPI{a, b} {
			s.mu.Lock()
			s.tokens = nil
			s.mu.Unlock()
		}
		run(env, append(args, "status")...).mustOK(t)
		other := map[*recordingAPI]*recordingAPI{a: b, b: a}[want]
		if want.last() != token || len(other.tokens) != 0 {
			t.Errorf("%s: the server wanted got token %q, the other %d calls", what, want.last(), len(other.tokens))
		}
	}
	status("current context a", a, "tok-a-secret", env)
	run(env, "context", "use", "b").mustOK(t)
	status("context use b", b, "tok-b-secret", env)
	status("--context a", a, "tok-a-secret", env, "--context", "a")
	withEnv := map[string]string{"XDG_CONFIG_HOME": xdg, "CEPCTL_CONTEXT": "a"}
	status("CEPCTL_CONTEXT=a", a, "tok-a-secret", withEnv)
	status("--context b over CEPCTL_CONTEXT=a", b, "tok-b-secret", withEnv, "--context", "b")
	// the environment and the flags override the context
	status("CEPCTL_SERVER under context b", a, "tok-b-secret", map[string]string{"XDG_CONFIG_HOME": xdg, "CEPCTL_SERVER": a.url})
	status("--server, --token-file under context b", a, "tok-a-secret", env, "--server", a.url, "--token-file", tokA)
	run(env, "--context", "zz", "status").mustFail(t, `--context: no context "zz"`)
	run(map[string]string{"XDG_CONFIG_HOME": filepath.Join(dir, "none"), "CEPCTL_CONTEXT": "a"}, "status").mustFail(t, `CEPCTL_CONTEXT: no context "a"`)

	// the context's NATS reaches publish unless its flag is given
	var got *publishOptions
	pub := func(args ...string) {
		t.Helper()
		d := &deps{stdout: &strings.Builder{}, stderr: &strings.Builder{}, getenv: func(k string) string { return env[k] }, homeDir: func() (string, error) { return dir, nil }}
		root := newBareRootCmd(d)
		root.AddCommand(newPublishCmd(d, func(o *publishOptions) error { got = o; return nil }))
		root.SetArgs(append([]string{"publish", "--source", "bank"}, args...))
		if err := root.ExecuteContext(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	pub()
	if got.NATSURL != "nats://127.0.0.1:4999" || got.Server != b.url {
		t.Errorf("publish under context b: NATS %q, server %q", got.NATSURL, got.Server)
	}
	pub("--nats", "nats://127.0.0.1:5000")
	if got.NATSURL != "nats://127.0.0.1:5000" {
		t.Errorf("publish --nats under context b: %q", got.NATSURL)
	}

	// list, change, delete
	out := run(env, "context", "list").mustOK(t).stdout
	if !hasRow(out, "a", a.url, tokA, "-", "-") || !hasRow(out, "*", "b", b.url, tokB, "-", "nats://127.0.0.1:4999") {
		t.Errorf("context list:\n%s", out)
	}
	var js struct {
		Contexts []struct {
			Name      string `json:"name"`
			Current   bool   `json:"current"`
			Server    string `json:"server"`
			TokenFile string `json:"token-file"`
		} `json:"contexts"`
	}
	if err := json.Unmarshal([]byte(run(env, "context", "list", "-o", "json").mustOK(t).stdout), &js); err != nil || len(js.Contexts) != 2 || js.Contexts[1].Name != "b" || !js.Contexts[1].Current || js.Contexts[0].TokenFile != tokA {
		t.Errorf("context list -o json: %+v %v", js, err)
	}
	run(env, "context", "set", "b", "--nats", "").mustOK(t)
	if out := run(env, "context", "list").mustOK(t).stdout; !hasRow(out, "*", "b", b.url, tokB, "-", "-") {
		t.Errorf("the NATS URL of b not removed:\n%s", out)
	}
	run(env, "context", "use", "zz").mustFail(t, `no context "zz"`)
	run(env, "context", "delete", "b").mustOK(t)
	run(env, "context", "current").mustFail(t, "no context in use")
	if out := run(env, "__complete", "context", "use", "").mustOK(t).stdout; !strings.Contains(out, "a\t"+a.url) || strings.Contains(out, "b\t") {
		t.Errorf("completing context names: %q", out)
	}
	run(env, "--context", "b", "status").mustFail(t, `--context: no context "b"`)
}

// A completion whose server does not answer gives no names, quietly, in
// bounded time; one that cannot reach it at all the same.
func TestCompletionIsBoundedAndQuiet(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	stall := make(chan struct{})
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-stall:
		case <-r.Context().Done():
		}
	})}
	go srv.Serve(ln)
	defer func() { close(stall); srv.Close() }()
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	closedURL := "http://" + closed.Addr().String()
	closed.Close()
	for _, url := range []string{"http://" + ln.Addr().String(), closedURL} {
		start := time.Now()
		r := cepctl(t, url, "__complete", "pattern", "get", "")
		if took := time.Since(start); took > completionTimeout+3*time.Second {
			t.Errorf("%s: completion took %v", url, took)
		}
		if r.code != 0 || r.stdout != ":4\n" || strings.Contains(r.stderr, "cepctl:") {
			t.Errorf("%s: exit %d, stdout %q, stderr %q", url, r.code, r.stdout, r.stderr)
		}
	}
	for _, shell := range []string{"bash", "zsh", "fish", "powershell"} {
		if out := cepctl(t, "http://127.0.0.1:1", "completion", shell).mustOK(t).stdout; !strings.Contains(out, "__complete") {
			t.Errorf("completion %s: no script", shell)
		}
	}
}

// cepctl version prints the version set at build time.
func TestVersion(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "cepctl")
	if out, err := exec.Command("go", "build", "-ldflags", "-X github.com/cepcluster/cep/internal/version.Version=v9.8.7-test", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "cepctl v9.8.7-test") {
		t.Errorf("cepctl version: %v, %q", err, out)
	}
	out, err = exec.Command(bin, "version", "-o", "json").Output()
	var v struct{ Version string }
	if err != nil || json.Unmarshal(out, &v) != nil || v.Version != "v9.8.7-test" {
		t.Errorf("cepctl version -o json: %v, %s", err, out)
	}
}

// A context's server may be a list of nodes: commands call the first.
func TestContextWithAListOfServers(t *testing.T) {
	env := map[string]string{"XDG_CONFIG_HOME": filepath.Join(t.TempDir(), "xdg")}
	a := newRecordingAPI(t)
	cepctlEnv(t, env, "", "context", "set", "c", "--server", a.url+",127.0.0.1:1").mustOK(t)
	cepctlEnv(t, env, "", "context", "set", "bad", "--server", a.url+",ftp://x").mustFail(t, "--server", "want http://HOST:PORT")
	cepctlEnv(t, env, "", "--context", "c", "status").mustOK(t)
	if a.last() != "" {
		t.Errorf("the first server got %q, want a call without a token", a.last())
	}
}
