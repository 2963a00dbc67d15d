package main

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"github.com/nats-io/nats.go"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/keygroup"
)

// --scale state: three cepnode processes, one shard of three replicas
// (--shards), holding --state-size bytes of events in partial matches of
// the README pattern (examples/login-fail-logout.yaml: a LOGIN then a
// PAYMENT_FAILED per key, each key waiting for its LOGOUT). While events
// flow at a steady --state-rate it measures the shard's Raft snapshot and
// how long applying stopped meanwhile, a restart, a new replica's
// catch-up and a failover, the last two against the same with an empty
// state.

const (
	stateSource  = "bank" // the README pattern's source
	stateKeyAttr = "e.account"
	stateShard   = 1
	// stallTarget is the bound on an apply stall.
	stallTarget = 100 * time.Millisecond
	// flowKeys are the keys of the steady flow: few, so they add little
	// state, and apart from the state's keys.
	flowKeys = 1000
	// event time moves one ms every flowPerMs events of the flow and stops
	// at clockSpan ms: the pattern's 5 minutes never pass, so no partial
	// match times out however long the run
	clockSpan = 290_000
	// minQuietWindows is how many windows without the leader's snapshot
	// the stall is compared with.
	minQuietWindows = 3
	flowPerMs       = 20
)

// eventClock is the event time of the run's events: the flow advances it,
// the state's events take its time when published, so no event is behind
// the watermark (late) and none is ahead of the nodes' clocks.
type eventClock struct {
	base int64 // ms since the epoch
	n    atomic.Int64
}

func (c *eventClock) now() int64 { return c.base + min(c.n.Load()/flowPerMs, clockSpan) }

// stateResult is what --scale state measured.
type stateResult struct {
	TargetBytes   int64    `json:"target_bytes"`
	EventBytes    int      `json:"event_bytes"`
	Keys          int      `json:"keys"`
	Shards        int      `json:"shards"`
	FlowRate      float64  `json:"flow_events_per_sec"`
	Build         *buildR  `json:"build,omitempty"`
	Snapshots     []snapR  `json:"snapshots,omitempty"`
	Stall         *stallR  `json:"stall,omitempty"`
	FailoverEmpty *failR   `json:"failover_empty,omitempty"`
	RestartEmpty  *restart `json:"restart_empty,omitempty"`
	Failover      *failR   `json:"failover,omitempty"`
	Restart       *restart `json:"restart,omitempty"`
	CatchUp       *catchUp `json:"catch_up,omitempty"`
	Profiles      []string `json:"profiles,omitempty"`
	Notes         []string `json:"notes,omitempty"`
	LoadAvgStart  string   `json:"loadavg_start"`
	LoadAvgEnd    string   `json:"loadavg_end"`
}

// buildR is the state once built, as the shard's leader reports it.
type buildR struct {
	Events         int      `json:"events"`
	Seconds        float64  `json:"seconds"`
	StateBytes     float64  `json:"state_bytes"` // cep_pattern_state_bytes
	PartialMatches float64  `json:"partial_matches"`
	PatternKeys    float64  `json:"pattern_keys"`
	RSS            []string `json:"rss"`               // each node's resident set
	ScrapeMs       []string `json:"metrics_scrape_ms"` // one /metrics scrape of each node
	Own            *ownCPU  `json:"own_cpu,omitempty"`
	LoadAvg        string   `json:"loadavg"`
}

// snapR is one replica's snapshot of the shard at its size.
type snapR struct {
	Node     string  `json:"node"`
	Leader   bool    `json:"leader"`
	Index    uint64  `json:"index"`
	EncodeS  float64 `json:"encode_seconds"`  // cep_raft_snapshot_encode_seconds: applying waits
	PersistS float64 `json:"persist_seconds"` // created to complete: written to disk
	Bytes    int64   `json:"file_bytes"`
	LoadAvg  string  `json:"loadavg"`
}

// stallR is the leader's apply-latency histogram over windows with and
// without its snapshot.
type stallR struct {
	Windows []stallWindow `json:"windows"`
	Own     *ownCPU       `json:"own_cpu,omitempty"` // over the windows
}

// failR is one failover: the shard leader killed with SIGKILL.
type failR struct {
	Victim    string  `json:"victim"`
	NewLeader string  `json:"new_leader"`
	ElectedMs float64 `json:"elected_ms"` // until a survivor reports itself leader
	AppliesMs float64 `json:"applies_ms"` // until it applied new events
	LoadAvg   string  `json:"loadavg"`
}

// restart is a killed node started again.
type restart struct {
	Node        string  `json:"node"`
	ReadyMs     float64 `json:"ready_ms"`     // until /readyz answers
	CaughtUpMs  float64 `json:"caught_up_ms"` // until its replica applied what the leader had
	LeaderIndex uint64  `json:"leader_index"` // the leader's applied index it reached
	DownSeconds float64 `json:"down_seconds"` // killed for
	LoadAvg     string  `json:"loadavg"`
}

