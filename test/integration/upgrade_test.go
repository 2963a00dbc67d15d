package integration

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cepcluster/cep/api"
	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/cluster"
	"github.com/cepcluster/cep/cluster/meta"
	"github.com/cepcluster/cep/internal/clusterversion"
	"github.com/cepcluster/cep/internal/testutil"
)

// A cluster whose every member runs this release moves its version from
// Base up to this release's Highest by itself, and status says so for
// every node; a version above what the release reads (as a later release
// would log it) stops every node with one line saying so, and a node
// started again on that metadata does not run.
func TestClusterVersionMovesAndStopsOlderNodes(t *testing.T) {
	tc := newPeers(t, 3, 3*time.Minute)
	tc.startAll()
	c := tc.client(0)
	testutil.EventuallyEvery(t, time.Minute, poll, func() error {
		res, err := c.cluster.GetStatus(tc.ctx, req(&cepv1.GetStatusRequest{}))
		if err != nil {
			return err
		}
		if v := res.Msg.GetSummary().GetClusterVersion(); v != uint32(clusterversion.Highest) {
			return fmt.Errorf("cluster version v%d", v)
		}
		for _, nd := range res.Msg.GetNodes() {
			if nd.GetHighestVersion() != uint32(clusterversion.Highest) || nd.GetVersion() == "" {
				return fmt.Errorf("node %s: release %q, writes v%d", nd.GetId(), nd.GetVersion(), nd.GetHighestVersion())
			}
		}
		return nil
	})
	for _, n := range tc.nodes {
		testutil.EventuallyEvery(t, 30*time.Second, poll, func() error {
			if v := n.Meta().ActiveVersion(); v != clusterversion.Highest {
				return fmt.Errorf("a replica of the metadata at %v", v)
			}
			return nil
		})
	}

	later := clusterversion.Highest + 1
	testutil.EventuallyEvery(t, 30*time.Second, poll, func() error {
		for _, n := range tc.nodes {
			if n.IsMetaLeader() {
				_, err := n.Propose(tc.ctx, meta.SetClusterVersion{Version: uint32(later), Expect: uint32(clusterversion.Highest)})
				return err
			}
		}
		return errors.New("no metadata leader")
	})
	for i, n := range tc.nodes {
		select {
		case err := <-n.Failed():
			checkVersionLine(t, tc.cfgs[i].NodeID, err, later)
		case <-time.After(30 * time.Second):
			t.Fatalf("node %s runs on under cluster version %v", tc.cfgs[i].NodeID, later)
		}
	}

	// started again: refused at start when its snapshot holds the
	// version, else as soon as its log replays it
	tc.stop(0)
	n, err := cluster.Start(tc.ctx, tc.cfgs[0])
	if err != nil {
		checkVersionLine(t, tc.cfgs[0].NodeID+" at start", err, later)
		return
	}
	tc.nodes[0] = n
	select {
	case err := <-n.Failed():
		checkVersionLine(t, tc.cfgs[0].NodeID+" started again", err, later)
	case <-time.After(30 * time.Second):
		t.Fatalf("node %s started again runs under cluster version %v", tc.cfgs[0].NodeID, later)
	}
}

// checkVersionLine checks that err is the one line a node stops with under
// an active version its release cannot read.
func checkVersionLine(t *testing.T, who string, err error, active clusterversion.Version) {
	t.Helper()
	if err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "active version is "+active.String()) ||
		!strings.Contains(err.Error(), "up to "+clusterversion.Highest.String()) {
		t.Errorf("%s: %v", who, err)
	}
}

