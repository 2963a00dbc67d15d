package leader

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/cepcluster/cep/cluster/meta"
	"github.com/cepcluster/cep/cluster/plan"
	"github.com/cepcluster/cep/internal/offline"
	tu "github.com/cepcluster/cep/internal/testutil"
	"github.com/cepcluster/cep/internal/workload"
	"github.com/cepcluster/cep/keygroup"
	"github.com/cepcluster/cep/shard"
)

// The leader's tests run it without a node: a real embedded NATS server
// with JetStream, a real shard Raft group (in-memory transport), and fakes
// of the rest of the Env. Each checks what the leader did against the
// offline engine or an invariant, not against recorded results.

const testGroups = 256

// fakeMeta is a metadata replica the test changes.
type fakeMeta struct {
	mu      sync.Mutex
	m       *meta.Meta
	changed chan struct{}
}

func newFakeMeta(m *meta.Meta) *fakeMeta { return &fakeMeta{m: m, changed: make(chan struct{})} }

func (f *fakeMeta) View() (*meta.Meta, <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, _ := json.Marshal(f.m) // a copy, as the FSM's view is
	var c meta.Meta
	_ = json.Unmarshal(b, &c)
	return &c, f.changed
}

func (f *fakeMeta) update(fn func(m *meta.Meta)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f.m)
	close(f.changed)
	f.changed = make(chan struct{})
}

// fakePeers answers for the other replicas of an in-memory group from
// their FSMs; reaches says whose node reaches NATS.
type fakePeers struct {
	replicas func() map[string]*shard.Shard
	reaches  func(id string) bool
}

func (p fakePeers) RaftAddr(id string) (string, bool) {
	_, ok := p.replicas()[id]
	return id, ok
}

func (p fakePeers) report(id string, sh *shard.Shard) plan.Replica {
	return plan.Replica{ID: id, Applied: sh.FSM().Index(), NATSReachable: p.reaches(id)}
}

func (p fakePeers) Replica(_ context.Context, id string, _ uint64) (plan.Replica, error) {
	sh, ok := p.replicas()[id]
	if !ok {
		return plan.Replica{}, fmt.Errorf("no node %s", id)
	}
	return p.report(id, sh), nil
}

func (p fakePeers) Replicas(_ context.Context, self *shard.Shard) []plan.Replica {
	f := self.Raft().GetConfiguration()
	if f.Error() != nil {
		return nil
	}
	var out []plan.Replica
	for _, srv := range f.Configuration().Servers {
		if sh, ok := p.replicas()[string(srv.ID)]; ok && sh != self {
			r := p.report(string(srv.ID), sh)
			r.Voter = srv.Suffrage == raft.Voter
			out = append(out, r)
		}
	}
	return out
}

func (p fakePeers) Applied(_ context.Context, id string, _ uint64) (uint64, error) {
	sh, ok := p.replicas()[id]
	if !ok {
		return 0, fmt.Errorf("no node %s", id)
	}
	return sh.FSM().Index(), nil
}

type noQuarantine struct{}

func (noQuarantine) StoppedHere(meta.ShardInfo) bool { return false }
func (noQuarantine) Demote(context.Context, *shard.Shard, raft.Configuration) (bool, error) {
	return false, nil
}

// fakeStatus records what the leader says of its clocks and streams.
type fakeStatus struct {
	mu     sync.Mutex
	unread map[string]string
}

func (s *fakeStatus) SetClock(uint64, []ClockStatus) {}
func (s *fakeStatus) SetUnread(_ uint64, stream, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.unread == nil {
		s.unread = map[string]string{}
	}
	s.unread[stream] = reason
}
func (s *fakeStatus) ClearUnread(_ uint64, stream string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.unread, stream)
}

// harness is a shard group of n in-memory replicas, each with its leader
// loop, over one NATS server.
type harness struct {
	t       *testing.T
	nc      *nats.Conn
	js      jetstream.JetStream
	meta    *fakeMeta
	shards  map[string]*shard.Shard
	ids     []string
	paused  *prometheus.GaugeVec
	refused atomic.Int64
	envs    map[string]*Env
	cutOff  sync.Map // node id -> true: its NATS does not answer
}