// catchUp is a new node receiving the shard in place of a removed one.
type catchUp struct {
	Node       string  `json:"node"`
	Replaces   string  `json:"replaces"`
	MemberMs   float64 `json:"member_ms"`    // from its start until the cluster lists it
	OpenedMs   float64 `json:"opened_ms"`    // from the removal until it holds a replica
	CaughtUpMs float64 `json:"caught_up_ms"` // from the removal until it applied what the leader had
	Installed  bool    `json:"snapshot_installed"`
	// the index of its first snapshot and of the leader's last before
	SnapshotIndex  uint64 `json:"snapshot_index"`
	LeaderSnapshot uint64 `json:"leader_snapshot_index"`
	LoadAvg        string `json:"loadavg"`
}

const letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

// stateEvent writes the event of key i, LOGIN or PAYMENT_FAILED, padded
// with a note to size bytes (at least its fields).
func stateEvent(buf []byte, i int, login bool, ts int64, size int) []byte {
	buf = append(buf[:0], `{"account":"s`...)
	buf = strconv.AppendInt(buf, int64(i), 10)
	if login {
		buf = append(buf, `","type":"LOGIN","ts":`...)
	} else {
		buf = append(buf, `","type":"PAYMENT_FAILED","amount":12.5,"ts":`...)
	}
	buf = strconv.AppendInt(buf, ts, 10)
	buf = append(buf, `,"note":"`...)
	// letters of a generator seeded by the key and the type: a snapshot's
	// compression cannot shrink them, as it would a repeated pattern
	x := uint64(i)*2 + 0x9e3779b97f4a7c15
	if login {
		x++
	}
	for pad := size - len(buf) - 2; pad > 0; pad-- {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		buf = append(buf, letters[x%uint64(len(letters))])
	}
	return append(buf, `"}`...)
}

// stateKeys is how many keys hold target bytes of events of size bytes
// (two events per key).
func stateKeys(target int64, size int) int {
	per := int64(len(stateEvent(nil, 1_000_000, true, 1e12, size)) + len(stateEvent(nil, 1_000_000, false, 1e12, size)))
	return int((target + per - 1) / per)
}

// flow publishes small events of flowKeys keys at a steady rate until
// stopped, so that the shard's leader proposes entries all along.
type flow struct {
	sent   atomic.Int64
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
	err    error
}

func startFlow(ctx context.Context, p *publisher, rate float64, clock *eventClock) *flow {
	ctx, cancel := context.WithCancel(ctx)
	f := &flow{cancel: cancel, done: make(chan error, 1)}
	subj := make([]string, flowKeys)
	for i := range subj {
		subj[i] = stateSource + "." + keygroup.KeyToken("flow-"+strconv.Itoa(i))
	}
	go func() {
		start := time.Now()
		var buf []byte
		i := 0
		for ctx.Err() == nil {
			due := int(time.Since(start).Seconds()*rate) + 1
			for ; i < due && ctx.Err() == nil; i++ {
				buf = fmt.Appendf(buf[:0], `{"account":"flow-%d","type":"PING","ts":%d}`, i%flowKeys, clock.now())
				clock.n.Add(1)
				if err := p.publish(ctx, subj[i%flowKeys], bytes.Clone(buf)); err != nil {
					if ctx.Err() == nil {
						f.done <- err
						return
					}
				}
				f.sent.Add(1)
			}
			select {
			case <-ctx.Done():
			case <-time.After(time.Millisecond):
			}
		}
		f.done <- nil
	}()
	return f
}

// stop ends the flow and returns its error, if it failed; again, the
// same.
func (f *flow) stop() error {
	f.once.Do(func() {
		f.cancel()
		select {
		case f.err = <-f.done:
		case <-time.After(30 * time.Second):
			f.err = errors.New("the steady flow did not stop within 30s")
		}
	})
	return f.err
}

// failed returns the flow's error once it has stopped on one.
func (f *flow) failed() error {
	select {
	case err := <-f.done:
		f.done <- err
		return err
	default:
		return nil
	}
}

// localShard is what a node reports of its own replica of the shard.
func localShard(ctx context.Context, m *member) (*cepv1.Shard, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	res, err := newClients(m.api).cluster.ListShards(ctx, connect.NewRequest(&cepv1.ListShardsRequest{}))
	if err != nil {
		return nil, err
	}
	for _, s := range res.Msg.Shards {
		if s.Id == stateShard {
			return s, nil
		}
	}
	return nil, fmt.Errorf("%s holds no replica of shard %d", m.id, stateShard)
}

// rawMetrics fetches a node's /metrics body and how long it took.
func rawMetrics(ctx context.Context, addr string) ([]byte, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	start := time.Now()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err == nil && res.StatusCode != http.StatusOK {
		err = fmt.Errorf("/metrics: %s", res.Status)
	}
	return b, time.Since(start), err
}

// metricValue is the value of name for the shard (and pattern, when not
// empty) in a /metrics body; ok is false when absent.
func metricValue(body []byte, name, shardLabel, pattern string) (float64, bool) {
	for _, line := range strings.Split(string(body), "\n") {
		rest, ok := strings.CutPrefix(line, name)
		if !ok || rest == "" || rest[0] != '{' && rest[0] != ' ' {
			continue
		}
		if shardLabel != "" && !strings.Contains(rest, `shard="`+shardLabel+`"`) {
			continue
		}
		if pattern != "" && !strings.Contains(rest, `pattern="`+pattern+`"`) {
			continue
		}
		f := strings.Fields(rest[strings.LastIndexByte(rest, '}')+1:])
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err == nil {
			return v, true
		}
	}
	return 0, false
}

