package integration

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cepcluster/cep/internal/testutil"
)

// The README's "Three nodes by hand" runs as written, top to bottom, in an
// empty directory: its own NATS server, three nodes, a source, the
// example pattern and its events. Then, as the text says, any node may be
// killed: with n1 (the first of CEPCTL_SERVER) killed every command still
// answers, the events published again are matched by the others, and n1
// started again by its own line takes its shards back. Its `go build`
// lines are run from the module (the directory has no source); every
// other line is the README's. The ports are the README's own.
func TestReadmeThreeNodesByHand(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a NATS server and three nodes")
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)### Three nodes by hand\n.*?```sh\n(.*?)```").FindSubmatch(readme)
	if m == nil {
		t.Fatal("the README has no sh block under \"Three nodes by hand\"")
	}
	root, _ := filepath.Abs("../..")
	dir := t.TempDir()
	// the block's ports are fixed: another run of this test on the
	// machine (a second go test ./...) goes first
	testutil.MachineLock(t, "readme-three-nodes")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// each line as a person types it; started processes are remembered
	// (pids) and killed at the end, whatever happens
	var script, n1Line, vars strings.Builder
	script.WriteString("set -e\n")
	for _, line := range strings.Split(strings.TrimSpace(string(m[1])), "\n") {
		if regexp.MustCompile(`^[A-Z]+=`).MatchString(line) {
			vars.WriteString(line + "\n") // P and S, for n1's line again
		}
		if strings.HasPrefix(line, "go build ") {
			line, _, _ = strings.Cut(line, " #")
			line = "(cd " + root + " && " + strings.Replace(line, "-o bin/", "-o "+dir+"/bin/", 1) + ")"
		}
		if strings.HasSuffix(line, " &") {
			name := fmt.Sprint(strings.Count(script.String(), "& echo"))
			if strings.Contains(line, "--id n1 ") {
				n1Line.WriteString(line)
			}
			line = strings.TrimSuffix(line, " &") + " > proc" + name + ".log 2>&1 & echo $! >> pids"
		}
		script.WriteString(line + "\n")
	}
	t.Cleanup(func() {
		b, _ := os.ReadFile(filepath.Join(dir, "pids"))
		for _, f := range strings.Fields(string(b)) {
			var pid int
			fmt.Sscan(f, &pid)
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	sh := func(s string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, "bash", "-c", s)
		cmd.Dir = dir
		// (no cepctl config of the machine's; HOME stays, for go's caches)
		cmd.Env = append(os.Environ(), "XDG_CONFIG_HOME="+dir, "CEPCTL_SERVER=")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			logs, _ := exec.Command("bash", "-c", "cd "+dir+" && tail -n 5 *.log").CombinedOutput()
			t.Fatalf("%v running\n%s\noutput:\n%s\nlogs:\n%s", err, s, out.String(), logs)
		}
		return out.String()
	}
	if err := os.Symlink(filepath.Join(root, "examples"), filepath.Join(dir, "examples")); err != nil {
		t.Fatal(err)
	}
	sh(script.String())

	servers := "export CEPCTL_SERVER=127.0.0.1:7071,127.0.0.1:7072,127.0.0.1:7073\n"
	// the records by type: the offline engine's (no final watermark: the
	// cluster's event time stays at the last event's) and the cluster's
	types := " | grep -o '\"type\":\"[a-z]*\"' | sort | uniq -c"
	want := sh("bin/cepctl run --final-watermark=false -p examples/login-fail-logout.yaml -i examples/events.jsonl" + types)
	matches := func() string {
		t.Helper()
		return sh(servers + "bin/cepctl tail login-fail-logout --from all --follow=false -o json" + types)
	}
	deadline := time.Now().Add(30 * time.Second)
	for matches() != want && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
	}
	if got := matches(); got != want || !strings.Contains(want, "match") {
		t.Fatalf("matches on the cluster: %s, the offline engine: %s", got, want)
	}

	// kill -9 n1, the first server of the list
	sh("kill -9 $(sed -n 2p pids)")
	sh(servers + "bin/cepctl status --wait 30s && bin/cepctl publish --source bank -f examples/events.jsonl")
	// the same events again are late for the watermark: the records the
	// other nodes publish for them are the offline engine's over both
	twice := sh("cat examples/events.jsonl examples/events.jsonl > twice.jsonl && bin/cepctl run --final-watermark=false -p examples/login-fail-logout.yaml -i twice.jsonl" + types)
	records := func() string {
		return sh(servers + "bin/cepctl tail login-fail-logout --from all --follow=false -o json" + types)
	}
	deadline = time.Now().Add(30 * time.Second)
	for records() != twice && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
	}
	if got := records(); got != twice {
		t.Fatalf("records with n1 killed: %s, the offline engine over the events twice: %s", got, twice)
	}
	// n1 started again as the README started it
	sh(vars.String() + strings.TrimSuffix(n1Line.String(), " &") + " > n1-again.log 2>&1 & echo $! >> pids")
	deadline = time.Now().Add(60 * time.Second)
	status := func() string { return sh(servers + "bin/cepctl status --wait 60s | tail -1") }
	for !strings.Contains(status(), "(3 alive)") && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
	}
	if s := status(); !strings.Contains(s, "(3 alive)") {
		t.Fatalf("n1 started again: %s", s)
	}
}
