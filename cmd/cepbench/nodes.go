package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/cepcluster/cep/cluster"
	"github.com/cepcluster/cep/cluster/secret"
)

// member is one node of the benchmarked cluster: in process (--nodes 1) or
// a cepnode process (--nodes 3).
type member struct {
	id, api, raft, gossip, dir string

	node *cluster.Node // in process

	bin     string // process
	args    []string
	env     []string // added to the benchmark's environment
	cmd     *exec.Cmd
	exited  chan struct{}
	logPath string
	logf    *os.File
}

func (m *member) alive() bool {
	if m.node != nil {
		return true
	}
	if m.cmd == nil {
		return false
	}
	select {
	case <-m.exited:
		return false
	default:
		return true
	}
}

func (m *member) start() error {
	f, err := os.OpenFile(m.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(m.bin, m.args...)
	cmd.Env = append(os.Environ(), m.env...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = childAttr()
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("start %s: %w", m.id, err)
	}
	m.cmd, m.logf, m.exited = cmd, f, make(chan struct{})
	done := m.exited
	go func() {
		cmd.Wait()
		close(done)
	}()
	return nil
}

// kill sends SIGKILL and waits (bounded) for the process to be gone.
func (m *member) kill() error {
	if m.cmd == nil {
		return nil
	}
	m.cmd.Process.Kill()
	var err error
	select {
	case <-m.exited:
	case <-time.After(10 * time.Second):
		err = fmt.Errorf("%s (pid %d) not gone 10s after SIGKILL", m.id, m.cmd.Process.Pid)
	}
	m.cmd = nil
	if m.logf != nil {
		m.logf.Close()
		m.logf = nil
	}
	return err
}

// logTail returns the last lines of a process's log.
func (m *member) logTail(n int) string {
	b, err := os.ReadFile(m.logPath)
	if err != nil {
		return ""
	}
	ls := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(ls) > n {
		ls = ls[len(ls)-n:]
	}
	return strings.Join(ls, "\n")
}

// benchCluster is the set of nodes.
type benchCluster struct {
	members []*member
	log     *slog.Logger
}

func (c *benchCluster) close() {
	for _, m := range c.members {
		if m.node != nil {
			done := make(chan struct{})
			go func(n *cluster.Node) { n.Close(); close(done) }(m.node)
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				c.log.Warn("in-process node did not close within 30s", "node", m.id)
			}
			m.node = nil
		}
		if err := m.kill(); err != nil {
			c.log.Warn("kill", "err", err)
		}
	}
}

func (c *benchCluster) alive() []*member {
	var out []*member
	for _, m := range c.members {
		if m.alive() {
			out = append(out, m)
		}
	}
	return out
}

// checkProcesses returns an error naming any node process that exited on
// its own, with the end of its log.
func (c *benchCluster) checkProcesses() error {
	for _, m := range c.members {
		if m.cmd != nil && !m.alive() {
			return fmt.Errorf("node %s exited unexpectedly; end of %s:\n%s", m.id, m.logPath, m.logTail(20))
		}
	}
	return nil
}

// startInProcess starts a single node in this process, reading from the
// bench's NATS server.
func startInProcess(ctx context.Context, dir, natsURL string, shards int, log, nodeLog *slog.Logger) (*benchCluster, error) {
	n, err := cluster.Start(ctx, cluster.Config{
		NodeID: "n1", DataDir: filepath.Join(dir, "n1"), RaftAddr: "127.0.0.1:0", APIAddr: "127.0.0.1:0",
		NATSURL: natsURL, Logger: nodeLog, Shards: shards,
	})
	if err != nil {
		return nil, err
	}
	return &benchCluster{log: log, members: []*member{{id: "n1", api: n.APIAddr(), node: n, dir: filepath.Join(dir, "n1")}}}, nil
}

