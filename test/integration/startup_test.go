package integration

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"encoding/json"

	"go.etcd.io/bbolt"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/internal/testutil"
)

// singleArgs are the flags of a single-node cepnode with its own embedded
// NATS, its data in dir, on free loopback ports.
func singleArgs(t *testing.T, dir string) (args []string, apiAddr string, natsPort int) {
	t.Helper()
	ports := freePorts(t, 4)
	_, p, _ := net.SplitHostPort(ports[3])
	natsPort, _ = strconv.Atoi(p)
	return []string{"--id", "n1", "--data", dir, "--raft-addr", ports[0], "--api-addr", ports[1], "--gossip-addr", ports[2],
		"--nats-port", p, "--log-level", "warn"}, ports[1], natsPort
}

// runBounded runs cepnode with args and returns its output and how long it
// ran; a run past limit is killed and fails the test (a start that hangs).
func runBounded(t *testing.T, limit time.Duration, args ...string) (string, time.Duration, error) {
	t.Helper()
	cmd := exec.Command(cepnodeBin, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	began := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return out.String(), time.Since(began), err
	case <-time.After(limit):
		cmd.Process.Kill()
		<-done
		t.Fatalf("cepnode %s still running after %v (killed); output:\n%s", strings.Join(args, " "), limit, out.String())
		return "", 0, nil
	}
}

// waitHealthy waits until the API at addr answers /healthz.
func waitHealthy(t *testing.T, addr string) {
	t.Helper()
	testutil.EventuallyEvery(t, 30*time.Second, poll, func() error {
		res, err := http.Get("http://" + addr + "/healthz")
		if err != nil {
			return err
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			return fmt.Errorf("/healthz: HTTP %d", res.StatusCode)
		}
		return nil
	})
}

// A second cepnode on a data directory in use fails within a second,
// naming the directory and the pid holding it; after the first is killed
// with SIGKILL (its LOCK file left behind with a dead pid) a new start
// succeeds.
func TestStartupDataDirInUse(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	base := t.TempDir()
	dir := filepath.Join(base, "n1")
	args, api, _ := singleArgs(t, dir)
	first := &proc{id: "n1", dir: dir, args: args}
	first.start(t)
	defer first.kill()
	waitHealthy(t, api)
	pid := first.cmd.Process.Pid

	// other ports, so that only the directory is shared
	second, _, _ := singleArgs(t, dir)
	out, took, err := runBounded(t, 10*time.Second, second...)
	if err == nil {
		t.Fatalf("a second node on %s started; output:\n%s", dir, out)
	}
	if took > time.Second {
		t.Errorf("the second node took %v to fail, want under 1s", took)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	last := lines[len(lines)-1]
	if len(lines) != 1 {
		t.Errorf("the second node said more than the one line of its error:\n%s", out)
	}
	if !strings.Contains(last, dir) || !strings.Contains(last, fmt.Sprintf("process %d", pid)) {
		t.Errorf("the error does not name %s and pid %d: %q", dir, pid, last)
	}
	waitHealthy(t, api) // the first is untouched

	first.kill() // SIGKILL: no Close, the lock file stays
	b, err := os.ReadFile(filepath.Join(dir, "LOCK"))
	if err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(pid) {
		t.Fatalf("LOCK after SIGKILL: %q, %v; want the dead pid %d", b, err, pid)
	}
	again, api2, _ := singleArgs(t, dir)
	restarted := &proc{id: "n1", dir: dir, args: again}
	restarted.start(t)
	defer restarted.kill()
	waitHealthy(t, api2)
	b, _ = os.ReadFile(filepath.Join(dir, "LOCK"))
	if strings.TrimSpace(string(b)) != strconv.Itoa(restarted.cmd.Process.Pid) {
		t.Errorf("LOCK holds %q, want the new pid %d", b, restarted.cmd.Process.Pid)
	}
	// and it stops on SIGTERM, releasing the directory
	restarted.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- restarted.cmd.Wait() }()
	select {
	case err := <-done:
		restarted.cmd = nil
		if err != nil {
			t.Errorf("cepnode exited after SIGTERM with %v", err)
		}
	case <-time.After(40 * time.Second):
		t.Fatal("cepnode did not stop on SIGTERM")
	}
	third, api3, _ := singleArgs(t, dir)
	p3 := &proc{id: "n1", dir: dir, args: third}
	p3.start(t)
	defer p3.kill()
	waitHealthy(t, api3)
}