// The rolling upgrade from the release test/upgrade/PREVIOUS names: a
// cluster of three nodes of it, under the fault suite's workload, has its
// nodes replaced by this build one at a time while events flow. The long
// run (CEP_FAULTS=rolling-upgrade, and make chaos) kills one node with
// SIGKILL mid-upgrade and rolls one back to the previous release before
// finishing, and once the version has moved starts a fourth node of the
// previous release, which must not be taken in; the short one (go test ./..., "upgrade") replaces each node
// once. ("upgrade-restore", in the long set too, restores a savepoint the
// previous release took into a fresh cluster of this build.) Both check
// that the cluster version stays at the base version
// while a node of the previous release is a member and moves up once none
// is, and, as every fault, that each pattern's records equal the offline
// engine's, none lost or doubled, and that the replicas agree. Skipped,
// saying why, when the previous release cannot be built (no git history:
// a shallow clone, or its modules not reachable).
func init() {
	faults = append(faults,
		fault{name: "upgrade", smoke: true, bin: previousCepnode, scenario: func(r *faultRun, lines []string) map[string][]string {
			return rollingUpgrade(r, lines, false)
		}},
		fault{name: "rolling-upgrade", bin: previousCepnode, scenario: func(r *faultRun, lines []string) map[string][]string {
			return rollingUpgrade(r, lines, true)
		}},
		// a savepoint of the previous release restored into a fresh
		// cluster of this build
		fault{name: "upgrade-restore", bin: previousCepnode, scenario: freshRestore},
	)
}

// rollingUpgrade publishes lines while it replaces the nodes (all of the
// previous release) by this build, one at a time; long adds a SIGKILL and
// a rollback.
func rollingUpgrade(r *faultRun, lines []string, long bool) map[string][]string {
	t := r.t
	previous := r.procs[0].bin
	spread := 60 * time.Second
	if long {
		spread = 2 * time.Minute
	}
	published := make(chan error, 1)
	go func() { published <- r.publishSpread(lines, 0, spread) }()
	defer func() {
		if err := <-published; err != nil {
			t.Fatal(err)
		}
	}()
	time.Sleep(spread / 10)
	// replace runs p with bin: stopped as an operator's rolling update
	// stops it (SIGTERM, it hands over its leaderships), or killed
	replace := func(p *proc, bin string, kill bool) {
		t.Helper()
		what := map[bool]string{false: "this build", true: "the previous release"}[bin != ""]
		if kill {
			t.Logf("kill -9 %s, restarted with %s", p.id, what)
			p.kill()
		} else {
			t.Logf("stop %s, restarted with %s", p.id, what)
			stopGracefully(t, p)
		}
		p.bin = bin
		p.start(t)
		r.waitServing(2 * time.Minute)
		r.checkClusterVersion(clusterversion.Base)
	}
	n1, n2, n3 := r.procs[0], r.procs[1], r.procs[2]
	replace(n1, "", false)
	if long {
		replace(n2, "", true)
		replace(n2, previous, false) // rolled back: the version has not moved
	}
	replace(n2, "", false)
	// the last one: the version moves once it runs this build
	t.Logf("stop %s, restarted with this build", n3.id)
	stopGracefully(t, n3)
	n3.bin = ""
	n3.start(t)
	r.waitServing(2 * time.Minute)
	testutil.EventuallyEvery(t, time.Minute, 200*time.Millisecond, func() error {
		return r.clusterVersionIs(clusterversion.Highest)
	})
	t.Logf("every node runs this build; cluster version %v", clusterversion.Highest)
	if long {
		// a node of the previous release cannot read what the members
		// now write: it is not taken in
		j := r.joiner
		j.bin = previous
		j.start(t)
		defer j.kill()
		testutil.EventuallyEvery(t, time.Minute, 200*time.Millisecond, func() error {
			for _, p := range r.procs {
				b, _ := os.ReadFile(p.dir + ".log")
				if strings.Contains(string(b), "cannot read the cluster version is not taken in") && strings.Contains(string(b), "member="+j.id) {
					return nil
				}
			}
			return fmt.Errorf("no node says it does not take %s in", j.id)
		})
		res, err := r.client().cluster.GetStatus(r.ctx, req(&cepv1.GetStatusRequest{}))
		if err != nil {
			t.Fatal(err)
		}
		for _, nd := range res.Msg.GetNodes() {
			if nd.GetId() == j.id {
				t.Fatalf("%s, of the previous release, joined a cluster at %v", j.id, clusterversion.Highest)
			}
		}
		t.Logf("%s of the previous release is not taken in", j.id)
	}
	return nil
}