// buildCepnode builds ./cmd/cepnode of the module into dir.
func buildCepnode(ctx context.Context, dir string) (string, error) {
	root, err := moduleRoot(ctx)
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "cepnode")
	cctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(cctx, "go", "build", "-o", bin, "./cmd/cepnode")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/cepnode: %v\n%s", err, out)
	}
	return bin, nil
}

func moduleRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("not inside the module: run from the repository (go run ./cmd/cepbench) or pass --cepnode")
	}
	return filepath.Dir(mod), nil
}

func freePorts(n int) ([]string, error) {
	var out []string
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	for i := 0; i < n; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		lns = append(lns, ln)
		out = append(out, ln.Addr().String())
	}
	return out, nil
}

// startProcesses starts n cepnode processes that list each other as peers
// and read from the bench's NATS server, as test/integration does.
// Each runs with GOMAXPROCS procs when procs > 0.
func startProcesses(bin, dir, natsURL string, n, shards, procs int, logLevel string, log *slog.Logger) (*benchCluster, error) {
	return startProcessesWith(bin, dir, natsURL, n, shards, procs, logLevel, nil, "", log)
}

// startProcessesWith is startProcesses with extra cepnode arguments and,
// when memLimit is not empty, GOMEMLIMIT=memLimit for each node.
func startProcessesWith(bin, dir, natsURL string, n, shards, procs int, logLevel string, extra []string, memLimit string, log *slog.Logger) (*benchCluster, error) {
	ports, err := freePorts(3 * n)
	if err != nil {
		return nil, err
	}
	c := &benchCluster{log: log}
	var peers []string
	// one cluster secret for all, in the environment (never on a command line)
	clusterSecret := "CEPNODE_CLUSTER_SECRET=" + secret.Generate().String()
	for i := 0; i < n; i++ {
		m := &member{id: fmt.Sprintf("n%d", i+1), raft: ports[3*i], api: ports[3*i+1], gossip: ports[3*i+2], bin: bin}
		m.env = []string{clusterSecret}
		if procs > 0 {
			m.env = append(m.env, "GOMAXPROCS="+strconv.Itoa(procs))
		}
		if memLimit != "" {
			m.env = append(m.env, "GOMEMLIMIT="+memLimit)
		}
		m.dir = filepath.Join(dir, m.id)
		m.logPath = m.dir + ".log"
		c.members = append(c.members, m)
		peers = append(peers, m.id+"="+m.raft+"="+m.api+"="+m.gossip)
	}
	for _, m := range c.members {
		m.args = []string{"--id", m.id, "--data", m.dir, "--raft-addr", m.raft, "--api-addr", m.api, "--gossip-addr", m.gossip,
			"--nats", natsURL, "--peers", strings.Join(peers, ","), "--log-level", logLevel, "--shards", strconv.Itoa(shards), "--pprof"}
		m.args = append(m.args, extra...)
		if err := m.start(); err != nil {
			c.close()
			return nil, err
		}
	}
	return c, nil
}

// waitReady waits until every live member answers /readyz.
func (c *benchCluster) waitReady(ctx context.Context, timeout time.Duration) error {
	return poll(ctx, timeout, 50*time.Millisecond, func() error {
		if err := c.checkProcesses(); err != nil {
			return permanent(err)
		}
		for _, m := range c.alive() {
			if err := ready(ctx, m.api); err != nil {
				return fmt.Errorf("%s: %w", m.id, err)
			}
		}
		return nil
	})
}

func ready(ctx context.Context, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/readyz", nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("readyz: %s", res.Status)
	}
	return nil
}

// permanentError stops poll at once.
type permanentError struct{ error }

func permanent(err error) error { return permanentError{err} }

// poll calls f every interval until it returns nil, a permanent error, or
// the timeout passes (then it returns f's last error).
func poll(ctx context.Context, timeout, interval time.Duration, f func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return nil
		}
		var pe permanentError
		if errors.As(err, &pe) {
			return pe.error
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %s: %w", timeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(interval):
		}
	}
}