func testRaftConfig() *raft.Config {
	c := shard.DefaultRaftConfig()
	c.HeartbeatTimeout = 200 * time.Millisecond
	c.ElectionTimeout = 200 * time.Millisecond
	c.LeaderLeaseTimeout = 100 * time.Millisecond
	c.CommitTimeout = 2 * time.Millisecond
	return c
}

// newHarness starts NATS, the source stream "src" and the output stream
// (unless noOutput), and a group of n replicas of shard 1 (all key
// groups); edit, if given, changes each replica's Env before its leader
// starts.
func newHarness(t *testing.T, n int, noOutput bool, edit func(id string, e *Env)) *harness {
	s := tu.StartNATS(t, tu.NATSOptions{})
	h := &harness{t: t, shards: map[string]*shard.Shard{}, envs: map[string]*Env{}}
	h.nc, h.js = tu.JetStream(t, s)
	ctx := context.Background()
	if _, err := h.js.CreateStream(ctx, jetstream.StreamConfig{Name: "SRC", Subjects: []string{"src.*"}}); err != nil {
		t.Fatal(err)
	}
	if !noOutput {
		h.createOutput()
	}
	for i := range n {
		h.ids = append(h.ids, fmt.Sprintf("n%d", i))
	}
	h.meta = newFakeMeta(&meta.Meta{
		Patterns: map[string]*meta.Pattern{},
		Sources:  map[string]*meta.Source{"src": {Name: "src", Stream: "SRC", Subjects: []string{"src.*"}, Managed: true}},
		Shards:   []meta.ShardInfo{{ID: 1, First: 0, Last: testGroups - 1, Replicas: slices.Clone(h.ids)}},
	})
	h.paused = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "paused"}, []string{"shard", "stream", "reason"})
	missing := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "missing"}, []string{"shard", "stream"})
	var servers []raft.Server
	trans := map[string]*raft.InmemTransport{}
	for _, id := range h.ids {
		addr, tr := raft.NewInmemTransport(raft.ServerAddress(id))
		trans[id] = tr
		servers = append(servers, raft.Server{ID: raft.ServerID(id), Address: addr})
	}
	for a, ta := range trans {
		for b, tb := range trans {
			if a != b {
				ta.Connect(tb.LocalAddr(), tb)
			}
		}
	}
	var mu sync.Mutex
	replicas := func() map[string]*shard.Shard {
		mu.Lock()
		defer mu.Unlock()
		return h.shards
	}
	log := tu.Logger(t, slog.LevelWarn)
	for _, id := range h.ids {
		sh, err := shard.Open(shard.Config{ID: 1, First: 0, Last: testGroups - 1, Groups: testGroups, ClusterID: "c", Dir: t.TempDir(),
			LocalID: id, Transport: trans[id], Bootstrap: servers, Raft: testRaftConfig(), Logger: log})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sh.Close() })
		mu.Lock()
		h.shards[id] = sh
		mu.Unlock()
	}
	for _, id := range h.ids {
		env := Env{
			NodeID: id,
			Config: Config{
				Now: time.Now, IngestBatch: 50, IngestLinger: 5 * time.Millisecond, OutboxLimit: 100_000,
				TickEvery: 100 * time.Millisecond, ClockEvery: 50 * time.Millisecond, IdleTimeout: time.Second,
				StreamCheckEvery: time.Second, HandOverAfter: time.Hour, NATSHandOverAfter: 300 * time.Millisecond,
				NATSProbeEvery: 50 * time.Millisecond,
			},
			Log:          log.With("node", id),
			Meta:         h.meta,
			JetStream:    func() jetstream.JetStream { return h.js },
			NATS:         func() *nats.Conn { return h.nc },
			NATSRedialed: func() <-chan struct{} { return nil },
			NATSUnreachableFor: func(time.Time) time.Duration {
				if _, cut := h.cutOff.Load(id); cut {
					return time.Hour
				}
				return 0
			},
			KeyGroups: func() int { return testGroups },
			Peers: fakePeers{replicas: replicas, reaches: func(id string) bool {
				_, cut := h.cutOff.Load(id)
				return !cut
			}},
			Quarantine: noQuarantine{},
			Metrics: Metrics{
				ApplyLatency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "apply"}),
				ReadPaused:   h.paused, StreamMissing: missing,
				Refused: func(Refusal) { h.refused.Add(1) },
			},
			Status:        &fakeStatus{},
			ReadSplit:     func(uint64) ([]byte, bool) { return nil, false },
			PatternLimits: func(string, string) (int, int64) { return 0, 0 },
		}
		if edit != nil {
			edit(id, &env)
		}
		h.envs[id] = &env
		lctx, cancel := context.WithCancel(context.Background())
		l := New(lctx, env, h.shards[id])
		done := make(chan struct{})
		go func() { defer close(done); l.Run() }()
		// the loop stops before its shard closes (cleanups run last first)
		t.Cleanup(func() { cancel(); <-done })
	}
	return h
}