// vmRSS is a process's resident set from /proc/PID/status.
func vmRSS(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return "?"
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return fmt.Sprintf("%.0f MB", kb/1024)
		}
	}
	return "?"
}

// shardSnapshots is the directory of a node's snapshots of the shard.
func shardSnapshots(m *member) string {
	return filepath.Join(m.dir, "shards", strconv.Itoa(stateShard), "snapshots")
}

// memberByID finds a member.
func (c *benchCluster) memberByID(id string) *member {
	for _, m := range c.members {
		if m.id == id {
			return m
		}
	}
	return nil
}

// stateRun holds what the phases share.
type stateRun struct {
	o                 *options
	c                 *benchCluster
	pub               *publisher
	res               *stateResult
	log               *slog.Logger
	wait              time.Duration
	natsURL, bin, dir string
	extra             []string
	pattern           string // the pattern's name, as its metrics are labelled
	flow              *flow
}

// stateLeader is the live member whose replica of the shard reports itself
// leader (the shard's nodes change during the run, so the others are not
// asked to agree).
func (c *benchCluster) stateLeader(ctx context.Context) (*member, error) {
	var seen []string
	for _, m := range c.alive() {
		s, err := localShard(ctx, m)
		if err != nil {
			seen = append(seen, m.id+": "+err.Error())
			continue
		}
		if s.LeaderNodeId == m.id {
			return m, nil
		}
		seen = append(seen, m.id+" follows "+s.LeaderNodeId)
	}
	return nil, fmt.Errorf("no node leads shard %d: %s", stateShard, strings.Join(seen, "; "))
}

