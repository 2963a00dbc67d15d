package integration

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cepcluster/cep/api"
	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/cluster"
	"github.com/cepcluster/cep/cluster/secret"
	"github.com/cepcluster/cep/internal/testutil"
	"github.com/cepcluster/cep/internal/workload"
	"github.com/cepcluster/cep/nfa"
)

// The fault suite: three cepnode processes and a NATS server, each in a
// network namespace of its own (netLab; on loopback where namespaces are
// not available, with the faults that need none), run a seeded workload
// of several patterns — one re-keyed through a derived source, one of
// followedByAny stages, random shapes with windows — while one fault is
// injected and healed. A run fails on any record lost, duplicated or not
// made by the offline engine from the same events, on replicas whose
// counters disagree once everything is applied, and on a node or shard
// that does not serve, with every replica caught up, 60 s after the fault
// ends.
//
// CEP_FAULTS selects the faults (comma-separated names, or "all"; the
// default is the smoke set go test ./... runs), CEP_FAULT_SEEDS the seeds
// per fault (default 1); `make chaos` runs all of them with three seeds.
// A seed that fails is reproduced by CEP_FAULTS=name CEP_FAULT_SEED0=seed.
func TestFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes and injects faults")
	}
	why := labAvailable()
	selected := faultSelection(t)
	seeds, first := 1, uint64(1)
	if v := os.Getenv("CEP_FAULT_SEEDS"); v != "" {
		if _, err := fmt.Sscan(v, &seeds); err != nil || seeds < 1 {
			t.Fatalf("CEP_FAULT_SEEDS=%q: want a number of seeds", v)
		}
	}
	if v := os.Getenv("CEP_FAULT_SEED0"); v != "" {
		if _, err := fmt.Sscan(v, &first); err != nil {
			t.Fatalf("CEP_FAULT_SEED0=%q: want a number", v)
		}
	}
	for _, f := range selected {
		for seed := first; seed < first+uint64(seeds); seed++ {
			t.Run(fmt.Sprintf("%s/seed=%d", f.name, seed), func(t *testing.T) {
				if f.needsLab && why != "" {
					t.Skipf("needs network namespaces: %s", why)
				}
				runFault(t, f, seed, why == "")
			})
		}
	}
}

// fault is one kind of fault: inject starts it on a running cluster and
// returns what ends it.
type fault struct {
	name     string
	needsLab bool
	smoke    bool // in the default set, which go test ./... runs
	inject   func(r *faultRun, rng *rand.Rand) (heal func())
	// scenario, instead of inject, runs the whole publishing itself and
	// returns the records of a cluster it replaced, by pattern
	scenario func(r *faultRun, lines []string) (before map[string][]string)
	// args are more cepnode flags for every node of the fault's runs
	args []string
	// bin, when set, gives the cepnode binary the nodes start with (or
	// skips the test): an earlier release's, for the upgrade
	bin func(t *testing.T) string
}

// faultTime is how long a fault lasts.
const faultTime = 12 * time.Second