func (h *harness) createOutput() {
	if _, err := h.js.CreateStream(context.Background(), jetstream.StreamConfig{Name: "OUT",
		Subjects: []string{keygroup.OutputSubjectRoot + ">", keygroup.DeadLetterRoot + ">"}}); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) leader() (string, *shard.Shard) {
	h.t.Helper()
	var id string
	tu.Eventually(h.t, 10*time.Second, func() error {
		for _, i := range h.ids {
			if h.shards[i].IsLeader() {
				id = i
				return nil
			}
		}
		return fmt.Errorf("no leader")
	})
	return id, h.shards[id]
}

// deploy has the metadata hold pattern name (version v) reading src
// from the start of its stream.
func (h *harness) deploy(name string, v uint64, spec []byte) {
	h.meta.update(func(m *meta.Meta) {
		m.Patterns[name] = &meta.Pattern{Name: name, Version: v, Spec: string(spec), Format: "spec", Sources: []string{"src"},
			OutputSubject: keygroup.OutputSubjectRoot + name, FromStart: true}
	})
}

// publish puts lines on the source stream, each on its key's block as the
// stream's subject transform stores it.
func (h *harness) publish(lines []string) {
	h.t.Helper()
	for _, l := range lines {
		var e struct{ Account string }
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			h.t.Fatal(err)
		}
		block := keygroup.BlockOf(keygroup.OfKey(e.Account, testGroups), testGroups)
		if _, err := h.js.Publish(context.Background(), fmt.Sprintf("src.%d", block), []byte(l)); err != nil {
			h.t.Fatal(err)
		}
	}
}

// output is what the output stream holds on subject, ids stripped,
// sorted.
func (h *harness) output(subject string) []string {
	h.t.Helper()
	st, err := h.js.Stream(context.Background(), "OUT")
	if err != nil {
		h.t.Fatal(err)
	}
	var out []string
	info, err := st.Info(context.Background())
	if err != nil {
		h.t.Fatal(err)
	}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := st.GetMsg(context.Background(), seq)
		if err != nil {
			continue
		}
		if m.Subject == subject {
			out = append(out, offline.WithoutID(string(m.Data)))
		}
	}
	sort.Strings(out)
	return out
}

// drained waits until the leader's shard has applied every event of the
// source stream and published its whole outbox (acknowledged through the
// log).
func (h *harness) drained(sh *shard.Shard, events int) {
	h.t.Helper()
	tu.Eventually(h.t, 30*time.Second, func() error {
		var pos uint64
		var outbox int
		sh.FSM().View(func(s *shard.State, _ uint64) { pos, outbox = s.Positions()["src"], len(s.Outbox()) })
		if pos < uint64(events) || outbox > 0 {
			return fmt.Errorf("position %d of %d, %d records unpublished", pos, events, outbox)
		}
		return nil
	})
}