// measureState runs --scale state.
func measureState(ctx context.Context, o *options, dir, natsURL string, log *slog.Logger) (*stateResult, error) {
	target, err := parseSize(o.stateSize)
	if err != nil {
		return nil, fmt.Errorf("--state-size: %w", err)
	}
	res := &stateResult{TargetBytes: target, EventBytes: o.eventBytes, Keys: stateKeys(target, o.eventBytes), Shards: o.shards, FlowRate: o.stateRate, LoadAvgStart: loadAvg()}
	defer func() { res.LoadAvgEnd = loadAvg() }()
	spec, err := readScalePattern(ctx, o.scalePattern)
	if err != nil {
		return res, err
	}
	name := nameLine.FindSubmatch(spec)
	if name == nil {
		return res, fmt.Errorf("--scale-pattern: no top-level \"name:\" line")
	}
	bin := o.cepnode
	if bin == "" {
		log.Info("building cepnode")
		if bin, err = buildCepnode(ctx, dir); err != nil {
			return res, err
		}
	}
	// the state's keys and bytes over the node's default bounds; a 4th
	// node must not split the shard; snapshots checked every second, so
	// that one follows its threshold closely; raft's snapshot lines are
	// logged at info
	extra := []string{"--max-keys", strconv.Itoa(2*res.Keys + 10*flowKeys), "--max-state-bytes", strconv.FormatInt(2*target+(64<<20), 10),
		"--auto-split=false", "--raft-snapshot-interval", "1s"}
	c, err := startProcessesWith(bin, dir, natsURL, 3, o.shards, o.nodeProcs, "info", extra, o.nodeMemLimit, log)
	if err != nil {
		return res, fmt.Errorf("start nodes: %w", err)
	}
	defer c.close()
	r := &stateRun{o: o, c: c, res: res, log: log, wait: o.stateWait, natsURL: natsURL, bin: bin, dir: dir, extra: extra, pattern: string(name[1])}
	if err := c.waitReady(ctx, 2*time.Minute); err != nil {
		return res, fmt.Errorf("nodes not ready: %w", err)
	}
	if err := poll(ctx, 2*time.Minute, 200*time.Millisecond, func() error {
		_, err := c.stateLeader(ctx)
		return err
	}); err != nil {
		return res, err
	}
	if err := setup(ctx, c, stateSource, stateKeyAttr, string(spec)); err != nil {
		return res, err
	}
	nc, err := nats.Connect(natsURL, nats.Name("cepbench-state"))
	if err != nil {
		return res, err
	}
	defer nc.Close()
	if r.pub, err = newPublisher(nc, o.inflight); err != nil {
		return res, err
	}
	// event time from five minutes in the past: it never passes the nodes' clocks
	clock := &eventClock{base: time.Now().UnixMilli() - clockSpan - 10_000}
	fl := startFlow(ctx, r.pub, o.stateRate, clock)
	defer fl.stop()
	r.flow = fl
	check := func() error {
		if err := fl.failed(); err != nil {
			return fmt.Errorf("steady flow: %w", err)
		}
		return c.checkProcesses()
	}
	log.Info("state: steady flow", "events/s", o.stateRate)
	if err := sleepCtx(ctx, 5*time.Second); err != nil {
		return res, err
	}

	// with an empty state: failover, and the killed node's restart
	log.Info("state: failover with an empty state")
	if res.FailoverEmpty, res.RestartEmpty, err = r.failover(ctx); err != nil {
		return res, fmt.Errorf("failover (empty state): %w", err)
	}
	if err := check(); err != nil {
		return res, err
	}

	if res.Build, err = r.build(ctx, clock, check); err != nil {
		return res, fmt.Errorf("build: %w", err)
	}
	if err := r.snapshots(ctx, check); err != nil {
		return res, fmt.Errorf("snapshot: %w", err)
	}
	log.Info("state: failover with the state")
	if res.Failover, res.Restart, err = r.failover(ctx); err != nil {
		return res, fmt.Errorf("failover: %w", err)
	}
	if err := check(); err != nil {
		return res, err
	}
	if res.CatchUp, err = r.catchUp(ctx); err != nil {
		return res, fmt.Errorf("catch-up: %w", err)
	}
	// the state is still whole: every key waits with its partial match
	var ld *member
	if err := poll(ctx, r.wait, 200*time.Millisecond, func() (err error) {
		ld, err = c.stateLeader(ctx)
		return err
	}); err != nil {
		return res, err
	}
	body, _, err := rawMetrics(ctx, ld.api)
	if err != nil {
		return res, err
	}
	pm, _ := metricValue(body, "cep_partial_matches", strconv.Itoa(stateShard), "")
	dead, _ := metricValue(body, "cep_events_dead_lettered_total", strconv.Itoa(stateShard), "")
	if int(pm) < res.Keys || dead > 0 {
		return res, fmt.Errorf("at the end the leader holds %.0f partial matches (want at least %d, one per key) and dead-lettered %.0f events", pm, res.Keys, dead)
	}
	return res, fl.stop()
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// build publishes a LOGIN and a PAYMENT_FAILED per key and waits until
// every replica has applied them and the leader holds the state.
func (r *stateRun) build(ctx context.Context, clock *eventClock, check func() error) (*buildR, error) {
	keys, size := r.res.Keys, r.o.eventBytes
	b := &buildR{Events: 2 * keys}
	r.log.Info("state: publishing", "keys", keys, "events", 2*keys, "event bytes", size, "target bytes", r.res.TargetBytes)
	own := startOwn(r.c)
	start := time.Now()
	var buf []byte
	for i := range keys {
		subj := stateSource + "." + keygroup.KeyToken("s"+strconv.Itoa(i))
		ts := clock.now()
		for _, login := range []bool{true, false} {
			buf = stateEvent(buf, i, login, ts, size)
			if err := r.pub.publish(ctx, subj, bytes.Clone(buf)); err != nil {
				return b, fmt.Errorf("key %d: %w", i, err)
			}
		}
		if i%100_000 == 0 && i > 0 {
			r.log.Info("state: published", "keys", i, "of", keys)
			if err := check(); err != nil {
				return b, err
			}
		}
	}
	if err := r.pub.drain(ctx, 5*time.Minute); err != nil {
		return b, err
	}
	// the flow's next events move the watermark past the state's (2 s of
	// out-of-orderness), which then enter their partial matches
	clock.n.Add(3000 * flowPerMs)
	r.log.Info("state: published, waiting until every replica holds it", "took", time.Since(start).Round(time.Second))
	ps := r.pattern
	lastLog := time.Now()
	err := poll(ctx, r.wait, 2*time.Second, func() error {
		if err := check(); err != nil {
			return permanent(err)
		}
		var missing []string
		for _, m := range r.c.alive() {
			body, _, err := rawMetrics(ctx, m.api)
			if err != nil {
				return err
			}
			pm, _ := metricValue(body, "cep_partial_matches", strconv.Itoa(stateShard), "")
			if int(pm) < keys {
				missing = append(missing, fmt.Sprintf("%s %.0f partial matches", m.id, pm))
			}
		}
		if len(missing) > 0 {
			if time.Since(lastLog) > 10*time.Second {
				r.log.Info("state: applying", "keys", keys, "replicas", strings.Join(missing, ", "))
				lastLog = time.Now()
			}
			return fmt.Errorf("not every replica holds a partial match per key: %s", strings.Join(missing, ", "))
		}
		return nil
	})
	if err != nil {
		return b, err
	}
	b.Seconds = time.Since(start).Seconds()
	if b.Own, err = own.stop(b.Events); err != nil {
		r.log.Warn("state: own CPU unknown", "err", err)
	}
	ld, err := r.c.stateLeader(ctx)
	if err != nil {
		return b, err
	}
	for _, m := range r.c.alive() {
		body, d, err := rawMetrics(ctx, m.api)
		if err != nil {
			return b, err
		}
		b.ScrapeMs = append(b.ScrapeMs, fmt.Sprintf("%s %.0f", m.id, ms(d)))
		b.RSS = append(b.RSS, m.id+" "+vmRSS(m.cmd.Process.Pid))
		if m == ld {
			b.StateBytes, _ = metricValue(body, "cep_pattern_state_bytes", strconv.Itoa(stateShard), ps)
			b.PartialMatches, _ = metricValue(body, "cep_partial_matches", strconv.Itoa(stateShard), "")
			b.PatternKeys, _ = metricValue(body, "cep_pattern_keys", strconv.Itoa(stateShard), ps)
		}
	}
	b.LoadAvg = loadAvg()
	r.log.Info("state: built", "state bytes", int64(b.StateBytes), "partial matches", int64(b.PartialMatches), "seconds", int(b.Seconds), "rss", strings.Join(b.RSS, ", "), "scrape ms", strings.Join(b.ScrapeMs, ", "))
	if b.StateBytes < float64(r.res.TargetBytes) {
		return b, fmt.Errorf("the leader holds %.0f bytes of state, want %d", b.StateBytes, r.res.TargetBytes)
	}
	return b, nil
}

// snapshots waits, in windows of --stall-window, until every replica has
// taken a snapshot of the state and there have been minQuietWindows windows
// in which none encoded one, reading the leader's apply-latency histogram
// at each window's end; with --cpuprofile each window has a CPU profile of
// the leader, kept when its snapshot's encoding fell in it.
func (r *stateRun) snapshots(ctx context.Context, check func() error) error {
	leader, err := r.c.stateLeader(ctx)
	if err != nil {
		return err
	}
	type nodeMark struct {
		m     *member
		after uint64 // the last snapshot's index before the windows
		snap  *snapR
		from  time.Time // its encoding, from the gauge and its creation
		to    time.Time
	}
	var marks []*nodeMark
	for _, m := range r.c.alive() {
		nm := &nodeMark{m: m}
		if ds := snapshotDirs(shardSnapshots(m)); len(ds) > 0 {
			nm.after = ds[len(ds)-1].Index
		}
		marks = append(marks, nm)
		body, _, _ := rawMetrics(ctx, m.api)
		th, _ := metricValue(body, "cep_raft_snapshot_threshold_entries", strconv.Itoa(stateShard), "")
		ap, _ := metricValue(body, "cep_raft_applied_index", strconv.Itoa(stateShard), "")
		r.log.Info("state: waiting for snapshots", "node", m.id, "applied", ap, "last snapshot", nm.after, "threshold entries", th)
	}
	// every node's histogram and whether it leads, read together at each
	// window's end: a window is its leader's, and says so when the
	// leadership moved during it (the histogram then covers part of it)
	type reading struct {
		hist []bucket
		lead bool
	}
	readAll := func() (map[*member]reading, error) {
		out := map[*member]reading{}
		var mu sync.Mutex
		var wg sync.WaitGroup
		var firstErr error
		for _, nm := range marks {
			wg.Go(func() {
				body, _, err := rawMetrics(ctx, nm.m.api)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					firstErr = cmp.Or(firstErr, err)
					return
				}
				l, _ := metricValue(body, "cep_shard_leader", strconv.Itoa(stateShard), "")
				out[nm.m] = reading{parseHistogram(body, "cep_raft_apply_seconds"), l == 1}
			})
		}
		wg.Wait()
		return out, firstErr
	}
	prev, err := readAll()
	if err != nil {
		return err
	}
	st := &stallR{}
	r.res.Stall = st
	type span struct{ from, to time.Time }
	var spans []span
	var paths []string
	// mark gives each window the replicas whose encoding overlapped it
	mark := func() (quiet int) {
		for i := range st.Windows {
			w := &st.Windows[i]
			w.Encoding, w.Snapshot = nil, false
			for _, nm := range marks {
				if nm.snap != nil && nm.from.Before(spans[i].to) && nm.to.After(spans[i].from) {
					w.Encoding = append(w.Encoding, nm.m.id)
					w.Snapshot = w.Snapshot || nm.m.id == w.Leader
				}
			}
			if len(w.Encoding) == 0 && i < len(st.Windows)-1 { // the last may hold one not yet created
				quiet++
			}
		}
		return quiet
	}
	own, sent0 := startOwn(r.c), r.flow.sent.Load()
	deadline := time.Now().Add(r.wait)
	for w := 0; ; w++ {
		if err := check(); err != nil {
			return err
		}
		wStart := time.Now()
		var prof chan error
		path := ""
		if r.o.cpuprofile != "" {
			path = fmt.Sprintf("%s.snapshot%d", r.o.cpuprofile, w)
			prof = make(chan error, 1)
			go func(api string) { prof <- nodeProfile(ctx, api, r.o.stallWindow, path) }(leader.api)
		}
		paths = append(paths, path)
		if err := sleepCtx(ctx, r.o.stallWindow); err != nil {
			return err
		}
		if prof != nil {
			if err := <-prof; err != nil {
				r.log.Warn("state: profile of the leader", "err", err)
			}
		}
		cur, err := readAll()
		if err != nil {
			return err
		}
		win, err := stallBetween(prev[leader].hist, cur[leader].hist, float64(stallTarget.Milliseconds()))
		if err != nil {
			return err
		}
		win.Leader = leader.id
		if !cur[leader].lead {
			win.LeaderMoved = true
			for m, rd := range cur {
				if rd.lead {
					leader = m // the next window's
				}
			}
		}
		prev = cur
		spans = append(spans, span{wStart, time.Now()})
		win.Seconds = time.Since(wStart).Seconds()
		st.Windows = append(st.Windows, win)
		all := true
		for _, nm := range marks {
			if ds := snapshotDirs(shardSnapshots(nm.m)); nm.snap == nil && len(ds) > 0 && ds[len(ds)-1].Index > nm.after {
				d := ds[len(ds)-1]
				body, _, err := rawMetrics(ctx, nm.m.api)
				if err != nil {
					return err
				}
				// the last snapshot's encoding, which ended as raft
				// created its directory
				enc, _ := metricValue(body, "cep_raft_snapshot_encode_seconds", strconv.Itoa(stateShard), "")
				nm.snap = &snapR{Node: nm.m.id, Index: d.Index, EncodeS: enc, PersistS: d.Complete.Sub(d.Created).Seconds(), Bytes: d.Bytes, LoadAvg: loadAvg()}
				nm.from, nm.to = d.Created.Add(-time.Duration(enc*float64(time.Second))), d.Created
				r.log.Info("state: snapshot", "node", nm.m.id, "leading", nm.m == leader, "index", d.Index, "encode s", enc, "persist s", nm.snap.PersistS)
			}
			all = all && nm.snap != nil
		}
		quiet := mark()
		r.log.Info("state: window", "n", w, "batches", win.Batches, "longest ms in", fmt.Sprintf("(%g, %g]", win.LongestL, win.LongestU))
		if all && (quiet >= minQuietWindows || time.Now().After(deadline)) {
			break
		}
		if time.Now().After(deadline) {
			var none []string
			for _, nm := range marks {
				if nm.snap == nil {
					none = append(none, nm.m.id)
				}
			}
			return fmt.Errorf("no snapshot of shard %d on %s within %s", stateShard, strings.Join(none, ", "), r.wait)
		}
	}
	if st.Own, err = own.stop(int(r.flow.sent.Load() - sent0)); err != nil {
		r.log.Warn("state: own CPU unknown", "err", err)
	}
	for i, w := range st.Windows {
		if paths[i] == "" {
			continue
		}
		if w.Snapshot {
			r.res.Profiles = append(r.res.Profiles, paths[i])
		} else {
			os.Remove(paths[i])
		}
	}
	for _, nm := range marks {
		nm.snap.Leader = nm.m.id == st.Windows[0].Leader
		r.res.Snapshots = append(r.res.Snapshots, *nm.snap)
	}
	return nil
}

