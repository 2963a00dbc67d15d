package integration

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"go.uber.org/goleak"

	"github.com/cepcluster/cep/api"
	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/cluster/secret"
	"github.com/cepcluster/cep/internal/testcerts"
	"github.com/cepcluster/cep/internal/testutil"
	"github.com/cepcluster/cep/internal/workload"
)

var cepnodeBin, natsdBin string

// TestMain builds the binaries, runs the tests and then fails if any of
// them left a goroutine of the test process behind (API and NATS clients,
// embedded servers, the harness's own waits).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(withBinaries{m})
}

// withBinaries wraps testing.M so that the binaries are built before the
// tests and removed after them, inside goleak's Run.
type withBinaries struct{ m *testing.M }

func (w withBinaries) Run() int {
	dir, err := os.MkdirTemp("", "cep-integration")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	cepnodeBin = filepath.Join(dir, "cepnode")
	if out, err := exec.Command("go", "build", "-o", cepnodeBin, "../../cmd/cepnode").CombinedOutput(); err != nil {
		os.Stderr.Write(out)
		panic(err)
	}
	natsdBin = filepath.Join(dir, "natsd")
	if out, err := exec.Command("go", "build", "-o", natsdBin, "./natsd").CombinedOutput(); err != nil {
		os.Stderr.Write(out)
		panic(err)
	}
	return w.m.Run()
}

func freePorts(t *testing.T, n int) []string {
	var out []string
	var lns []net.Listener
	for i := 0; i < n; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		out = append(out, ln.Addr().String())
	}
	for _, ln := range lns {
		ln.Close()
	}
	return out
}

// proc is a cepnode process.
type proc struct {
	id, dir, raft, api, gossip string
	args                       []string
	// bin is the cepnode binary it runs: "" for this build's (cepnodeBin),
	// or an earlier release's (the upgrade test's)
	bin string
	// env is added to the process's environment
	env []string
	// command makes the process's command (default: cepnode with args;
	// the fault suite runs it in a network namespace)
	command func(bin string, args ...string) *exec.Cmd
	cmd     *exec.Cmd
	logf    *os.File
}

