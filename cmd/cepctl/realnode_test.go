package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cepcluster/cep/internal/testutil"
)

// startNode runs a single-node cluster, cepnode as a process with its
// embedded NATS, until the test ends, and returns its API URL.
func startNode(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("runs a cepnode")
	}
	bin := filepath.Join(t.TempDir(), "cepnode")
	if out, err := exec.Command("go", "build", "-o", bin, "../cepnode").CombinedOutput(); err != nil {
		t.Fatalf("build cepnode: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "--data", t.TempDir(), "--raft-addr", "127.0.0.1:0", "--api-addr", "127.0.0.1:0",
		"--gossip-addr", "127.0.0.1:0", "--nats-port", "-1", "--log-format", "json")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")} // no CEPNODE_* of the caller's
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	api := make(chan string, 1)
	done := make(chan struct{})
	go func() { // reads the node's log until it exits
		defer close(done)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var rec struct{ Msg, API string }
			if json.Unmarshal(sc.Bytes(), &rec) == nil && rec.Msg == "cepnode started" {
				api <- "http://" + rec.API
			}
		}
		io.Copy(io.Discard, stderr)
	}()
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		<-done
		cmd.Wait()
	})
	select {
	case url := <-api:
		return url
	case <-done:
		t.Fatal("cepnode exited before it started")
	case <-time.After(60 * time.Second):
		t.Fatal("cepnode did not start within 60s")
	}
	return ""
}

// quickStartNode starts a node as the README's quick start leaves it: the
// source bank keyed by e.account (created once the node answers) and the
// example pattern deployed; it returns the node's API URL.
func quickStartNode(t *testing.T) string {
	t.Helper()
	url := startNode(t)
	testutil.Eventually(t, 30*time.Second, func() error {
		if r := cepctl(t, url, "source", "create", "bank", "--key", "e.account"); r.code != 0 && !strings.Contains(r.stderr, "already") {
			return &testError{r.stderr}
		}
		return nil
	})
	cepctl(t, url, "pattern", "deploy", "../../examples/login-fail-logout.yaml").mustOK(t)
	return url
}