var faults = []fault{
	{name: "kill-leader", smoke: true, inject: func(r *faultRun, rng *rand.Rand) func() {
		p := r.leaderOfSome(rng)
		r.t.Logf("kill -9 %s (a shard leader)", p.id)
		p.kill()
		return func() { p.start(r.t) }
	}},
	{name: "kill-leaders", inject: func(r *faultRun, rng *rand.Rand) func() {
		// one leader after another, each back before the next goes
		for range 3 {
			p := r.leaderOfSome(rng)
			r.t.Logf("kill -9 %s (a shard leader)", p.id)
			p.kill()
			time.Sleep(faultTime / 4)
			p.start(r.t)
			r.waitServing(time.Minute)
		}
		return func() {}
	}},
	{name: "isolate-from-peers", needsLab: true, inject: func(r *faultRun, rng *rand.Rand) func() {
		p := r.leaderOfSome(rng)
		others := r.othersThan(p.id)
		r.t.Logf("%s cut off from %v (it still reaches NATS)", p.id, others)
		r.lab.cut(p.id, others...)
		return func() { r.lab.heal(p.id) }
	}},
	{name: "isolate-from-nats", needsLab: true, smoke: true, inject: func(r *faultRun, rng *rand.Rand) func() {
		p := r.leaderOfSome(rng)
		r.t.Logf("%s cut off from NATS (it still reaches its peers)", p.id)
		r.lab.cut(p.id, "nats")
		return func() { r.lab.heal(p.id) }
	}},
	{name: "partial-partition", needsLab: true, inject: func(r *faultRun, rng *rand.Rand) func() {
		p := r.leaderOfSome(rng)
		o := r.othersThan(p.id)[rng.IntN(2)]
		r.t.Logf("%s and %s cannot reach each other; both reach the third node and NATS", p.id, o)
		r.lab.cut(p.id, o)
		return func() { r.lab.heal(p.id) }
	}},
	{name: "pause", inject: func(r *faultRun, rng *rand.Rand) func() {
		p := r.busiest()
		r.t.Logf("SIGSTOP %s (the busiest node)", p.id)
		p.cmd.Process.Signal(syscall.SIGSTOP)
		return func() { p.cmd.Process.Signal(syscall.SIGCONT) }
	}},
	{name: "lossy-link", needsLab: true, inject: func(r *faultRun, rng *rand.Rand) func() {
		p := r.leaderOfSome(rng)
		r.t.Logf("%s: 7%% of packets lost each way, 2 Mbit/s out", p.id)
		r.lab.lossy(p.id, 7, "2mbit")
		return func() { r.lab.heal(p.id) }
	}},
	{name: "crash-all", inject: func(r *faultRun, rng *rand.Rand) func() {
		r.t.Log("kill -9 every node")
		for _, p := range r.procs {
			p.kill()
		}
		return func() {
			for _, p := range r.procs {
				p.start(r.t)
			}
		}
	}},
	{name: "join-remove", inject: func(r *faultRun, rng *rand.Rand) func() {
		// a fourth node joins, a leader is killed while replicas move to
		// it, and a node is removed (its replicas move away) while another
		// leader is killed
		r.t.Logf("%s joins", r.joiner.id)
		r.joiner.start(r.t)
		r.procs = append(r.procs, r.joiner)
		time.Sleep(faultTime / 4)
		p := r.leaderOfSome(rng)
		r.t.Logf("kill -9 %s (a shard leader) while replicas move to %s", p.id, r.joiner.id)
		p.kill()
		time.Sleep(faultTime / 4)
		p.start(r.t)
		r.waitServing(time.Minute)
		gone := r.procs[rng.IntN(len(r.procs))]
		// the leader killed during the removal is picked before it, among
		// the others (picked during it, it was sometimes the node removed,
		// and then nothing was killed)
		q := r.leaderOfSome(rng, gone)
		r.t.Logf("removing %s", gone.id)
		done := make(chan struct{})
		go func() {
			defer close(done)
			time.Sleep(time.Second)
			r.t.Logf("kill -9 %s (a shard leader) while %s's replicas move away", q.id, gone.id)
			q.kill()
			time.Sleep(faultTime / 4)
			q.start(r.t)
		}()
		r.removeNode(gone.id)
		<-done
		gone.kill()
		r.procs = slices.DeleteFunc(r.procs, func(q *proc) bool { return q == gone })
		return func() {}
	}},
	{name: "second-process", inject: func(r *faultRun, rng *rand.Rand) func() {
		// a second cepnode on a data directory in use exits at once,
		// naming the directory and the process that holds it; the first
		// runs on
		p := r.procs[rng.IntN(len(r.procs))]
		r.t.Logf("a second cepnode on %s's data directory", p.id)
		cmd := exec.Command(cepnodeBin, p.args...)
		if r.lab != nil {
			cmd = r.lab.command(p.id, cepnodeBin, p.args...)
		}
		cmd.Env = append(os.Environ(), p.env...)
		start := time.Now()
		out, err := runWithin(cmd, 10*time.Second)
		took := time.Since(start)
		if err == nil {
			r.t.Errorf("a second cepnode on %s's data directory exited without an error:\n%s", p.id, out)
		}
		if !strings.Contains(out, p.dir) || !strings.Contains(out, fmt.Sprint(p.cmd.Process.Pid)) {
			r.t.Errorf("a second cepnode on %s's data directory did not name the directory %s and the holder's pid %d:\n%s", p.id, p.dir, p.cmd.Process.Pid, out)
		}
		if took > 3*time.Second {
			r.t.Errorf("a second cepnode on %s's data directory took %v to fail", p.id, took.Round(time.Millisecond))
		}
		r.t.Logf("it failed in %v: %s", took.Round(time.Millisecond), strings.TrimSpace(lastLines(out, 1)))
		return func() {}
	}},
	{name: "corrupt-log-edit", inject: func(r *faultRun, rng *rand.Rand) func() {
		// an event's amount changed in a stopped node's shard log, the
		// entry still decoding: its checksum refuses it
		return r.damageStopped(rng, func(p *proc) string {
			file := r.shardLogWithEvents(p)
			i := editLogEntry(r.t, file, changeAmount)
			return fmt.Sprintf("%s entry %d: an amount changed", file, i)
		})
	}},
	{name: "corrupt-log-random", inject: func(r *faultRun, rng *rand.Rand) func() {
		return r.damageStopped(rng, func(p *proc) string {
			file := r.shardLogWithEvents(p)
			i := editLogEntry(r.t, file, overwriteRandomly)
			return fmt.Sprintf("%s entry %d: random bytes", file, i)
		})
	}},
	{name: "corrupt-meta-log", inject: func(r *faultRun, rng *rand.Rand) func() {
		return r.damageStopped(rng, func(p *proc) string {
			file := filepath.Join(p.dir, "meta", "raft.db")
			i := editLogEntryWith(r.t, file, []byte(`"kind":"`), func(v []byte) []byte {
				j := bytes.Index(v, []byte(`"kind":"`)) + len(`"kind":"`)
				v[j] ^= 0x20 // a letter's case: still JSON, the same length
				return v
			})
			return fmt.Sprintf("%s entry %d: a letter's case changed", file, i)
		})
	}},
	{name: "corrupt-snapshot", inject: corruptSnapshot,
		// a snapshot within a second or two of the run's entries, instead
		// of after 256 of them: there is one to damage at the fault
		args: []string{"--raft-snapshot-threshold", "16", "--raft-snapshot-interval", "500ms"}},
	{name: "fresh-restore", scenario: freshRestore},
	{name: "nats-restart", inject: func(r *faultRun, rng *rand.Rand) func() {
		r.t.Log("kill -9 NATS")
		r.stopNATS()
		return func() { r.startNATS() }
	}},
}