// checkClusterVersion fails the test unless every node of this build says
// the cluster version is v (asked once each, at a moment when it cannot
// move).
func (r *faultRun) checkClusterVersion(v clusterversion.Version) {
	r.t.Helper()
	if err := r.clusterVersionIs(v); err != nil {
		r.t.Fatal(err)
	}
}

// clusterVersionIs says how the cluster version that the nodes of this
// build report differs from v, nil when none does; nodes of the previous
// release (which report none) are not asked.
func (r *faultRun) clusterVersionIs(v clusterversion.Version) error {
	for _, p := range r.procs {
		if p.bin != "" {
			continue
		}
		res, err := r.clients(p.api, api.WithClientToken(r.token)).cluster.GetStatus(r.ctx, req(&cepv1.GetStatusRequest{}))
		if err != nil {
			return fmt.Errorf("%s: %v", p.id, err)
		}
		if got := clusterversion.Active(res.Msg.GetSummary().GetClusterVersion()); got != v {
			return fmt.Errorf("%s says the cluster version is %v, want %v", p.id, got, v)
		}
	}
	return nil
}

// stopGracefully stops p as a rolling update does (SIGTERM), and kills it
// if it has not stopped within 40 s (cepnode's shutdown takes at most 30).
func stopGracefully(t *testing.T, p *proc) {
	t.Helper()
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(40 * time.Second):
		t.Errorf("%s did not stop within 40 s of SIGTERM", p.id)
		p.cmd.Process.Kill()
		<-done
	}
	p.cmd = nil
	if p.logf != nil {
		p.logf.Close()
	}
}

var (
	previousOnce sync.Once
	previousBin  string
	previousErr  error
)

// previousCepnode is cepnode built at the commit test/upgrade/PREVIOUS
// names (once per test process), or skips the test saying why it cannot
// be built.
func previousCepnode(t *testing.T) string {
	t.Helper()
	previousOnce.Do(func() { previousBin, previousErr = buildPrevious(filepath.Dir(cepnodeBin)) })
	if previousErr != nil {
		t.Skipf("no previous release to upgrade from: %v", previousErr)
	}
	return previousBin
}

// buildPrevious extracts the previous release's tree from git history
// (git archive: the clone's worktrees and index stay as they are) and
// builds its cepnode into dir.
func buildPrevious(dir string) (string, error) {
	b, err := os.ReadFile("../upgrade/PREVIOUS")
	if err != nil {
		return "", err
	}
	var commit string
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 0 && !strings.HasPrefix(f[0], "#") {
			commit = f[0]
			break
		}
	}
	if commit == "" {
		return "", errors.New("../upgrade/PREVIOUS names no commit")
	}
	if out, err := exec.Command("git", "cat-file", "-e", commit+"^{commit}").CombinedOutput(); err != nil {
		return "", fmt.Errorf("commit %s is not in this clone's history (a shallow clone? fetch with --unshallow): %v %s", commit, err, strings.TrimSpace(string(out)))
	}
	src := filepath.Join(dir, "previous-src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		return "", err
	}
	defer os.RemoveAll(src)
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		return "", fmt.Errorf("not in a git clone: %v", err)
	}
	// from the top: in a subdirectory git archive takes only that one
	archive := exec.Command("git", "archive", "--format=tar", commit)
	archive.Dir = strings.TrimSpace(string(top))
	untar := exec.Command("tar", "-x", "-C", src)
	pipe, err := archive.StdoutPipe()
	if err != nil {
		return "", err
	}
	untar.Stdin = pipe
	if err := archive.Start(); err != nil {
		return "", err
	}
	out, err := untar.CombinedOutput()
	if werr := archive.Wait(); err == nil && werr != nil {
		err = werr
	}
	if err != nil {
		return "", fmt.Errorf("extracting %s: %v %s", commit, err, out)
	}
	bin := filepath.Join(dir, "cepnode-previous")
	build := exec.Command("go", "build", "-o", bin, "./cmd/cepnode")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building cepnode at %s failed (its modules not reachable?): %v\n%s", commit, err, lastLines(string(out), 5))
	}
	return bin, nil
}