func sessions(seed uint64, n int) []string {
	return workload.Sessions(rand.New(rand.NewPCG(seed, 7)), n)
}

func sameRecords(t *testing.T, got, want []string) {
	t.Helper()
	if len(want) == 0 {
		t.Fatal("the workload gives no record: nothing is checked")
	}
	if !slices.Equal(got, want) {
		t.Fatalf("%d records published, the offline engine gives %d\nfirst published: %.300s\nfirst offline:   %.300s",
			len(got), len(want), strings.Join(got[:min(2, len(got))], "\n"), strings.Join(want[:min(2, len(want))], "\n"))
	}
}

// Read → propose → apply → publish → ack: the leader deploys the pattern
// the metadata holds, reads the source into the log, and publishes what
// the state machine matched; once it is acknowledged the outbox is empty,
// and the output is the offline engine's.
func TestLeaderReadsProposesPublishes(t *testing.T) {
	h := newHarness(t, 1, false, nil)
	_, sh := h.leader()
	spec := workload.LFL("src")
	lines := sessions(1, 600)
	h.deploy("lfl", 1, spec)
	h.publish(lines)
	h.drained(sh, len(lines))
	sameRecords(t, h.output(keygroup.OutputSubjectRoot+"lfl"), offline.Records(t, spec, lines))
}

// testRefused is an entry refused as Raft refuses one during a
// leadership transfer.
type testRefused struct{}

func (testRefused) Error() error  { return raft.ErrLeadershipTransferInProgress }
func (testRefused) Index() uint64 { return 0 }
func (testRefused) Response() any { return nil }

// An entry refused (a leadership transfer under way) has the leader read
// again from the applied position: nothing is lost or doubled.
func TestLeaderReadsAgainAfterARefusedEntry(t *testing.T) {
	var refusals atomic.Int64
	h := newHarness(t, 1, false, func(_ string, e *Env) {
		e.ProposeRead = func(sh *shard.Shard, _ string, b *shard.Batch, first, last uint64) raft.ApplyFuture {
			// the entry holding position 200, twice
			if first <= 200 && 200 <= last && refusals.Add(1) <= 2 {
				return testRefused{}
			}
			return sh.ProposeAsync(b)
		}
	})
	_, sh := h.leader()
	spec := workload.LFL("src")
	lines := sessions(2, 600)
	h.deploy("lfl", 1, spec)
	h.publish(lines)
	h.drained(sh, len(lines))
	if refusals.Load() < 2 {
		t.Fatalf("%d entries refused, want 2", refusals.Load())
	}
	sameRecords(t, h.output(keygroup.OutputSubjectRoot+"lfl"), offline.Records(t, spec, lines))
}

// While JetStream takes no output, reading pauses once the outbox holds
// its limit (the replicated state does not grow with what is read
// meanwhile) and says so; once the output is taken, reading resumes and
// nothing is lost.
func TestLeaderOutboxBackPressure(t *testing.T) {
	const limit = 20
	h := newHarness(t, 1, true, func(_ string, e *Env) { e.Config.OutboxLimit = limit })
	_, sh := h.leader()
	spec := workload.LFL("src")
	lines := sessions(3, 1500)
	h.deploy("lfl", 1, spec)
	h.publish(lines)
	gauge := h.paused.WithLabelValues("1", "SRC", "outbox")
	tu.Eventually(t, 20*time.Second, func() error {
		if v := testutil.ToFloat64(gauge); v != 1 {
			return fmt.Errorf("reading not paused (gauge %v)", v)
		}
		return nil
	})
	position := func() (pos uint64, outbox int) {
		sh.FSM().View(func(s *shard.State, _ uint64) { pos, outbox = s.Positions()["src"], len(s.Outbox()) })
		return pos, outbox
	}
	// once paused nothing more is proposed (the outbox only grows while
	// nothing is published); what was in flight still applies: up to 4
	// entries queued for the check, the one checked, and one proposed and
	// waiting for room in the queue
	const inFlight = 6
	batch := h.envs["n0"].Config.IngestBatch
	p1, _ := position()
	time.Sleep(500 * time.Millisecond)
	p2, o2 := position()
	if p2 > p1+inFlight*uint64(batch) || p2 >= uint64(len(lines)) {
		t.Fatalf("reading went on while paused: position %d, then %d (of %d)", p1, p2, len(lines))
	}
	// each entry is proposed only below the limit, and an event makes at
	// most one record of the pattern
	if bound := limit + inFlight*batch; o2 > bound {
		t.Fatalf("outbox holds %d records, past %d", o2, bound)
	}
	h.createOutput()
	h.drained(sh, len(lines))
	if v := testutil.ToFloat64(gauge); v != 0 {
		t.Fatalf("the outbox gauge stays %v once drained", v)
	}
	sameRecords(t, h.output(keygroup.OutputSubjectRoot+"lfl"), offline.Records(t, spec, lines))
}