// failover kills the shard's leader, times until a survivor leads and
// applies new events, then starts the killed node again and times until it
// serves its replica.
func (r *stateRun) failover(ctx context.Context) (*failR, *restart, error) {
	victim, err := r.c.stateLeader(ctx)
	if err != nil {
		return nil, nil, err
	}
	var survivors []*member
	for _, m := range r.c.alive() {
		if m != victim {
			survivors = append(survivors, m)
		}
	}
	f := &failR{Victim: victim.id}
	r.log.Info("state: SIGKILL of the shard leader", "node", victim.id)
	killAt := time.Now()
	if err := victim.kill(); err != nil {
		return f, nil, err
	}
	// the events each survivor had applied while none led: a leader's
	// count above it is its own new events
	base := map[string]float64{}
	err = poll(ctx, r.wait, 100*time.Millisecond, func() error {
		type view struct {
			lead   bool
			events float64
		}
		views := map[string]view{}
		anyLeader := false
		for _, m := range survivors {
			body, _, err := rawMetrics(ctx, m.api)
			if err != nil {
				continue
			}
			l, _ := metricValue(body, "cep_shard_leader", strconv.Itoa(stateShard), "")
			ev, _ := metricValue(body, "cep_events_total", strconv.Itoa(stateShard), "")
			views[m.id] = view{l == 1, ev}
			anyLeader = anyLeader || l == 1
		}
		for id, v := range views {
			switch {
			case !anyLeader:
				base[id] = v.events
			case v.lead:
				if f.NewLeader == "" {
					f.NewLeader, f.ElectedMs = id, ms(time.Since(killAt))
				}
				if b, ok := base[id]; ok && v.events > b {
					f.AppliesMs = ms(time.Since(killAt))
					return nil
				}
			}
		}
		return fmt.Errorf("no survivor leads shard %d and applies new events (%v)", stateShard, views)
	})
	f.LoadAvg = loadAvg()
	if err != nil {
		return f, nil, err
	}
	r.log.Info("state: failover", "new leader", f.NewLeader, "elected ms", f.ElectedMs, "applies ms", f.AppliesMs)
	rs, err := r.restart(ctx, victim, killAt)
	return f, rs, err
}