// A taken port is reported at once with the bind error, naming the flag
// and the address: the embedded NATS port, and the Raft, API and gossip
// addresses.
func TestStartupPortTaken(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	taken := ln.Addr().String()
	_, port, _ := net.SplitHostPort(taken)

	for _, c := range []struct {
		name, flag string
		within     time.Duration // the NATS port is the first thing a start binds
		want       []string
	}{
		{"nats", "--nats-port", time.Second, []string{"--nats-port", port, "address already in use"}},
		{"raft", "--raft-addr", 10 * time.Second, []string{"--raft-addr", taken, "address already in use"}},
		{"api", "--api-addr", 10 * time.Second, []string{"--api-addr", taken, "address already in use"}},
		{"gossip", "--gossip-addr", 10 * time.Second, []string{"--gossip-addr", taken, "address already in use"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			args, _, _ := singleArgs(t, filepath.Join(t.TempDir(), "n1"))
			for i := range args {
				if args[i] == c.flag {
					args[i+1] = taken
					if c.flag == "--nats-port" {
						args[i+1] = port
					}
				}
			}
			out, took, err := runBounded(t, 30*time.Second, args...)
			if err == nil {
				t.Fatalf("started on a taken port; output:\n%s", out)
			}
			if took > c.within {
				t.Errorf("took %v to report the taken port, want under %v", took, c.within)
			}
			lines := strings.Split(strings.TrimSpace(out), "\n")
			last := lines[len(lines)-1]
			for _, w := range c.want {
				if !strings.Contains(last, w) {
					t.Errorf("the error lacks %q: %q", w, last)
				}
			}
		})
	}
}

// A start blocked on a Raft log another process holds (the data
// directory's lock bypassed: the file is held directly) ends with an
// error naming the file, and sooner on SIGTERM.
func TestStartupRaftLogHeld(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	dir := filepath.Join(t.TempDir(), "n1")
	if err := os.MkdirAll(filepath.Join(dir, "meta"), 0o755); err != nil {
		t.Fatal(err)
	}
	logFile := filepath.Join(dir, "meta", "raft.db")
	db, err := bbolt.Open(logFile, 0o600, nil) // this process holds its lock
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()

	t.Run("timeout", func(t *testing.T) {
		args, _, _ := singleArgs(t, dir)
		out, took, err := runBounded(t, 20*time.Second, args...)
		if err == nil {
			t.Fatalf("started with its log held; output:\n%s", out)
		}
		if !strings.Contains(out, logFile) || !strings.Contains(out, "locked") {
			t.Errorf("the error does not name %s as locked:\n%s", logFile, out)
		}
		t.Logf("failed after %v", took)
	})

	t.Run("sigterm", func(t *testing.T) {
		args, _, natsPort := singleArgs(t, dir)
		cmd := exec.Command(cepnodeBin, args...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		defer func() {
			if cmd.ProcessState == nil {
				cmd.Process.Kill()
				<-done
			}
		}()
		// the embedded NATS serves: the start has gone past it, on to the
		// metadata log
		testutil.EventuallyEvery(t, 20*time.Second, poll, func() error {
			c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(natsPort)))
			if err != nil {
				return err
			}
			return c.Close()
		})
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-done:
			var ee *exec.ExitError
			if !errors.As(err, &ee) {
				t.Errorf("exit after SIGTERM while starting: %v, want a failure; output:\n%s", err, out.String())
			}
		case <-time.After(2 * time.Second):
			t.Fatalf("cepnode did not stop within 2s of SIGTERM while starting; output:\n%s", out.String())
		}
	})
}

// runCepctl runs the cepctl command, built once, against the API at addr.
func runCepctl(t *testing.T, addr string, args ...string) string {
	t.Helper()
	bin := buildCepctl(t)
	cmd := exec.Command(bin, append([]string{"--server", "http://" + addr}, args...)...)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir()) // no config file of the user's
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("cepctl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// statusJSON is what cepctl status -o json says of the replicas: node id
// → shard id → the applied index, nil where it is not given.
func statusJSON(t *testing.T, addr string) map[string]map[int]*uint64 {
	t.Helper()
	var v struct {
		Shards []struct {
			ID       int `json:"id"`
			Replicas []struct {
				NodeID         string  `json:"nodeId"`
				AppliedIndex   *uint64 `json:"appliedIndex"`
				AppliedUnknown bool    `json:"appliedUnknown"`
			} `json:"replicas"`
		} `json:"shards"`
	}
	out := runCepctl(t, addr, "status", "-o", "json")
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("%v in\n%s", err, out)
	}
	m := map[string]map[int]*uint64{}
	for _, s := range v.Shards {
		for _, r := range s.Replicas {
			if m[r.NodeID] == nil {
				m[r.NodeID] = map[int]*uint64{}
			}
			if r.AppliedUnknown != (r.AppliedIndex == nil) {
				t.Errorf("shard %d replica %s: unknown %v with index %v", s.ID, r.NodeID, r.AppliedUnknown, r.AppliedIndex)
			}
			m[r.NodeID][s.ID] = r.AppliedIndex
		}
	}
	return m
}