func (p *proc) start(t *testing.T) {
	t.Helper()
	var err error
	p.logf, err = os.OpenFile(filepath.Join(p.dir+".log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	bin := cmp.Or(p.bin, cepnodeBin)
	if p.command != nil {
		p.cmd = p.command(bin, p.args...)
	} else {
		p.cmd = exec.Command(bin, p.args...)
	}
	p.cmd.Env = append(os.Environ(), p.env...)
	p.cmd.Stdout, p.cmd.Stderr = p.logf, p.logf
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
}

func (p *proc) kill() {
	if p.cmd != nil && p.cmd.Process != nil {
		p.cmd.Process.Kill() // SIGKILL: no shutdown of any kind
		p.cmd.Wait()
		p.cmd = nil
	}
	if p.logf != nil {
		p.logf.Close()
	}
}

// Three node processes share an external NATS server. While events are
// published, the leader of a shard is killed with SIGKILL several times and
// restarted, a fourth node joins (replicas move to it) and the first is
// removed (its replicas move away); the records on NATS equal, record for
// record, what the offline engine produces: nothing lost, nothing
// duplicated.
func TestThreeNodesKillLeaders(t *testing.T) { killLeaders(t, false) }

// The same with the nodes talking mutual TLS on the Raft port and HTTPS on
// the API (a restarted node's streams and calls are new TLS connections).
func TestThreeNodesKillLeadersOverTLS(t *testing.T) { killLeaders(t, true) }

func killLeaders(t *testing.T, useTLS bool) {
	if testing.Short() {
		t.Skip("starts processes and kills them")
	}
	// CEP_CHAOS=N (a separate, longer run): N kills over 2,000 events each,
	// instead of 3 kills over 6,000 events
	kills, total := 3, 6000
	if v := os.Getenv("CEP_CHAOS"); v != "" {
		if _, err := fmt.Sscan(v, &kills); err != nil || kills < 1 {
			t.Fatalf("CEP_CHAOS=%q: want a number of kills", v)
		}
		total = max(total, 2000*kills)
	}
	tc := newCluster(t, 3*time.Minute+time.Duration(kills)*20*time.Second)
	ctx, base := tc.ctx, tc.base
	ports := freePorts(t, 12)
	var peers []string
	for i := range 3 {
		p := &proc{id: fmt.Sprintf("n%d", i+1), dir: filepath.Join(base, fmt.Sprintf("n%d", i+1)), raft: ports[3*i], api: ports[3*i+1], gossip: ports[3*i+2]}
		tc.procs = append(tc.procs, p)
		peers = append(peers, p.id+"="+p.raft+"="+p.api+"="+p.gossip)
	}
	var ca *testcerts.Authority
	if useTLS {
		var err error
		if ca, err = testcerts.NewAuthority(base, "cep"); err != nil {
			t.Fatal(err)
		}
		tc.useHTTPS(ca.CA)
	}
	// a fourth node joins mid-stream (it is not in --peers: it joins
	// through the gossip addresses there), and n1 is removed later
	joiner := &proc{id: "n4", dir: filepath.Join(base, "n4"), raft: ports[9], api: ports[10], gossip: ports[11]}
	secretFile := filepath.Join(base, "cluster-secret") // every node is given the same
	tc.secret = secret.Generate()
	if err := os.WriteFile(secretFile, []byte(tc.secret.String()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range append(tc.procs, joiner) {
		p.args = []string{"--id", p.id, "--data", p.dir, "--raft-addr", p.raft, "--api-addr", p.api, "--gossip-addr", p.gossip,
			"--nats", tc.natsURL(), "--peers", strings.Join(peers, ","), "--log-level", cmp.Or(os.Getenv("CEP_NODE_LOG_LEVEL"), "warn"), "--token", "s3cret", "--dead-after", "10s",
			"--cluster-secret-file", secretFile}
		if ca != nil {
			f, err := ca.Issue(p.id)
			if err != nil {
				t.Fatal(err)
			}
			p.args = append(p.args, "--tls-cert", f.Cert, "--tls-key", f.Key, "--tls-ca", f.CA,
				"--gossip-key", "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=") // an encrypted gossip too
		}
		if p != joiner {
			p.start(t)
		}
	}
	defer func() {
		for _, p := range tc.procs {
			p.kill()
		}
		if t.Failed() {
			for _, p := range tc.procs {
				b, _ := os.ReadFile(p.dir + ".log")
				t.Logf("log of %s:\n%s", p.id, lastLines(string(b), 30))
			}
		}
	}()
	// with a token, every node answers, forwarding changes to the metadata
	// leader with the token; without it, a node refuses
	c := tc.clients(tc.procs[0].api, api.WithClientToken("s3cret"))
	// the API may need a moment while the metadata group elects a leader
	tc.createBank(c)
	spec := killSpec
	// the same pattern keyed by user reads the source re-keyed by e.user:
	// one shard forwards every event, through the kills below
	userSpec := byUser(spec)
	if _, err := tc.clients(tc.procs[1].api).patterns.ListPatterns(ctx, req(&cepv1.ListPatternsRequest{})); err == nil || !strings.Contains(err.Error(), "unauthenticated") {
		t.Fatalf("request without the token: %v", err)
	}
	for _, p := range tc.procs { // at least one of them forwards to the leader
		// (a metadata group still electing answers Unavailable: a client
		// asks again)
		testutil.EventuallyEvery(t, 30*time.Second, poll, func() error {
			res, err := tc.clients(p.api, api.WithClientToken("s3cret")).patterns.DeployPattern(ctx, req(&cepv1.DeployPatternRequest{Spec: string(spec)}))
			if connect.CodeOf(err) == connect.CodeUnavailable {
				return err
			}
			if err != nil && !strings.Contains(err.Error(), "already") {
				t.Fatalf("deploy through %s: %v", p.id, err)
			}
			if err == nil && len(res.Msg.PendingShards) > 0 {
				t.Fatalf("deploy through %s returned with shards %v not running it", p.id, res.Msg.PendingShards)
			}
			return nil
		})
	}
	tc.deploy(c, &cepv1.DeployPatternRequest{Spec: string(userSpec)})
	// a sequence of followedByAny stages: the engine keeps its keys as
	// trees per start event, encoded as the general step's state
	anySpec := killAnySpec
	tc.deploy(c, &cepv1.DeployPatternRequest{Spec: string(anySpec)})
	// random patterns of other shapes (random_test.go) over the same
	// events' kind and v, keyed by account or region, with windows: their
	// state is snapshotted, restored and replayed through the kills too
	rng := rand.New(rand.NewPCG(42, 1))
	randomSpecs := randomSpecs(rng, "rnd", 6, specShape{typeField: "kind", window: [2]int{200, 2000}, always: true, cadenceFree: true})
	for _, s := range randomSpecs {
		tc.deploy(c, &cepv1.DeployPatternRequest{Spec: string(s)})
	}
	// events in time order: many accounts, each cycling through sessions
	lines := workload.Sessions(rng, total)
	keyOf := func(e map[string]any) string { return fmt.Sprint(e["account"]) }
	// publish in chunks, killing a shard leader between chunks
	chunks := 2 * kills
	per := len(lines) / chunks
	// a pattern deployed mid-stream, between a kill and the next chunk,
	// keyed by region (a derived source created then, forwarded through the
	// kills), with a window: its logins are the events published after the
	// deploy returned (the condition on ts leaves out the earlier ones, so
	// what the offline engine makes of all the events is what it must make)
	var midSpec []byte
	deployMid := func(from string) {
		var e struct{ TS int64 }
		json.Unmarshal([]byte(from), &e)
		midSpec = []byte(strings.NewReplacer("name: lfl", "name: lfl-mid", "key: e.account", "key: e.region\nwithin: 300",
			`where: e.type == "LOGIN"`, fmt.Sprintf(`where: e.type == "LOGIN" && e.ts >= %d`, e.TS)).Replace(string(spec)))
		// the node asked may be starting again, the metadata group electing:
		// a client retries (a deploy that went through answers "already
		// exists" to the retry)
		var pending []uint32
		testutil.EventuallyEvery(t, 30*time.Second, poll, func() error {
			res, err := c.patterns.DeployPattern(ctx, req(&cepv1.DeployPatternRequest{Spec: string(midSpec)}))
			switch {
			case connect.CodeOf(err) == connect.CodeAlreadyExists:
				pending = []uint32{0} // ask GetPattern
			case err != nil:
				return err
			default:
				pending = res.Msg.PendingShards
			}
			return nil
		})
		// a shard still electing its leader runs it once it has one: the
		// API says when
		testutil.EventuallyEvery(t, 30*time.Second, poll, func() error {
			if len(pending) == 0 {
				return nil
			}
			g, err := c.patterns.GetPattern(ctx, req(&cepv1.GetPatternRequest{Name: "lfl-mid"}))
			if err != nil {
				return err
			}
			if pending = g.Msg.PendingShards; len(pending) > 0 {
				return fmt.Errorf("lfl-mid does not run on shards %v yet", pending)
			}
			return nil
		})
	}
	for k := 0; k < chunks; k++ {
		end := (k + 1) * per
		if k == chunks-1 {
			end = len(lines)
		}
		if k == kills/2+1 {
			deployMid(lines[k*per])
		}
		switch k {
		case 1:
			t.Logf("before chunk %d: %s joins", k, joiner.id)
			joiner.start(t)
			tc.procs = append(tc.procs, joiner)
		case kills/2 + 2:
			tc.removeNode("n1")
			tc.procs = slices.DeleteFunc(tc.procs, func(p *proc) bool {
				if p.id == "n1" {
					p.kill()
					return true
				}
				return false
			})
		}
		tc.publish("bank", keyOf, lines[k*per:end])
		if k < kills {
			victim := tc.shardLeader()
			t.Logf("after chunk %d: SIGKILL %s, the leader of shard 1", k, victim.id)
			victim.kill()
			if k == 0 { // a live node reports the killed one dead
				var other *proc
				for _, p := range tc.procs {
					if p != victim {
						other = p
					}
				}
				st, err := tc.clients(other.api, api.WithClientToken("s3cret")).cluster.GetStatus(ctx, req(&cepv1.GetStatusRequest{}))
				if err != nil {
					t.Fatal(err)
				}
				// (suspect until the gossip declares it dead, seconds later)
				for _, nd := range st.Msg.Nodes {
					dead := nd.State == cepv1.NodeState_NODE_STATE_SUSPECT || nd.State == cepv1.NodeState_NODE_STATE_DEAD
					if (nd.Id == victim.id) != dead || nd.State == cepv1.NodeState_NODE_STATE_UNSPECIFIED {
						t.Errorf("status of %s: %v", nd.Id, nd.State)
					}
				}
				if s := st.Msg.Summary; s.Alive != 2 || s.Dead+s.Suspect != 1 {
					t.Errorf("summary: %+v", st.Msg.Summary)
				}
			}
			time.Sleep(500 * time.Millisecond)
			victim.start(t)
		}
	}
	type patternCase struct {
		name string
		spec []byte
	}
	cases := []patternCase{{"lfl", spec}, {"lfl-user", userSpec}, {"lfl-mid", midSpec}, {"lfl-any", anySpec}}
	for i, s := range randomSpecs {
		cases = append(cases, patternCase{fmt.Sprintf("rnd%d", i), s})
	}
	for _, tt := range cases {
		want := withoutIDs(offline(t, tt.spec, lines))
		if len(want) < 20 && !strings.HasPrefix(tt.name, "rnd") {
			t.Fatalf("%s: the offline run produced only %d records", tt.name, len(want))
		}
		// (read once they are all there or the time is up, so that a
		// failure names the records missing, not only their count)
		got := withoutIDs(tc.outputsOnceThere("cep.out."+tt.name, len(want), 60*time.Second))
		t.Logf("%s: %d events, %d records on NATS, %d from the offline engine", tt.name, len(lines), len(got), len(want))
		if d := differsFromOffline(got, want, string(tt.spec)); d != "" {
			t.Fatalf("%s: the cluster's output differs from the offline engine's: %s", tt.name, d)
		}
	}
}

func lastLines(s string, n int) string {
	ls := strings.Split(strings.TrimSpace(s), "\n")
	if len(ls) > n {
		ls = ls[len(ls)-n:]
	}
	return strings.Join(ls, "\n")
}