// restart starts a killed node and times until /readyz answers and its
// replica has applied what the leader had applied when it was asked.
func (r *stateRun) restart(ctx context.Context, m *member, killedAt time.Time) (*restart, error) {
	rs := &restart{Node: m.id, DownSeconds: time.Since(killedAt).Seconds()}
	start := time.Now()
	if err := m.start(); err != nil {
		return rs, err
	}
	err := poll(ctx, r.wait, 100*time.Millisecond, func() error {
		if err := r.c.checkProcesses(); err != nil {
			return permanent(err)
		}
		if rs.ReadyMs == 0 {
			if err := ready(ctx, m.api); err != nil {
				return err
			}
			rs.ReadyMs = ms(time.Since(start))
		}
		return r.caughtUp(ctx, m, &rs.LeaderIndex)
	})
	rs.LoadAvg = loadAvg()
	if err != nil {
		return rs, fmt.Errorf("restarted %s: %w", m.id, err)
	}
	rs.CaughtUpMs = ms(time.Since(start))
	r.log.Info("state: restarted", "node", m.id, "ready ms", rs.ReadyMs, "caught up ms", rs.CaughtUpMs)
	return rs, nil
}

// caughtUp returns nil once m's replica has applied the index its shard's
// leader reports having applied (asked first), recorded in index.
func (r *stateRun) caughtUp(ctx context.Context, m *member, index *uint64) error {
	ld, err := r.c.stateLeader(ctx)
	if err != nil {
		return err
	}
	lsh, err := localShard(ctx, ld)
	if err != nil {
		return err
	}
	own, err := localShard(ctx, m)
	if err != nil {
		return err
	}
	if own.LastAppliedIndex < lsh.LastAppliedIndex {
		return fmt.Errorf("%s applied %d, the leader %d", m.id, own.LastAppliedIndex, lsh.LastAppliedIndex)
	}
	*index = lsh.LastAppliedIndex
	return nil
}