// A reconcile makes the patterns the shard runs those the metadata holds:
// a new version replaces the old, a second pattern is deployed, a deleted
// one stops.
func TestLeaderReconcilesWithTheMetadata(t *testing.T) {
	h := newHarness(t, 1, false, nil)
	_, sh := h.leader()
	runs := func() map[string]uint64 {
		out := map[string]uint64{}
		sh.FSM().View(func(s *shard.State, _ uint64) {
			for _, p := range s.Patterns() {
				out[p.Name] = p.Version
			}
		})
		return out
	}
	// what the metadata says should run, derived from it alone
	want := func() map[string]uint64 {
		m, _ := h.meta.View()
		out := map[string]uint64{}
		for name, p := range m.Patterns {
			if !p.Deleted {
				out[name] = p.Version
			}
		}
		return out
	}
	agree := func(step string) {
		t.Helper()
		tu.Eventually(t, 10*time.Second, func() error {
			if got, w := runs(), want(); !mapsEqual(got, w) {
				return fmt.Errorf("%s: the shard runs %v, the metadata holds %v", step, got, w)
			}
			return nil
		})
	}
	h.deploy("lfl", 1, workload.LFL("src"))
	agree("deployed")
	h.deploy("lfl", 2, workload.LFL("src"))
	h.deploy("lfl-any", 1, workload.LFLAny("src"))
	agree("updated and added")
	h.meta.update(func(m *meta.Meta) { m.Patterns["lfl"].Deleted = true })
	agree("deleted")
}

func mapsEqual(a, b map[string]uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// A leader whose node has not reached NATS for NATSHandOverAfter hands
// the shard to a replica whose node reports that it does, and never to
// one that reports it does not.
func TestLeaderCutOffHandsOverByPeerReports(t *testing.T) {
	h := newHarness(t, 3, false, nil)
	first, _ := h.leader()
	var others []string
	for _, id := range h.ids {
		if id != first {
			others = append(others, id)
		}
	}
	// the leader's node and one other cannot reach NATS
	h.cutOff.Store(first, true)
	h.cutOff.Store(others[0], true)
	deadline := time.Now().Add(10 * time.Second)
	for {
		var leads []string
		for _, id := range h.ids {
			if h.shards[id].IsLeader() {
				leads = append(leads, id)
			}
		}
		if slices.Contains(leads, others[0]) {
			t.Fatalf("leadership went to %s, whose node reports it cannot reach NATS", others[0])
		}
		if slices.Equal(leads, []string{others[1]}) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("leaders %v: leadership never reached %s, the one replica that reaches NATS", leads, others[1])
		}
		time.Sleep(5 * time.Millisecond)
	}
	// it stays there: the replica reaching NATS has no reason to move it
	time.Sleep(time.Second)
	if !h.shards[others[1]].IsLeader() {
		t.Fatalf("leadership left %s", others[1])
	}
}