func faultSelection(t *testing.T) []fault {
	v := os.Getenv("CEP_FAULTS")
	var out []fault
	for _, f := range faults {
		switch {
		case v == "" && f.smoke, v == "all", slices.Contains(strings.Split(v, ","), f.name):
			out = append(out, f)
		}
	}
	if len(out) == 0 {
		var names []string
		for _, f := range faults {
			names = append(names, f.name)
		}
		t.Fatalf("CEP_FAULTS=%q names no fault; the faults: %s, all", v, strings.Join(names, ", "))
	}
	return out
}

// faultRun is one run: the cluster's processes and what the run checks.
type faultRun struct {
	*testCluster
	lab        *netLab // nil: on loopback
	joiner     *proc   // a fourth node, not started: it joins by the gossip
	natsProc   *exec.Cmd
	natsArgs   []string
	natsLog    string
	secretFile string
	token      string
}

// faultToken is the admin's token (removeNode's).
const faultToken = "s3cret"

// faultReplicas is how many replicas each shard has (the default).
const faultReplicas = 3

// newFaultRun starts the fault suite's cluster: a NATS server and three
// nodes (each in a network namespace when withLab), with n4 ready to join,
// every node run with args more (of the cepnode binary bin, "" for this
// build's); it stops them when the test ends, with
// their logs' ends when it failed.
func newFaultRun(t *testing.T, args []string, bin string, withLab bool, within time.Duration) *faultRun {
	tc := &testCluster{t: t, base: t.TempDir(), hc: http.DefaultClient, scheme: "http"}
	tc.ctx = tc.context(within)
	r := &faultRun{testCluster: tc, token: faultToken}
	names := []string{"n1", "n2", "n3", "n4"} // n4 joins later
	addr := func(name string, port int) string { return fmt.Sprintf("127.0.0.1:%d", port) }
	if withLab {
		r.lab = newNetLab(t, append(names, "nats")...)
		addr = func(name string, port int) string { return fmt.Sprintf("%s:%d", r.lab.ip(name), port) }
	}
	ports := freePorts(t, 13) // for loopback; in namespaces the usual ports
	port := func(i, usual int) int {
		if withLab {
			return usual
		}
		var p int
		fmt.Sscanf(ports[i][strings.LastIndex(ports[i], ":")+1:], "%d", &p)
		return p
	}
	tc.secret = secret.Generate()
	r.secretFile = filepath.Join(tc.base, "cluster-secret")
	if err := os.WriteFile(r.secretFile, []byte(tc.secret.String()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	natsAddr := addr("nats", port(12, 4222))
	tc.natsAt = "nats://" + natsAddr
	tc.natsAuth = []nats.Option{nats.UserInfo(cluster.NATSNodeUser, tc.secret.Token(secret.NATSNode))}
	r.natsArgs = []string{"-addr", natsAddr, "-store", filepath.Join(tc.base, "nats"), "-secret-file", r.secretFile}
	r.natsLog = filepath.Join(tc.base, "nats.log")
	r.startNATS()
	var peers []string
	for i, id := range names {
		p := &proc{id: id, dir: filepath.Join(tc.base, id), raft: addr(id, port(3*i, 7000)), api: addr(id, port(3*i+1, 7070)), gossip: addr(id, port(3*i+2, 7946))}
		if withLab {
			p.command = func(bin string, args ...string) *exec.Cmd { return r.lab.command(id, bin, args...) }
		}
		if id == "n4" {
			r.joiner = p // not in --peers
			continue
		}
		tc.procs = append(tc.procs, p)
		peers = append(peers, p.id+"="+p.raft+"="+p.api+"="+p.gossip)
	}
	for _, p := range append(tc.procs, r.joiner) {
		p.bin = bin
		p.args = []string{"--id", p.id, "--data", p.dir, "--raft-addr", p.raft, "--api-addr", p.api, "--gossip-addr", p.gossip,
			"--nats", tc.natsAt, "--peers", strings.Join(peers, ","), "--log-level", cmp.Or(os.Getenv("CEP_NODE_LOG_LEVEL"), "warn"),
			"--dead-after", "30s", "--cluster-secret-file", r.secretFile, "--savepoint-dir", filepath.Join(tc.base, "savepoints")}
		p.args = append(p.args, args...)
		p.env = []string{"CEPNODE_TOKEN=" + r.token}
		if p != r.joiner {
			p.start(t)
		}
	}
	t.Cleanup(func() {
		for _, p := range append(tc.procs, r.joiner) {
			if p.cmd != nil && p.cmd.Process != nil {
				p.cmd.Process.Signal(syscall.SIGCONT) // a paused one dies too
			}
			p.kill()
		}
		r.stopNATS()
		if t.Failed() {
			for _, p := range tc.procs {
				b, _ := os.ReadFile(p.dir + ".log")
				t.Logf("log of %s:\n%s", p.id, lastLines(string(b), 40))
			}
			b, _ := os.ReadFile(r.natsLog)
			t.Logf("log of NATS:\n%s", lastLines(string(b), 20))
		}
	})
	return r
}

func runFault(t *testing.T, f fault, seed uint64, withLab bool) {
	var bin string // "": this build's
	if f.bin != nil {
		bin = f.bin(t)
	}
	r := newFaultRun(t, f.args, bin, withLab, 6*time.Minute)
	rng := rand.New(rand.NewPCG(seed, 7))
	specs := r.deployWorkload(rng)
	lines := workload.Sessions(rng, 3000)

	var before map[string][]string
	if f.scenario != nil {
		before = f.scenario(r, lines)
	} else {
		// publish through the whole run, the fault a third of the way in
		const spread = 3 * faultTime
		published := make(chan error, 1)
		go func() { published <- r.publishSpread(lines, 0, spread) }()
		time.Sleep(spread / 3)
		heal := f.inject(r, rng)
		time.Sleep(faultTime)
		heal()
		healed := time.Now()
		// events still flow meanwhile
		r.waitServing(60 * time.Second)
		t.Logf("%s: every node serves, every replica caught up, %v after the fault ended", f.name, time.Since(healed).Round(100*time.Millisecond))
		if err := <-published; err != nil {
			t.Fatal(err)
		}
	}
	r.waitServing(30 * time.Second)

	total := r.checkRecords(specs, lines, before, f.name)
	r.replicasAgree()
	if t.Failed() {
		return
	}
	t.Logf("%s seed %d: %d events, %d records compared: 0 lost, 0 duplicated, 0 unexpected", f.name, seed, len(lines), total)
}

// deployWorkload creates the bank source and deploys the workload's
// patterns (faultSpecs), and waits until the cluster serves them.
func (r *faultRun) deployWorkload(rng *rand.Rand) [][]byte {
	c := r.client()
	r.createBank(c)
	specs := faultSpecs(rng)
	for _, s := range specs {
		testutil.EventuallyEvery(r.t, 30*time.Second, poll, func() error {
			_, err := c.patterns.DeployPattern(r.ctx, req(&cepv1.DeployPatternRequest{Spec: string(s)}))
			if err != nil && strings.Contains(err.Error(), "already") {
				return nil
			}
			return err
		})
	}
	r.waitServing(time.Minute)
	return specs
}

// checkRecords checks that every pattern's records are the offline
// engine's from lines, each once (with before, the records of a cluster
// this one replaced, by pattern), and returns how many were compared.
func (r *faultRun) checkRecords(specs [][]byte, lines []string, before map[string][]string, what string) int {
	t, tc := r.t, r.testCluster
	// every pattern's records are the offline engine's, each once
	total := 0
	for _, s := range specs {
		name := specName(t, s)
		want := withoutIDs(offline(t, s, lines))
		var raw []string
		if before == nil {
			raw = tc.outputsOnceThere("cep.out."+name, len(want), time.Minute)
		} else {
			// the replaced cluster's records and this one's, each id once:
			// a record in the outbox at the savepoint is published by both
			testutil.EventuallyEvery(t, time.Minute, 200*time.Millisecond, func() error {
				if raw = unionByID(t, before[name], tc.outputs("cep.out."+name)); len(raw) < len(want) {
					return fmt.Errorf("%s: %d records of %d", name, len(raw), len(want))
				}
				return nil
			})
		}
		ids := map[string]bool{}
		for _, rec := range raw {
			var v struct {
				ID string `json:"id"`
			}
			if err := json.Unmarshal([]byte(rec), &v); err != nil || v.ID == "" {
				t.Fatalf("%s: a record without an id: %s", name, rec)
			}
			if ids[v.ID] {
				t.Errorf("%s: id %s twice", name, v.ID)
			}
			ids[v.ID] = true
		}
		if d := differsFromOffline(withoutIDs(raw), want, string(s)); d != "" {
			t.Errorf("%s after %s: %s", name, what, d)
		}
		total += len(want)
	}
	return total
}

func (r *faultRun) client() clients {
	return r.clients(r.procs[0].api, api.WithClientToken(r.token))
}

func (r *faultRun) startNATS() {
	r.t.Helper()
	cmd := exec.Command(natsdBin, r.natsArgs...)
	if r.lab != nil {
		cmd = r.lab.command("nats", natsdBin, r.natsArgs...)
	}
	f, err := os.OpenFile(r.natsLog, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		r.t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	f.Close()
	r.natsProc = cmd
	testutil.EventuallyEvery(r.t, 30*time.Second, poll, func() error {
		nc, err := nats.Connect(r.natsAt, r.natsAuth...)
		if err != nil {
			return err
		}
		nc.Close()
		return nil
	})
}

func (r *faultRun) stopNATS() {
	if r.natsProc != nil && r.natsProc.Process != nil {
		r.natsProc.Process.Kill()
		r.natsProc.Wait()
		r.natsProc = nil
	}
}

// publishSpread publishes lines as a producer would (the publisher user,
// subject bank.<account>), spread over about d, each with a message id and
// retried until JetStream stores it, so that a NATS restart loses and
// doubles nothing; it gives up after a few minutes.
func (r *faultRun) publishSpread(lines []string, first int, d time.Duration) error {
	nc, err := nats.Connect(r.natsAt, nats.UserInfo(cluster.NATSPublisherUser, r.secret.Token(secret.NATSPublic)),
		nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(d + 3*time.Minute)
	start := time.Now()
	for i, l := range lines {
		if due := start.Add(d * time.Duration(i) / time.Duration(len(lines))); time.Until(due) > 0 {
			time.Sleep(time.Until(due))
		}
		var ev struct {
			Account string `json:"account"`
		}
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			return err
		}
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_, err := js.Publish(ctx, "bank."+ev.Account, []byte(l), jetstream.WithMsgID(fmt.Sprintf("ev-%d", first+i)))
			cancel()
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("publishing event %d of %d: %v", i, len(lines), err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return nil
}

// waitServing waits until every node answers /readyz and every shard has
// a leader with every replica reported and within a few entries of its
// commit index.
func (r *faultRun) waitServing(within time.Duration) {
	r.t.Helper()
	testutil.EventuallyEvery(r.t, max(within, time.Second), 100*time.Millisecond, func() error {
		for _, p := range r.procs {
			res, err := http.Get("http://" + p.api + "/readyz")
			if err != nil {
				return fmt.Errorf("%s: %v", p.id, err)
			}
			res.Body.Close()
			if res.StatusCode != http.StatusOK {
				return fmt.Errorf("%s: /readyz %d", p.id, res.StatusCode)
			}
		}
		res, err := r.client().cluster.ListShards(r.ctx, req(&cepv1.ListShardsRequest{ClusterWide: true}))
		if err != nil {
			return err
		}
		for _, s := range res.Msg.Shards {
			if s.LeaderNodeId == "" {
				return fmt.Errorf("shard %d has no leader", s.Id)
			}
			if len(s.Replicas) != faultReplicas {
				return fmt.Errorf("shard %d has %d replicas", s.Id, len(s.Replicas))
			}
			for _, rep := range s.Replicas {
				// ticks keep adding entries: within a second's worth
				if rep.AppliedUnknown || rep.AppliedIndex+16 < s.CommitIndex {
					return fmt.Errorf("shard %d: replica %s applied %d of %d (unknown %v)", s.Id, rep.NodeId, rep.AppliedIndex, s.CommitIndex, rep.AppliedUnknown)
				}
			}
		}
		return nil
	})
}

// replicasAgree checks that every replica of each shard has counted the
// same events, records and late and dead-lettered events.
func (r *faultRun) replicasAgree() {
	r.t.Helper()
	names := []string{"cep_events_total", "cep_matches_total", "cep_timeouts_total", "cep_events_late_total", "cep_events_dead_lettered_total"}
	testutil.EventuallyEvery(r.t, 30*time.Second, 200*time.Millisecond, func() error {
		per := map[string]map[string]float64{} // shard/metric -> node -> value
		for _, p := range r.procs {
			lines, err := metricLines(p)
			if err != nil {
				return err
			}
			for _, line := range lines {
				for _, n := range names {
					if strings.HasPrefix(line, n+`{shard="`) {
						key, val, _ := strings.Cut(line, " ")
						if per[key] == nil {
							per[key] = map[string]float64{}
						}
						var v float64
						fmt.Sscan(val, &v)
						per[key][p.id] = v
					}
				}
			}
		}
		for key, byNode := range per {
			var vals []string
			same := len(byNode) == faultReplicas
			var first float64
			i := 0
			for id, v := range byNode {
				if i == 0 {
					first = v
				} else if v != first {
					same = false
				}
				vals = append(vals, fmt.Sprintf("%s=%v", id, v))
				i++
			}
			if !same {
				slices.Sort(vals)
				return fmt.Errorf("replicas disagree on %s: %s", key, strings.Join(vals, " "))
			}
		}
		return nil
	})
}

// leaderOfSome picks a node that leads a shard (which one, by rng), none
// of except.
func (r *faultRun) leaderOfSome(rng *rand.Rand, except ...*proc) *proc {
	r.t.Helper()
	var leaders []string
	testutil.EventuallyEvery(r.t, 30*time.Second, poll, func() error {
		res, err := r.client().cluster.ListShards(r.ctx, req(&cepv1.ListShardsRequest{ClusterWide: true}))
		if err != nil {
			return err
		}
		leaders = leaders[:0]
		for _, s := range res.Msg.Shards {
			if s.LeaderNodeId == "" {
				return fmt.Errorf("shard %d has no leader", s.Id)
			}
			if !slices.ContainsFunc(except, func(p *proc) bool { return p.id == s.LeaderNodeId }) {
				leaders = append(leaders, s.LeaderNodeId)
			}
		}
		if len(leaders) == 0 {
			return fmt.Errorf("every shard is led by a node left out")
		}
		return nil
	})
	slices.Sort(leaders)
	id := leaders[rng.IntN(len(leaders))]
	for _, p := range r.procs {
		if p.id == id {
			return p
		}
	}
	r.t.Fatalf("no process for leader %s", id)
	return nil
}

// busiest is the node that leads the most shards.
func (r *faultRun) busiest() *proc {
	r.t.Helper()
	res, err := r.client().cluster.ListShards(r.ctx, req(&cepv1.ListShardsRequest{ClusterWide: true}))
	if err != nil {
		r.t.Fatal(err)
	}
	count := map[string]int{}
	for _, s := range res.Msg.Shards {
		count[s.LeaderNodeId]++
	}
	best := r.procs[0]
	for _, p := range r.procs {
		if count[p.id] > count[best.id] {
			best = p
		}
	}
	return best
}

// damageStopped kills a node (by rng), damages its files with damage
// (which says what it did), and starts it again when the fault heals: it
// must quarantine the damaged replica, rebuild it from its peers, and
// serve with every replica.
func (r *faultRun) damageStopped(rng *rand.Rand, damage func(p *proc) string) func() {
	p := r.procs[rng.IntN(len(r.procs))]
	p.kill()
	r.t.Logf("kill -9 %s, then %s", p.id, damage(p))
	return func() {
		p.start(r.t)
		testutil.EventuallyEvery(r.t, 30*time.Second, poll, func() error {
			if moved, _ := filepath.Glob(filepath.Join(p.dir, "quarantine", "*")); len(moved) == 0 {
				return fmt.Errorf("%s quarantined nothing", p.id)
			}
			return nil
		})
	}
}

// corruptSnapshot flips a byte of the latest snapshot of a shard on a
// node that follows it, stopped: the snapshot's checksum refuses it at the
// restart, and the node must quarantine that replica (its files moved
// aside, a marker in their place naming the file) and rebuild it from the
// shard's leader.
func corruptSnapshot(r *faultRun, rng *rand.Rand) func() {
	p, id := r.followerOfSome(rng)
	var taken []string
	testutil.EventuallyEvery(r.t, 30*time.Second, poll, func() error {
		if taken = snapshotsOf(p, id); len(taken) == 0 {
			return fmt.Errorf("%s has no snapshot of shard %d", p.id, id)
		}
		return nil
	})
	p.kill()
	// the latest once stopped: another may have been taken meanwhile
	if taken = snapshotsOf(p, id); len(taken) == 0 {
		r.t.Fatalf("%s: the snapshots of shard %d went while it stopped", p.id, id)
	}
	file := filepath.Join(p.dir, "shards", fmt.Sprint(id), "snapshots", taken[0], "state.bin")
	b, err := os.ReadFile(file)
	if err != nil || len(b) == 0 {
		r.t.Fatalf("%s: %d bytes, %v", file, len(b), err)
	}
	at := rng.IntN(len(b))
	b[at] ^= 0xff
	if err := os.WriteFile(file, b, 0o644); err != nil {
		r.t.Fatal(err)
	}
	r.t.Logf("kill -9 %s (a follower of shard %d), then %s (the latest of %d snapshots, %d bytes): byte %d flipped", p.id, id, file, len(taken), len(b), at)
	return func() {
		start := time.Now()
		p.start(r.t)
		shardDir := filepath.Join(p.dir, "shards", fmt.Sprint(id))
		var marker, moved string
		testutil.EventuallyEvery(r.t, 30*time.Second, poll, func() error {
			// the marker stands until the leader has demoted the replica
			// and it opens empty: read it whenever it is there
			if m, err := os.ReadFile(filepath.Join(shardDir, "quarantined.json")); err == nil && marker == "" {
				marker = string(m)
			}
			dirs, _ := filepath.Glob(filepath.Join(p.dir, "quarantine", fmt.Sprintf("%d-*", id)))
			if len(dirs) == 0 {
				return fmt.Errorf("%s has not quarantined shard %d", p.id, id)
			}
			moved = dirs[0]
			if marker == "" {
				return fmt.Errorf("%s moved shard %d to %s; no marker in %s seen", p.id, id, moved, shardDir)
			}
			return nil
		})
		var rec struct {
			Shard uint64 `json:"shard"`
			Err   string `json:"error"`
			Dir   string `json:"dir"`
		}
		if err := json.Unmarshal([]byte(marker), &rec); err != nil || rec.Shard != id || rec.Dir != moved || !strings.Contains(rec.Err, file) {
			r.t.Errorf("the quarantine marker of shard %d (%v) does not name the shard, %s and %s: %s", id, err, moved, file, marker)
		}
		// what was moved aside is the damaged snapshot
		kept, err := os.ReadFile(filepath.Join(moved, "snapshots", taken[0], "state.bin"))
		if err != nil || !bytes.Equal(kept, b) {
			r.t.Errorf("%s does not hold the damaged snapshot %s (%v)", moved, taken[0], err)
		}
		r.t.Logf("%s quarantined shard %d %v after its start: %s", p.id, id, time.Since(start).Round(10*time.Millisecond), rec.Err)
	}
}

// followerOfSome picks a shard (by rng) and one of its replicas that does
// not lead it.
func (r *faultRun) followerOfSome(rng *rand.Rand) (*proc, uint64) {
	r.t.Helper()
	var shards []*cepv1.Shard
	testutil.EventuallyEvery(r.t, 30*time.Second, poll, func() error {
		res, err := r.client().cluster.ListShards(r.ctx, req(&cepv1.ListShardsRequest{ClusterWide: true}))
		if err != nil {
			return err
		}
		if shards = res.Msg.Shards; len(shards) == 0 {
			return fmt.Errorf("no shards")
		}
		for _, s := range shards {
			if s.LeaderNodeId == "" || len(s.Replicas) < 2 {
				return fmt.Errorf("shard %d: leader %q, %d replicas", s.Id, s.LeaderNodeId, len(s.Replicas))
			}
		}
		return nil
	})
	// drawn once the shards are known, so that a seed draws the same
	slices.SortFunc(shards, func(a, b *cepv1.Shard) int { return cmp.Compare(a.Id, b.Id) })
	s := shards[rng.IntN(len(shards))]
	var followers []string
	for _, rep := range s.Replicas {
		if rep.NodeId != s.LeaderNodeId {
			followers = append(followers, rep.NodeId)
		}
	}
	slices.Sort(followers)
	pick := followers[rng.IntN(len(followers))]
	for _, p := range r.procs {
		if p.id == pick {
			return p, uint64(s.Id)
		}
	}
	r.t.Fatalf("no process for %s, a follower of shard %d", pick, s.Id)
	return nil, 0
}

// snapshotsOf lists the names of the finished snapshots of shard id on p,
// the latest first, in raft's order: by term, then index, then time.
func snapshotsOf(p *proc, id uint64) []string {
	ents, _ := os.ReadDir(filepath.Join(p.dir, "shards", fmt.Sprint(id), "snapshots"))
	type snap struct {
		name            string
		term, index, ms uint64
	}
	var out []snap
	for _, e := range ents {
		var s snap
		if !e.IsDir() || strings.HasSuffix(e.Name(), ".tmp") {
			continue // one being taken
		}
		if n, _ := fmt.Sscanf(e.Name(), "%d-%d-%d", &s.term, &s.index, &s.ms); n != 3 {
			continue
		}
		if _, err := os.Stat(filepath.Join(p.dir, "shards", fmt.Sprint(id), "snapshots", e.Name(), "meta.json")); err != nil {
			continue
		}
		s.name = e.Name()
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b snap) int {
		return cmp.Or(cmp.Compare(b.term, a.term), cmp.Compare(b.index, a.index), cmp.Compare(b.ms, a.ms))
	})
	names := make([]string, len(out))
	for i, s := range out {
		names[i] = s.name
	}
	return names
}

// shardLogWithEvents is the log of a shard of p that holds events.
func (r *faultRun) shardLogWithEvents(p *proc) string {
	files, _ := filepath.Glob(filepath.Join(p.dir, "shards", "*", "raft.db"))
	for _, f := range files {
		if b, err := os.ReadFile(f); err == nil && bytes.Contains(b, []byte(`"v":`)) {
			return f
		}
	}
	r.t.Fatalf("no shard log of %s holds an event (of %v)", p.id, files)
	return ""
}

func (r *faultRun) othersThan(id string) []string {
	var out []string
	for _, p := range r.procs {
		if p.id != id {
			out = append(out, p.id)
		}
	}
	return out
}

// killSpec and killAnySpec are the patterns the kill runs carry through
// their faults (workload: the shard's metamorphic test runs them too).
var (
	killSpec    = workload.LFL("bank")
	killAnySpec = workload.LFLAny("bank")
)

// byUser is an account pattern (named lfl) keyed by user instead: it reads
// the source re-keyed by e.user, which one shard forwards.
func byUser(spec []byte) []byte {
	return []byte(strings.Replace(strings.Replace(string(spec), "name: lfl", "name: lfl-user", 1), "key: e.account", "key: e.user", 1))
}

// faultSpecs are the run's patterns: killSpec, the same per user,
// killAnySpec and random shapes with windows.
func faultSpecs(rng *rand.Rand) [][]byte {
	specs := [][]byte{killSpec, byUser(killSpec), killAnySpec}
	return append(specs, randomSpecs(rng, "rnd", 3, specShape{typeField: "kind", window: [2]int{200, 2000}, always: true, cadenceFree: true})...)
}

// specName is a pattern document's name.
func specName(t *testing.T, spec []byte) string {
	p, err := nfa.CompileBytes(spec)
	if err != nil {
		t.Fatal(err)
	}
	return p.Name()
}

// runWithin runs cmd, killing it after d, and returns its output.
func runWithin(cmd *exec.Cmd, d time.Duration) (string, error) {
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return "", err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return out.String(), err
	case <-time.After(d):
		cmd.Process.Kill()
		<-done
		return out.String(), fmt.Errorf("still running after %v", d)
	}
}

// freshRestore is a savepoint restored into a fresh cluster, as a user
// moving to new machines does it: half the events published, every one
// applied, a savepoint taken; every node and NATS stopped, and started
// again on new data directories and a new NATS store (whose streams
// number from 1); the savepoint restored with its positions counting from
// the new stream's start; the other half published. The records of both
// clusters, each id once, must be the offline engine's over all events.
func freshRestore(r *faultRun, lines []string) map[string][]string {
	t := r.t
	half := len(lines) / 2
	if err := r.publishSpread(lines[:half], 0, faultTime); err != nil {
		t.Fatal(err)
	}
	r.waitDrained()
	c := r.client()
	var sp *cepv1.Savepoint
	testutil.EventuallyEvery(t, time.Minute, 200*time.Millisecond, func() error {
		res, err := c.savepoints.CreateSavepoint(r.ctx, req(&cepv1.CreateSavepointRequest{Target: "dir://" + filepath.Join(r.base, "savepoints")}))
		if err != nil {
			return err
		}
		sp = res.Msg.Savepoint
		return nil
	})
	before := map[string][]string{}
	for _, s := range faultSpecNames(t, r) {
		before[s] = r.outputs("cep.out." + s)
	}
	t.Logf("savepoint %s after %d events; every node and NATS stopped and started afresh", sp.GetId(), half)
	for _, p := range r.procs {
		p.kill()
		if err := os.Rename(p.dir, p.dir+".before"); err != nil {
			t.Fatal(err)
		}
		p.bin = "" // this build's cluster, whichever release took the savepoint
	}
	r.stopNATS()
	for i, a := range r.natsArgs {
		if a == "-store" {
			r.natsArgs[i+1] += "-fresh"
		}
	}
	r.startNATS()
	for _, p := range r.procs {
		p.start(t)
	}
	c = r.client()
	r.createBank(c)
	testutil.EventuallyEvery(t, time.Minute, 200*time.Millisecond, func() error {
		_, err := c.savepoints.RestoreSavepoint(r.ctx, req(&cepv1.RestoreSavepointRequest{
			Savepoint: &cepv1.RestoreSavepointRequest_Location{Location: sp.Location}, Positions: cepv1.PositionMapping_POSITION_MAPPING_FROM_START}))
		return err
	})
	r.waitServing(time.Minute)
	if err := r.publishSpread(lines[half:], half, faultTime); err != nil {
		t.Fatal(err)
	}
	return before
}

// faultSpecNames are the names of the patterns the run's cluster runs.
func faultSpecNames(t *testing.T, r *faultRun) []string {
	res, err := r.client().patterns.ListPatterns(r.ctx, req(&cepv1.ListPatternsRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range res.Msg.Patterns {
		out = append(out, p.Name)
	}
	return out
}

// waitDrained waits until every shard leader has applied every message of
// its sources and forwarded every one it re-keys.
func (r *faultRun) waitDrained() {
	r.t.Helper()
	testutil.EventuallyEvery(r.t, time.Minute, 200*time.Millisecond, func() error {
		seen := 0
		for _, p := range r.procs {
			lines, err := metricLines(p)
			if err != nil {
				return err
			}
			for _, line := range lines {
				if strings.HasPrefix(line, "cep_ingest_lag_messages{") || strings.HasPrefix(line, "cep_forward_lag_messages{") {
					seen++
					if !strings.HasSuffix(line, " 0") {
						return fmt.Errorf("%s: %s", p.id, line)
					}
				}
			}
		}
		if seen == 0 {
			return fmt.Errorf("no leader reports its lag")
		}
		return nil
	})
}

// unionByID is a and b, each record id once.
func unionByID(t *testing.T, a, b []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, r := range append(slices.Clone(a), b...) {
		var v struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal([]byte(r), &v); err != nil || v.ID == "" {
			t.Fatalf("a record without an id: %s", r)
		}
		if !seen[v.ID] {
			seen[v.ID] = true
			out = append(out, r)
		}
	}
	return out
}

// metricLines reads the lines of p's /metrics.
func metricLines(p *proc) ([]string, error) {
	res, err := http.Get("http://" + p.api + "/metrics")
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", p.id, err)
	}
	return strings.Split(string(body), "\n"), nil
}

// Each fault has a name of its own: CEP_FAULTS selects by name, and the
// figures are reported by it (two entries of one name once ran both).
func TestFaultNamesUnique(t *testing.T) {
	seen := map[string]bool{}
	for _, f := range faults {
		if seen[f.name] {
			t.Errorf("two faults named %s", f.name)
		}
		seen[f.name] = true
	}
}