// catchUp starts a fourth node joining the cluster, kills and removes a
// follower of the shard (a lost node replaced), and times until the new node's replica (sent by the leader as
// a snapshot) has applied what the leader had.
func (r *stateRun) catchUp(ctx context.Context) (*catchUp, error) {
	ld, err := r.c.stateLeader(ctx)
	if err != nil {
		return nil, err
	}
	var old *member
	for _, m := range r.c.alive() {
		if m != ld {
			old = m
		}
	}
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	seed := r.c.members[0]
	n4 := &member{id: "n4", raft: ports[0], api: ports[1], gossip: ports[2], bin: r.bin, env: seed.env, dir: filepath.Join(r.dir, "n4")}
	n4.logPath = n4.dir + ".log"
	n4.args = append([]string{"--id", n4.id, "--data", n4.dir, "--raft-addr", n4.raft, "--api-addr", n4.api, "--gossip-addr", n4.gossip,
		"--nats", r.natsURL, "--join", seed.gossip, "--log-level", "info", "--pprof"}, r.extra...)
	cu := &catchUp{Node: n4.id, Replaces: old.id}
	start := time.Now()
	if err := n4.start(); err != nil {
		return cu, err
	}
	r.c.members = append(r.c.members, n4)
	cl := newClients(seed.api)
	if err := poll(ctx, r.wait, 100*time.Millisecond, func() error {
		if err := r.c.checkProcesses(); err != nil {
			return permanent(err)
		}
		st, err := cl.cluster.GetStatus(ctx, connect.NewRequest(&cepv1.GetStatusRequest{}))
		if err != nil {
			return err
		}
		for _, nd := range st.Msg.Nodes {
			if nd.Id == n4.id {
				return nil
			}
		}
		return fmt.Errorf("%s is not a member yet", n4.id)
	}); err != nil {
		return cu, err
	}
	cu.MemberMs = ms(time.Since(start))
	// the follower it replaces is lost first (and three replicas, not
	// four, hold the state in this machine's memory)
	r.log.Info("state: n4 is a member; a follower killed and removed", "node", old.id, "after ms", cu.MemberMs)
	if err := old.kill(); err != nil {
		return cu, err
	}
	var leaderSnap uint64
	leaderID := ld.id
	if ds := snapshotDirs(shardSnapshots(ld)); len(ds) > 0 {
		leaderSnap = ds[len(ds)-1].Index
	}
	removeAt := time.Now()
	if err := poll(ctx, time.Minute, 500*time.Millisecond, func() error {
		_, err := cl.cluster.RemoveNode(ctx, connect.NewRequest(&cepv1.RemoveNodeRequest{NodeId: old.id}))
		return err
	}); err != nil {
		return cu, fmt.Errorf("remove %s: %w", old.id, err)
	}
	var idx uint64
	err = poll(ctx, r.wait, 100*time.Millisecond, func() error {
		if err := r.c.checkProcesses(); err != nil {
			return permanent(err)
		}
		if cu.OpenedMs == 0 {
			if _, err := localShard(ctx, n4); err != nil {
				return err
			}
			cu.OpenedMs = ms(time.Since(removeAt))
		}
		return r.caughtUp(ctx, n4, &idx)
	})
	cu.LoadAvg = loadAvg()
	if err != nil {
		return cu, err
	}
	cu.CaughtUpMs = ms(time.Since(removeAt))
	// a replica sent the leader's snapshot stores it as its first one,
	// at the leader's index (one of its own would be at any index)
	if ds := snapshotDirs(shardSnapshots(n4)); len(ds) > 0 {
		cu.SnapshotIndex = ds[0].Index
		if ld := r.c.memberByID(leaderID); ld != nil {
			for _, d := range snapshotDirs(shardSnapshots(ld)) {
				cu.Installed = cu.Installed || d.Index == cu.SnapshotIndex
			}
		}
	}
	cu.LeaderSnapshot = leaderSnap
	r.log.Info("state: n4 caught up", "opened ms", cu.OpenedMs, "caught up ms", cu.CaughtUpMs, "snapshot installed", cu.Installed)
	return cu, nil
}