// Against a real node: node list shows it as the alive meta leader,
// completion offers the names the server has, and tail --dead-letters
// prints the dead letters of the events the pattern refused, as the
// server recorded them, in table and JSON form.
func TestAgainstANode(t *testing.T) {
	url := quickStartNode(t)

	out := cepctl(t, url, "node", "list").mustOK(t).stdout
	if !hasRow(out, "NODE", "STATE", "META", "REPLICAS", "RAFT", "API", "GOSSIP") || len(fields(out)) != 3 {
		t.Fatalf("node list:\n%s", out)
	}
	if r := fields(out)[1]; r[0] != "node1" || r[1] != "alive" || r[2] != "leader" || "http://"+r[5] != url {
		t.Errorf("node list row %q, want node1 alive leader at %s", r, url)
	}
	var nl struct {
		Nodes []struct {
			ID, State    string
			IsMetaLeader bool
		}
		MetaLeaderID string
	}
	if err := json.Unmarshal([]byte(cepctl(t, url, "node", "list", "-o", "json").mustOK(t).stdout), &nl); err != nil || len(nl.Nodes) != 1 || nl.MetaLeaderID != "node1" || !nl.Nodes[0].IsMetaLeader || nl.Nodes[0].State != "alive" {
		t.Errorf("node list -o json: %+v, %v", nl, err)
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"pattern", "get", ""}, "login-fail-logout\tpattern on bank"},
		{[]string{"pattern", "delete", "login"}, "login-fail-logout\t"},
		{[]string{"tail", ""}, "login-fail-logout\t"},
		{[]string{"tail", "--dead-letters", "--source", ""}, "bank\tsource keyed by e.account"},
		{[]string{"source", "delete", "b"}, "bank\t"},
		{[]string{"publish", "--source", ""}, "bank\t"},
		{[]string{"node", "remove", ""}, "node1\talive at " + strings.TrimPrefix(url, "http://")},
	} {
		r := cepctl(t, url, append([]string{"__complete"}, c.args...)...).mustOK(t)
		if !strings.Contains(r.stdout, c.want) || !strings.HasSuffix(r.stdout, ":4\n") {
			t.Errorf("completing %q: %q, want %q and no file names (:4)", c.args, r.stdout, c.want)
		}
	}
	if r := cepctl(t, url, "__complete", "pattern", "get", "zzz").mustOK(t); strings.Contains(r.stdout, "login") {
		t.Errorf("completing zzz offers %q", r.stdout)
	}

	// an event without the pattern's time field, and one with it
	events := filepath.Join(t.TempDir(), "events.jsonl")
	os.WriteFile(events, []byte(`{"account":"acc-5","type":"LOGIN"}`+"\n"+`{"account":"acc-6","type":"LOGIN","ts":1000}`+"\n"), 0o600)
	cepctl(t, url, "publish", "--source", "bank", "-f", events).mustOK(t)

	// one shard: the pattern runs on its own events' watermark, and status
	// shows it all the same (acc-6 at 1000, outOfOrderness 2s: -1001 ms),
	// as a time in the table and as the number in -o json
	wantRow := []string{"1", "bank", "login-fail-logout", "1969-12-31T23:59:58.999Z", "2.001s"}
	var status string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		status = cepctl(t, url, "status").mustOK(t).stdout
		if slices.ContainsFunc(fields(status), func(r []string) bool { return len(r) >= 5 && slices.Equal(r[:5], wantRow) }) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status shows no watermark row %v:\n%s", wantRow, status)
		}
	}
	var st struct {
		Shards []struct {
			Clocks []struct {
				Source      string `json:"source"`
				WatermarkMs int64  `json:"watermarkMs"`
			} `json:"clocks"`
		} `json:"shards"`
	}
	if err := json.Unmarshal([]byte(cepctl(t, url, "status", "-o", "json").mustOK(t).stdout), &st); err != nil ||
		len(st.Shards) != 1 || len(st.Shards[0].Clocks) != 1 || st.Shards[0].Clocks[0].WatermarkMs != -1001 {
		t.Errorf("status -o json clocks: %+v %v", st, err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var buf syncBuffer
	done := make(chan result, 1)
	go func() {
		done <- cepctlCtx(ctx, t, nil, strings.NewReader(""), &buf, "--server", url, "tail", "--dead-letters", "--from", "all", "-o", "json")
	}()
	select {
	case <-buf.waitLines(1):
	case r := <-done:
		t.Fatalf("tail ended: %+v", r)
	case <-time.After(30 * time.Second):
		t.Fatal("no dead letter within 30s")
	}
	cancel()
	if r := <-done; r.code != 0 {
		t.Errorf("an interrupted tail exits %d: %s", r.code, r.stderr)
	}
	var dl struct {
		Source, Pattern, Reason string
		Data                    json.RawMessage
	}
	line := strings.Split(buf.String(), "\n")[0]
	if err := json.Unmarshal([]byte(line), &dl); err != nil || dl.Source != "bank" || dl.Pattern != "login-fail-logout" || dl.Reason == "" || string(dl.Data) != `{"account":"acc-5","type":"LOGIN"}` {
		t.Errorf("dead letter %s: %+v %v", line, dl, err)
	}
	if strings.Contains(buf.String(), "acc-6") {
		t.Errorf("a good event among the dead letters:\n%s", buf.String())
	}

	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	var table syncBuffer
	go func() {
		done <- cepctlCtx(ctx2, t, nil, strings.NewReader(""), &table, "--server", url, "tail", "--dead-letters", "--source", "bank", "--from", "all")
	}()
	select {
	case <-table.waitLines(1):
	case <-time.After(30 * time.Second):
		t.Fatal("no dead letter within 30s")
	}
	cancel2()
	<-done
	row := fields(table.String())[0]
	if len(row) < 5 || row[1] != "deadletter" || row[2] != "bank" || row[3] != "login-fail-logout" || !strings.Contains(table.String(), `{"account":"acc-5","type":"LOGIN"}`) {
		t.Errorf("table line %q", table.String())
	}

	// --follow=false prints what is stored from --from and returns: the
	// one dead letter, as the following tail printed it first
	stored := func(args ...string) result {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		r := cepctlCtx(ctx, t, nil, strings.NewReader(""), &syncBuffer{}, append([]string{"--server", url, "tail", "--follow=false", "-o", "json"}, args...)...)
		if ctx.Err() != nil {
			t.Fatalf("tail %q --follow=false did not return within 30s", args)
		}
		return r.mustOK(t)
	}
	if r := stored("--dead-letters", "--from", "all"); r.stdout != line+"\n" {
		t.Errorf("tail --dead-letters --from all --follow=false printed\n%s\nwant\n%s", r.stdout, line)
	}
	if r := stored("--dead-letters", "--from", "new"); r.stdout != "" {
		t.Errorf("tail --dead-letters --from new --follow=false printed %q, want nothing", r.stdout)
	}
	if r := stored("login-fail-logout", "--from", "all"); r.stdout != "" {
		t.Errorf("a pattern without records: %q", r.stdout)
	}
}

type testError struct{ s string }

func (e *testError) Error() string { return e.s }