// cepctl status's shard list (ListShards cluster-wide) gives every
// replica's applied index as its own node reports it, not 0 for the
// followers; a stopped node's replicas are unknown, without an index.
func TestStartupStatusEveryReplica(t *testing.T) {
	tc := newPeers(t, 3, 2*time.Minute)
	tc.startAll()
	tc.deployOnBank(0, lflSpec)
	tc.publish("bank", func(e map[string]any) string { return fmt.Sprint(e["account"]) }, bankEvents(7, 300))

	// own is each node's view of its own replicas: shard id → applied
	own := func(i int) (map[uint32]uint64, error) {
		res, err := tc.client(i).cluster.ListShards(tc.ctx, req(&cepv1.ListShardsRequest{}))
		if err != nil {
			return nil, err
		}
		m := map[uint32]uint64{}
		for _, s := range res.Msg.Shards {
			m[s.Id] = s.LastAppliedIndex
		}
		return m, nil
	}
	testutil.EventuallyEvery(t, 30*time.Second, poll, func() error {
		views := make([]map[uint32]uint64, 3)
		for i := range views {
			v, err := own(i)
			if err != nil {
				return err
			}
			views[i] = v
		}
		res, err := tc.client(0).cluster.ListShards(tc.ctx, req(&cepv1.ListShardsRequest{ClusterWide: true}))
		if err != nil {
			return err
		}
		if len(res.Msg.Shards) == 0 {
			return errors.New("no shards")
		}
		for _, s := range res.Msg.Shards {
			if len(s.Replicas) != 3 {
				return fmt.Errorf("shard %d: replicas %v", s.Id, s.Replicas)
			}
			for _, r := range s.Replicas {
				i := int(r.NodeId[1] - '1')
				mine, ok := views[i][s.Id]
				switch {
				case r.AppliedUnknown || r.AppliedIndex == 0:
					return fmt.Errorf("shard %d: replica on %s reported as %d (unknown %v)", s.Id, r.NodeId, r.AppliedIndex, r.AppliedUnknown)
				case !ok || mine != r.AppliedIndex:
					// the log may still move between the two asks
					return fmt.Errorf("shard %d: replica on %s at %d in the status, %d (%v) in its own view", s.Id, r.NodeId, r.AppliedIndex, mine, ok)
				}
			}
		}
		return nil
	})

	// as cepctl prints it: every replica's index, none of them 0
	for node, shards := range statusJSON(t, tc.nodes[0].APIAddr()) {
		for id, idx := range shards {
			if idx == nil || *idx == 0 {
				t.Errorf("cepctl status -o json: shard %d on %s at %v", id, node, idx)
			}
		}
	}
	if text := runCepctl(t, tc.nodes[0].APIAddr(), "status"); strings.Contains(text, "unknown") || strings.Contains(text, "=0") {
		t.Errorf("cepctl status with every node up:\n%s", text)
	}

	if err := tc.stop(2); err != nil {
		t.Logf("stop n3: %v", err)
	}
	testutil.EventuallyEvery(t, 30*time.Second, poll, func() error {
		res, err := tc.client(0).cluster.ListShards(tc.ctx, req(&cepv1.ListShardsRequest{ClusterWide: true}))
		if err != nil {
			return err
		}
		for _, s := range res.Msg.Shards {
			for _, r := range s.Replicas {
				stopped := r.NodeId == "n3"
				if stopped && (!r.AppliedUnknown || r.AppliedIndex != 0) {
					return fmt.Errorf("shard %d: the stopped node's replica reported at %d (unknown %v)", s.Id, r.AppliedIndex, r.AppliedUnknown)
				}
				if !stopped && (r.AppliedUnknown || r.AppliedIndex == 0) {
					return fmt.Errorf("shard %d: replica on %s at %d (unknown %v)", s.Id, r.NodeId, r.AppliedIndex, r.AppliedUnknown)
				}
			}
		}
		return nil
	})
	for node, shards := range statusJSON(t, tc.nodes[0].APIAddr()) {
		for id, idx := range shards {
			if stopped := node == "n3"; stopped != (idx == nil) || (idx != nil && *idx == 0) {
				t.Errorf("cepctl status -o json after n3 stopped: shard %d on %s at %v", id, node, idx)
			}
		}
	}
	if text := runCepctl(t, tc.nodes[0].APIAddr(), "status"); !strings.Contains(text, "n3=unknown") || strings.Contains(text, "n1=unknown") {
		t.Errorf("cepctl status after n3 stopped:\n%s", text)
	}
}