// longestStalls is the longest stall, in ms, over the windows in which
// the leader encoded its snapshot, those in which only followers did, and
// those in which none did (-1 for none such): a window's stall is its
// slowest batch's bucket bound, or the whole window when it applied no
// batch (the leader proposes nothing while it cannot read the state, so
// the histogram alone would miss that stop).
func longestStalls(ws []stallWindow) (leader, followers, none float64) {
	leader, followers, none = -1, -1, -1
	for _, w := range ws {
		v := w.LongestU
		if w.Batches == 0 {
			v = w.Seconds * 1000
		}
		switch {
		case w.Snapshot:
			leader = math.Max(leader, v)
		case len(w.Encoding) > 0:
			followers = math.Max(followers, v)
		default:
			none = math.Max(none, v)
		}
	}
	return leader, followers, none
}

func stallText(v float64) string {
	if v < 0 {
		return "(no such window)"
	}
	return fmt.Sprintf("<= %.0f ms", v)
}

// writeText prints --scale state's figures.
func (s *stateResult) writeText(p func(string, ...any)) {
	p("3 cepnode processes, %d shard(s) x 3 replicas; state: %s of events (%d keys, a LOGIN and a PAYMENT_FAILED of %d bytes each, one partial match per key); steady flow %.0f events/s",
		s.Shards, group(float64(s.TargetBytes)), s.Keys, s.EventBytes, s.FlowRate)
	p("load average: %s at the start, %s at the end", s.LoadAvgStart, s.LoadAvgEnd)
	if b := s.Build; b != nil && b.Seconds > 0 {
		p("built: %s events in %.1f s; the leader holds %s state bytes (cep_pattern_state_bytes), %s partial matches, %s keys",
			group(float64(b.Events)), b.Seconds, group(b.StateBytes), group(b.PartialMatches), group(b.PatternKeys))
		p("  resident: %s; one /metrics scrape (ms): %s", strings.Join(b.RSS, ", "), strings.Join(b.ScrapeMs, ", "))
		if b.Own != nil {
			printOwn(p, b.Own)
		}
	}
	for _, sn := range s.Snapshots {
		role := "follower"
		if sn.Leader {
			role = "leader"
		}
		p("snapshot %-3s (%s) at index %d, %s bytes: encode %.2f s (applying waits), write %.2f s, total %.2f s (load avg %s)", sn.Node, role, sn.Index, group(float64(sn.Bytes)), sn.EncodeS, sn.PersistS, sn.EncodeS+sn.PersistS, sn.LoadAvg)
	}
	if st := s.Stall; st != nil && len(st.Windows) > 0 {
		p("leader's apply latency (cep_raft_apply_seconds, proposal to applied, per ingest batch), by window; target: no stall over %s", stallTarget)
		for i, w := range st.Windows {
			tag := ""
			if len(w.Encoding) > 0 {
				tag = "  <- encoding a snapshot: " + strings.Join(w.Encoding, ", ")
				if w.Snapshot {
					tag += " (the leader among them)"
				}
			}
			if w.LeaderMoved {
				tag += "  (" + w.Leader + " lost the leadership in it)"
			}
			if w.Batches == 0 {
				p("  window %2d, %4.1f s, %s: no batch applied: the leader proposed or applied nothing for the whole window%s", i, w.Seconds, w.Leader, tag)
				continue
			}
			p("  window %2d, %4.1f s, %s: %5.0f batches, slowest in (%g, %g] ms, %2.0f over %g ms%s", i, w.Seconds, w.Leader, w.Batches, w.LongestL, w.LongestU, w.Over, w.OverMs, tag)
		}
		leader, followers, none := longestStalls(st.Windows)
		p("  longest stall (a batch's bucket bound, or a whole window without a batch): while the leader encodes its snapshot %s %s; while only followers encode theirs %s; reference, while none does: %s",
			stallText(leader), mark(leader >= 0 && leader <= float64(stallTarget.Milliseconds())), stallText(followers), stallText(none))
		if st.Own != nil {
			printOwn(p, st.Own)
		}
	}
	fo := func(name string, f *failR) {
		if f != nil {
			p("failover, %s: killed %s; %s leads after %.0f ms, applies new events after %.0f ms (load avg %s)", name, f.Victim, f.NewLeader, f.ElectedMs, f.AppliesMs, f.LoadAvg)
		}
	}
	rs := func(name string, r *restart) {
		if r != nil {
			p("restart, %s: %s (down %.1f s) ready after %.0f ms, its replica caught up (index %d) after %.0f ms (load avg %s)", name, r.Node, r.DownSeconds, r.ReadyMs, r.LeaderIndex, r.CaughtUpMs, r.LoadAvg)
		}
	}
	fo("empty state", s.FailoverEmpty)
	fo("with the state", s.Failover)
	rs("empty state", s.RestartEmpty)
	rs("with the state", s.Restart)
	if c := s.CatchUp; c != nil {
		p("new replica: %s a member after %.0f ms; %s killed and removed: %s holds the replica after %.0f ms, caught up after %.0f ms (its first snapshot at index %d, the leader's last at the removal %d; it is the leader's: %v; load avg %s)",
			c.Node, c.MemberMs, c.Replaces, c.Node, c.OpenedMs, c.CaughtUpMs, c.SnapshotIndex, c.LeaderSnapshot, c.Installed, c.LoadAvg)
	}
	for _, pr := range s.Profiles {
		p("CPU profile of the leader over the window of its snapshot: %s", pr)
	}
	for _, n := range s.Notes {
		p("note: %s", n)
	}
}
