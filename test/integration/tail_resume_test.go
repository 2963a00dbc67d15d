package integration

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/internal/testutil"
)

// lineLog is a process's output, line by line, safe for one writer and a
// reader.
type lineLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *lineLog) add(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, s)
}

func (l *lineLog) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}

// cepctl tail, given the three nodes' addresses, outlives the node it
// reads from: killed mid-stream, the tail goes on on another node, and
// what it printed is the output stream's records, as a JetStream reader
// gets them, each once and in order.
func TestTailResumesOnAnotherNode(t *testing.T) {
	bin := buildCepctl(t)
	tc := newPeers(t, 3, 3*time.Minute)
	tc.startAll()
	tc.deployOnBank(1, lflSpec)

	const half = 20
	junk := func(from int) []string {
		var out []string
		for i := from; i < from+half; i++ {
			out = append(out, fmt.Sprintf("junk %d", i))
		}
		return out
	}
	tc.publishRaw("bank.acc-1", junk(0)...)
	tc.waitOutputs("cep.deadletter.bank", half, 30*time.Second)

	var servers []string
	for _, cfg := range tc.cfgs {
		servers = append(servers, "http://"+cfg.APIAddr)
	}
	cmd := exec.CommandContext(tc.ctx, bin, "--server", strings.Join(servers, ","),
		"tail", "--dead-letters", "--source", "bank", "--from", "all", "-o", "json")
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "XDG_CONFIG_HOME=", "CEPCTL_SERVER=", "CEPCTL_CONTEXT=")
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGINT) }
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var printed lineLog
	read := make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			printed.add(sc.Text())
		}
	}()
	stopped := false
	defer func() {
		if !stopped {
			cmd.Process.Kill()
			<-read
			cmd.Wait()
		}
	}()
	waitPrinted := func(n int) {
		t.Helper()
		testutil.EventuallyEvery(t, 60*time.Second, poll, func() error {
			if got := len(printed.get()); got < n {
				return fmt.Errorf("cepctl tail printed %d records, want %d; stderr: %s", got, n, stderr.String())
			}
			return nil
		})
	}
	waitPrinted(half)

	// the node the tail reads from (the first of the list) stops, while
	// the tail is open on it; more dead letters come
	if err := tc.stop(0); err != nil {
		t.Logf("stop n1: %v", err)
	}
	tc.publishRaw("bank.acc-1", junk(half)...)
	want := tc.waitOutputs("cep.deadletter.bank", 2*half, 60*time.Second)
	waitPrinted(len(want))

	// a record beyond those would be a repeat: let the tail go on a moment
	// before it is stopped
	time.Sleep(500 * time.Millisecond)
	cmd.Process.Signal(syscall.SIGINT)
	<-read
	err = cmd.Wait()
	stopped = true
	if err != nil {
		t.Errorf("cepctl tail, interrupted: %v\n%s", err, stderr.String())
	}
	got := printed.get()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("cepctl tail printed %d records:\n%s\nthe stream holds %d:\n%s", len(got), strings.Join(got, "\n"), len(want), strings.Join(want, "\n"))
	}
	t.Logf("cepctl tail's stderr:\n%s", stderr.String())
	if !strings.Contains(stderr.String(), "resuming") {
		t.Errorf("stderr does not say the tail resumed: %q", stderr.String())
	}
}

// Deleting a source a pattern reads is refused for what it is: a failed
// precondition naming the pattern, not a concurrent change to retry.
func TestDeleteSourceReadByAPatternSaysWhy(t *testing.T) {
	tc := newPeers(t, 3, 2*time.Minute)
	tc.startAll()
	c := tc.deployOnBank(0, lflSpec)
	_, err := tc.client(2).sources.DeleteSource(tc.ctx, req(&cepv1.DeleteSourceRequest{Name: "bank"}))
	if connect.CodeOf(err) != connect.CodeFailedPrecondition || !strings.Contains(err.Error(), `source "bank" is read by pattern(s) lfl; delete them first`) || strings.Contains(err.Error(), "retry") {
		t.Fatalf("deleting a source a pattern reads: %v", err)
	}
	if _, err := c.sources.GetSource(tc.ctx, req(&cepv1.GetSourceRequest{Name: "bank"})); err != nil {
		t.Fatalf("the source after the refused delete: %v", err)
	}
}
