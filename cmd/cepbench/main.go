// Command cepbench measures the cluster end to end: events published to
// JetStream, matched by the cluster (benchmark 3 of nfa/bench_test.go,
// FollowedByOneOrMore), records published back to JetStream.
//
//	go run ./cmd/cepbench                      # one node in process, 5,000,000 events
//	go run ./cmd/cepbench --nodes 3            # three cepnode processes, with failover
//	go run ./cmd/cepbench --events 200000 --json
//
// In one run, against an embedded NATS server in this process:
//
//  1. reference: the events are published to a plain stream and read back
//     with a pull consumer (Fetch in batches, explicit acks); its rate is
//     the events over the time from the first Fetch to the last ack;
//  2. throughput: the same events are published (asynchronously, bounded in
//     flight) to the source "bench". With --mode backlog (the default, the
//     reference's conditions: the stream holds the events before the reader
//     starts) they are all published first and the pattern is deployed
//     after, from the start of the stream; the rate is the events over the time from the deploy to the
//     cluster having applied all of them. With --mode live the pattern is
//     deployed first and the rate is the events over the time from the first
//     publish to all applied, publishing and processing sharing the machine.
//     "Applied" is read from the nodes' /metrics (cep_events_total, each
//     shard once, from its leader); the ratio to the reference is reported
//     against the targets (one node >= 0.70, three replicas >= 0.30), and
//     the CPU per event of its own processes (one node <= 2x, three <= 5x);
//  3. latency: events are published at --rate (default half the measured
//     throughput of --mode live; --mode backlog skips this phase and the
//     next unless --rate is given: half the backlog rate is more than the
//     cluster sustains while publishing) for --duration; for every match
//     record, the time from the publish of its last event (the record's
//     "end" is that event's ts, which is its index + 1) to the record's
//     arrival on cep.out.<pattern>;
//  4. failover (three nodes): while publishing at the same rate, the leader
//     of shard 1 is killed with SIGKILL; the time from the kill to the first
//     match of shard 1's key groups whose last event was published after
//     the kill, against 2 x election timeout + 0.5 s; the node is restarted
//     and the run checks that every event is applied.
//
// Each phase prints the CPU it cost: the machine's (/proc/stat, every
// process) and the benchmark's own processes' (/proc/PID/stat: this
// process, with the NATS server, the publisher, the reference consumer and
// an in-process node, and each cepnode process), per event and over the
// reference's.
//
// --scale measures cost at scale instead, each run bounded:
//
//	go run ./cmd/cepbench --scale keys       # offline: events/s and live heap per key, 1k/100k/1M keys
//	go run ./cmd/cepbench --scale patterns   # offline: events/s with 1, 10 and 100 patterns on one source
//	go run ./cmd/cepbench --scale idle       # CPU of 3 idle cepnode processes, 32 shards x 3 replicas
//	go run ./cmd/cepbench --scale state      # 1 GB of shard state: snapshot, apply stall, restart, catch-up, failover
//
// Everything (NATS store, node data, logs) lives in a temporary directory,
// removed at the end unless --keep.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"connectrpc.com/connect"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/cluster"
	"github.com/cepcluster/cep/keygroup"
	"github.com/cepcluster/cep/shard"
)

const (
	sourceName  = "bench"
	patternName = "bench-fbom"
	keyGroups   = 256 // the cluster default
)

type options struct {
	nodes          int
	events         int
	mode           string
	join           int
	shards         int
	sourceKey      string
	keys           int
	window         int
	rate           float64
	duration       time.Duration
	inflight       int
	refBatch       int
	refAckEach     bool
	refRuns        int
	failover       bool
	failWait       time.Duration
	failRuns       int
	warmup         time.Duration
	keep           bool
	jsonOut        bool
	dir            string
	cepnode        string
	nodeProcs      int // GOMAXPROCS of node processes (0: Go's default)
	cpuprofile     string
	nodeProfileFor time.Duration
	timeout        time.Duration
	stall          time.Duration
	nodeLogLevel   string

	patterns     int
	scale        string // "": the cluster benchmark; keys, patterns or idle
	scalePattern string
	counts       string
	memprofile   string
	idleFor      time.Duration
	idleSettle   time.Duration

	stateSize    string // --scale state
	eventBytes   int
	stateRate    float64
	stateWait    time.Duration
	stallWindow  time.Duration
	nodeMemLimit string
}

// scaleCounts is --scale-counts, or the mode's default.
func (o *options) scaleCounts() string {
	switch {
	case o.counts != "":
		return o.counts
	case o.scale == "keys":
		return "1000,100000,1000000"
	}
	return "1,10,100"
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintf(os.Stderr, "cepbench: %v\n", err)
		os.Exit(1)
	}
}

func parseFlags(args []string, stderr io.Writer) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("cepbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&o.nodes, "nodes", 1, "1: one node in this process; 3: three cepnode processes (adds the failover measurement)")
	fs.IntVar(&o.events, "events", 5_000_000, "events of the reference and throughput phases")
	fs.IntVar(&o.join, "join", 0, "after the throughput phase, start this many nodes in process that join the (in-process) node, and time until they hold replicas and the cluster has split its shards to one per node")
	fs.StringVar(&o.mode, "mode", "backlog", "throughput phase: backlog (publish everything, then deploy the pattern from the start of the stream and time the processing) or live (deploy, then time from the first publish)")
	fs.IntVar(&o.keys, "keys", 1000, "distinct keys (uniform)")
	fs.StringVar(&o.sourceKey, "source-key", "e.k", "the source's partition key; another one (or \"\") makes the pattern (keyed by e.k) read the source re-keyed by one shard")
	fs.IntVar(&o.shards, "shards", 0, "shards of the cluster (default: the node's default, one per node)")
	fs.IntVar(&o.window, "window", 200, "pattern window, in events of one key (within = window x keys ms)")
	fs.Float64Var(&o.rate, "rate", 0, "events/s of the latency and failover phases (default: half the measured throughput in --mode live; --mode backlog skips them unless this is set)")
	fs.DurationVar(&o.duration, "duration", 20*time.Second, "length of the latency phase")
	fs.IntVar(&o.inflight, "batch", 4096, "publish: maximum asynchronous publishes awaiting their ack")
	fs.IntVar(&o.refBatch, "ref-batch", 1000, "reference consumer: messages per Fetch")
	fs.IntVar(&o.refRuns, "ref-runs", 3, "reference consumer: how many times to read the stream (the median rate is the reference)")
	fs.BoolVar(&o.refAckEach, "ref-ack-each", false, "reference consumer: ack every message (AckExplicit) instead of the last of each batch (AckAll)")
	fs.BoolVar(&o.failover, "failover", true, "with 3 nodes: measure the failover of shard 1's leader")
	fs.IntVar(&o.failRuns, "failover-runs", 3, "with 3 nodes: how many times to kill (and restart) shard 1's leader")
	fs.DurationVar(&o.failWait, "failover-wait", 30*time.Second, "longest wait for shard 1's first output after the kill")
	fs.DurationVar(&o.warmup, "failover-warmup", 5*time.Second, "publishing before the kill")
	fs.BoolVar(&o.keep, "keep", false, "keep the data directory (NATS store, node data and logs)")
	fs.BoolVar(&o.jsonOut, "json", false, "print the results as JSON on stdout (progress stays on stderr)")
	fs.StringVar(&o.dir, "dir", "", "where to create the run's data directory cepbench-* (default: the system temporary directory)")
	fs.IntVar(&o.nodeProcs, "node-gomaxprocs", -1, "with 3 nodes: GOMAXPROCS of each node process; -1: the machine's CPUs divided among the nodes, rounded up (what Go sets for a container limited to that share), 0: Go's default (all CPUs)")
	fs.StringVar(&o.cepnode, "cepnode", "", "cepnode binary for --nodes 3 (default: go build ./cmd/cepnode)")
	fs.StringVar(&o.cpuprofile, "cpuprofile", "", "write a CPU profile of the throughput phase to this file (with --nodes 1 it includes the node; with --nodes 3 it is the benchmark process's, NATS server included, and each node's profile over its first --node-profile-for goes to FILE.n1, FILE.n2, FILE.n3); with --scale idle, of node n1 over each sample, to FILE.0 and FILE.1")
	fs.DurationVar(&o.nodeProfileFor, "node-profile-for", 10*time.Second, "with --nodes 3 and --cpuprofile: length of each node's profile from the start of the throughput phase")
	fs.DurationVar(&o.timeout, "timeout", time.Hour, "limit for the whole run")
	fs.DurationVar(&o.stall, "stall", 60*time.Second, "fail when the applied count does not move for this long")
	fs.StringVar(&o.nodeLogLevel, "node-log-level", "warn", "log level of the nodes (their logs are files in the data directory: n1.log ..., n1-inprocess.log)")
	fs.IntVar(&o.patterns, "patterns", 1, "with --mode live: deploy this many copies of the pattern on the source (each with its own name and output)")
	fs.StringVar(&o.scale, "scale", "", "instead of the cluster benchmark: keys (offline: events/s and live heap per key, one partial match per key, for each of --scale-counts keys), patterns (offline: events/s with each of --scale-counts copies of the pattern over --events events of --keys keys), idle (the CPU of 3 cepnode processes with --shards shards x 3 replicas and no traffic), filters (NATS alone: the CPU of reading a source stream of --events events split among --shards shards (default 3) in several consumer and subject layouts) or state (3 cepnode processes, one shard x 3 replicas holding --state-size of events in partial matches of --scale-pattern: snapshot time and the longest apply stall meanwhile, restart, a new replica's catch-up, failover against an empty state)")
	fs.StringVar(&o.scalePattern, "scale-pattern", "examples/login-fail-logout.yaml", "--scale keys and patterns: the pattern file (relative to the module root when not found here)")
	fs.StringVar(&o.counts, "scale-counts", "", "--scale keys: key counts (default 1000,100000,1000000); patterns: pattern counts (default 1,10,100)")
	fs.StringVar(&o.memprofile, "memprofile", "", "--scale keys: write a heap profile after the last count to this file")
	fs.DurationVar(&o.idleFor, "idle-for", 30*time.Second, "--scale idle: length of each sample")
	fs.DurationVar(&o.idleSettle, "idle-settle", 10*time.Second, "--scale idle: wait before each sample (elections, deploys)")
	fs.StringVar(&o.stateSize, "state-size", "1GB", "--scale state: bytes of events the shard holds in partial matches (cep_pattern_state_bytes), such as 50MB or 1GB")
	fs.IntVar(&o.eventBytes, "event-bytes", 1024, "--scale state: size of each event of the state (padded with a note field)")
	fs.Float64Var(&o.stateRate, "state-rate", 1000, "--scale state: events/s of the steady flow that runs throughout")
	fs.DurationVar(&o.stateWait, "state-wait", 20*time.Minute, "--scale state: longest wait of each step (the state applied, the snapshots, a failover, a restart, a catch-up)")
	fs.DurationVar(&o.stallWindow, "stall-window", 10*time.Second, "--scale state: length of each window of the leader's apply latency (and, with --cpuprofile, of each profile of the leader: FILE.snapshotN, kept for the windows of its snapshot)")
	fs.StringVar(&o.nodeMemLimit, "node-memlimit", "", "--scale state: GOMEMLIMIT of each node process (such as 4GiB; default none)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: go run ./cmd/cepbench [flags]\n\nBenchmarks the cluster through JetStream: throughput against a plain\nJetStream consumer, publish-to-match latency and (3 nodes) failover.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	switch {
	case fs.NArg() > 0:
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	case o.mode != "backlog" && o.mode != "live":
		return nil, fmt.Errorf("--mode must be backlog or live")
	case o.join < 0 || o.join > 0 && o.nodes != 1:
		return nil, fmt.Errorf("--join N starts N nodes joining the in-process node: it needs --nodes 1")
	case o.scale != "" && o.scale != "keys" && o.scale != "patterns" && o.scale != "idle" && o.scale != "filters" && o.scale != "state":
		return nil, fmt.Errorf("--scale must be keys, patterns, idle, filters or state")
	case o.scale == "state" && (o.shards < 0 || o.eventBytes < 100 || o.eventBytes > 1<<20 || o.stateRate <= 0 || o.stateWait <= 0 || o.stallWindow < time.Second):
		return nil, fmt.Errorf("--scale state: --event-bytes must be in [100, 1048576], --state-rate and --state-wait positive, --stall-window at least 1s")
	case o.scale == "idle" && (o.shards < 0 || o.idleFor <= 0 || o.idleSettle < 0):
		return nil, fmt.Errorf("--scale idle: --shards must not be negative, --idle-for positive")
	case o.patterns < 1 || o.patterns > 1 && o.mode != "live":
		return nil, fmt.Errorf("--patterns must be at least 1, and more than 1 needs --mode live (a backlog is read from the start by one pattern only)")
	case o.nodes != 1 && o.nodes != 3:
		return nil, fmt.Errorf("--nodes must be 1 or 3")
	case o.events < 1000:
		return nil, fmt.Errorf("--events must be at least 1000")
	case o.keys < 1 || o.keys > 65535:
		return nil, fmt.Errorf("--keys must be in [1, 65535]")
	case o.window < 1 || o.inflight < 1 || o.refBatch < 1 || o.refRuns < 1:
		return nil, fmt.Errorf("--window, --batch, --ref-batch and --ref-runs must be positive")
	case o.rate < 0:
		return nil, fmt.Errorf("--rate must not be negative")
	case o.nodeProcs < -1:
		return nil, fmt.Errorf("--node-gomaxprocs must be -1, 0 or positive")
	case o.failRuns < 1:
		return nil, fmt.Errorf("--failover-runs must be at least 1")
	case !validLevel(o.nodeLogLevel):
		return nil, fmt.Errorf("--node-log-level: want debug, info, warn or error")
	}
	if o.scale == "idle" {
		o.nodes = 3
		if o.shards == 0 {
			o.shards = 32
		}
	}
	if o.scale == "state" {
		if _, err := parseSize(o.stateSize); err != nil {
			return nil, fmt.Errorf("--state-size: %w", err)
		}
		o.nodes = 3
		if o.shards == 0 {
			o.shards = 1
		}
		if o.shards != 1 {
			// the state, its checks and the stall are read off shard 1
			return nil, fmt.Errorf("--scale state measures one shard holding the whole state: --shards must be 1")
		}
	}
	switch {
	case o.nodes == 1:
		o.nodeProcs = 0 // the node runs in the benchmark's process
	case o.nodeProcs == -1:
		o.nodeProcs = (runtime.NumCPU() + o.nodes - 1) / o.nodes
	}
	return o, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))

	rep := &Report{
		Command: commandLine(args), Revision: revision(), Date: time.Now().UTC().Format(time.RFC3339), Machine: machineInfo(),
		Setup: setupInfo{Nodes: o.nodes, InProcess: o.nodes == 1, Shards: cmp.Or(o.shards, o.nodes), Replicas: min(3, o.nodes), NodeProcs: o.nodeProcs,
			Events: o.events, Keys: o.keys, Patterns: o.patterns, WindowEvents: o.window, WithinMs: o.window * o.keys, Pattern: patternName, Inflight: o.inflight},
	}
	// the report is printed whatever happens, with what was measured
	defer func() {
		if err != nil {
			rep.Error = err.Error()
		}
		if o.jsonOut {
			rep.writeJSON(stdout)
		} else {
			rep.writeText(stdout)
		}
	}()

	if o.dir != "" {
		if err := os.MkdirAll(o.dir, 0o755); err != nil {
			return err
		}
	}
	dir, err := os.MkdirTemp(o.dir, "cepbench-")
	if err != nil {
		return err
	}
	defer func() {
		if o.keep {
			log.Info("data kept", "dir", dir)
		} else if err := os.RemoveAll(dir); err != nil {
			log.Warn("remove data dir", "dir", dir, "err", err)
		}
	}()
	log.Info("data directory", "dir", dir)

	if o.scale != "" {
		return runScale(ctx, o, rep, dir, func() (string, func(), error) {
			ns, err := cluster.StartEmbeddedNATS(filepath.Join(dir, "nats"), "127.0.0.1", -1, nil)
			if err != nil {
				return "", nil, err
			}
			return ns.ClientURL(), func() { ns.Shutdown(); ns.WaitForShutdown() }, nil
		}, log)
	}
	ns, err := cluster.StartEmbeddedNATS(filepath.Join(dir, "nats"), "127.0.0.1", -1, nil)
	if err != nil {
		return err
	}
	defer func() {
		ns.Shutdown()
		ns.WaitForShutdown()
	}()
	natsURL := ns.ClientURL()
	log.Info("embedded NATS", "url", natsURL)
	pubNC, err := nats.Connect(natsURL, nats.Name("cepbench-publisher"))
	if err != nil {
		return err
	}
	defer pubNC.Close()
	obsNC, err := nats.Connect(natsURL, nats.Name("cepbench-observer"))
	if err != nil {
		return err
	}
	defer obsNC.Close()
	pub, err := newPublisher(pubNC, o.inflight)
	if err != nil {
		return err
	}
	obsJS, err := jetstream.New(obsNC)
	if err != nil {
		return err
	}

	gen := newGenerator(o.keys)
	t0 := time.Now()
	evs := gen.gen(o.events)
	log.Info("events generated", "events", evs.len(), "bytes", len(evs.data), "took", time.Since(t0).Round(time.Millisecond))

	// 1. reference
	ref, err := runReference(ctx, pubNC, pub, evs, o.keys, o.refBatch, o.refAckEach, o.refRuns, log)
	if err != nil {
		return fmt.Errorf("reference: %w", err)
	}
	rep.Ref = &ref
	log.Info("reference done", "events/s", int(ref.EventsPerSec), "publish events/s", int(ref.PublishEventsPerSec))

	// the cluster
	var c *benchCluster
	var nodeLog *slog.Logger
	if o.nodes == 1 {
		var closeLog func()
		nodeLog, closeLog, err = nodeLogger(dir, o.nodeLogLevel)
		if err != nil {
			return err
		}
		defer closeLog()
		c, err = startInProcess(ctx, dir, natsURL, o.shards, log, nodeLog)
		if err != nil {
			return fmt.Errorf("start node: %w", err)
		}
	} else {
		bin := o.cepnode
		if bin == "" {
			log.Info("building cepnode")
			if bin, err = buildCepnode(ctx, dir); err != nil {
				return err
			}
		}
		if c, err = startProcesses(bin, dir, natsURL, o.nodes, o.shards, o.nodeProcs, o.nodeLogLevel, log); err != nil {
			return fmt.Errorf("start nodes: %w", err)
		}
	}
	defer c.close()
	if err := c.waitReady(ctx, 60*time.Second); err != nil {
		return fmt.Errorf("nodes not ready: %w", err)
	}
	spec := patternSpec(patternName, sourceName, o.keys, o.window)
	subj := subjects(sourceName, o.keys)
	var thr *throughput
	if o.mode == "live" {
		if err := setup(ctx, c, sourceName, o.sourceKey, spec); err != nil {
			return err
		}
		if err := deployCopies(ctx, c, o); err != nil {
			return err
		}
		log.Info("cluster ready", "nodes", o.nodes, "pattern", patternName)
		// 2. throughput
		thr, err = measureThroughput(ctx, o, c, pub, evs, subj, log)
	} else {
		if err := setupSource(ctx, c, sourceName, o.sourceKey); err != nil {
			return err
		}
		log.Info("cluster ready", "nodes", o.nodes)
		// 2. throughput
		thr, err = measureBacklog(ctx, o, c, pub, evs, subj, spec, log)
	}
	if thr != nil {
		rep.Thru = thr
		thr.RatioToReference = thr.EventsPerSec / ref.EventsPerSec
		// the targets: one node as fast as 0.70 of the reference at no
		// more than twice its CPU per event; three replicas 0.30 at five times
		thr.Target, thr.CPUTarget = 0.70, 2.0
		if o.nodes > 1 {
			thr.Target, thr.CPUTarget = 0.30, 5.0
		}
		thr.TargetMet = thr.RatioToReference >= thr.Target
		if thr.Own != nil && ref.Own != nil && ref.Own.MicrosPerEvent > 0 {
			thr.OwnCPURatio = thr.Own.MicrosPerEvent / ref.Own.MicrosPerEvent
			thr.CPUTargetMet = thr.OwnCPURatio <= thr.CPUTarget
		}
		if thr.CPU != nil && ref.CPU != nil && ref.CPU.MicrosPerEvent > 0 {
			thr.MachineCPURatio = thr.CPU.MicrosPerEvent / ref.CPU.MicrosPerEvent
		}
	}
	if err != nil {
		return fmt.Errorf("throughput: %w", err)
	}
	evs = nil // the rest of the run does not need them
	applied := o.events

	// nodes join
	if o.join > 0 {
		jr, err := measureJoin(ctx, c, o.join, natsURL, dir, nodeLog, log)
		rep.Join = jr
		if err != nil {
			return fmt.Errorf("join: %w", err)
		}
		return nil // the latency phases assume the cluster they started with
	}

	// 3. latency
	rate := o.rate
	if rate == 0 && o.mode != "live" {
		// half the backlog rate is more than the cluster sustains while
		// also storing what is published: latency and failover would
		// measure a growing queue
		rep.Skipped = "latency and failover: not measured in --mode backlog (half its rate overloads the cluster while publishing); use --mode live or --rate"
		return nil
	}
	if rate == 0 {
		rate = float64(int(thr.EventsPerSec / 2))
	}
	lat, err := measureLatency(ctx, o, c, pub, obsJS, gen, subj, rate, &applied, log)
	if lat.res != nil {
		rep.Latency = lat.res
	}
	if err != nil {
		return fmt.Errorf("latency: %w", err)
	}

	// 4. failover
	if o.nodes > 1 && o.failover {
		fr, err := measureFailover(ctx, o, c, pub, lat, gen, subj, rate, &applied, log)
		if fr != nil {
			rep.Fail = fr
		}
		lat.stop()
		if err != nil {
			return fmt.Errorf("failover: %w", err)
		}
	}
	lat.stop()
	return nil
}

// deployCopies deploys --patterns - 1 more copies of the pattern, named
// <pattern>-1 ..., and waits until every shard runs them all.
func deployCopies(ctx context.Context, c *benchCluster, o *options) error {
	for i := 1; i < o.patterns; i++ {
		if err := deploy(ctx, c, patternSpec(fmt.Sprintf("%s-%d", patternName, i), sourceName, o.keys, o.window), false); err != nil {
			return fmt.Errorf("copy %d: %w", i, err)
		}
	}
	return poll(ctx, 2*time.Minute, 100*time.Millisecond, func() error {
		for _, m := range c.alive() {
			res, err := newClients(m.api).cluster.ListShards(ctx, connect.NewRequest(&cepv1.ListShardsRequest{}))
			if err != nil {
				return err
			}
			for _, s := range res.Msg.Shards {
				if int(s.Patterns) < o.patterns {
					return fmt.Errorf("shard %d on %s runs %d of %d patterns", s.Id, m.id, s.Patterns, o.patterns)
				}
			}
		}
		return nil
	})
}

// logCounters logs every node's cep_events_total per shard (and whether it
// leads it): a restarted replica counts only what it applied after its
// snapshot.
func logCounters(ctx context.Context, c *benchCluster, log *slog.Logger) {
	var parts []string
	for _, m := range c.alive() {
		ms, err := scrape(ctx, m.api)
		if err != nil {
			continue
		}
		var shards []string
		for sh := range ms["cep_events_total"] {
			shards = append(shards, sh)
		}
		sort.Strings(shards)
		for _, sh := range shards {
			lead := ""
			if ms["cep_shard_leader"][sh] == 1 {
				lead = "*"
			}
			parts = append(parts, fmt.Sprintf("%s/%s%s=%.0f", m.id, sh, lead, ms["cep_events_total"][sh]))
		}
	}
	log.Info("events applied per node/shard (* leader)", "counters", strings.Join(parts, " "))
}

func validLevel(s string) bool {
	var l slog.Level
	return l.UnmarshalText([]byte(s)) == nil
}

// nodeLogger returns the logger of in-process nodes: a file in dir.
func nodeLogger(dir, level string) (*slog.Logger, func(), error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, nil, fmt.Errorf("--node-log-level: %v", err)
	}
	f, err := os.Create(filepath.Join(dir, "n1-inprocess.log"))
	if err != nil {
		return nil, nil, err
	}
	return slog.New(slog.NewTextHandler(f, &slog.HandlerOptions{Level: l})), func() { f.Close() }, nil
}

// drainOutbox waits until every shard's outbox is published, records the
// time and the counters, and checks every event was applied once.
func drainOutbox(ctx context.Context, o *options, c *benchCluster, res *throughput, start time.Time, log *slog.Logger) error {
	want := float64(res.Events)
	m, at, err := waitApplied(ctx, c, want, true, 100*time.Millisecond, o.stall, o.timeout, nil, func(m metrics) {
		log.Info("throughput: publishing the outbox", "outbox", int(m.outbox))
	})
	if err != nil {
		return fmt.Errorf("outbox: %w", err)
	}
	res.OutboxDrainedSeconds = at.Sub(start).Seconds()
	res.Matches, res.Timeouts, res.DeadLetters = int64(m.matches), int64(m.timeouts), int64(m.dead)
	if m.events != want {
		return fmt.Errorf("the cluster applied %.0f events, %d were published", m.events, res.Events)
	}
	return nil
}

// startProfile starts a CPU profile of the throughput phase into path
// (none when it is empty) and returns the function that stops it, safe to
// call more than once.
func startProfile(ctx context.Context, path string, nodesFor time.Duration, c *benchCluster, res *throughput) (func(), error) {
	if path == "" {
		return func() {}, nil
	}
	nodesDone := profileNodes(ctx, path, nodesFor, c)
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	res.CPUProfile = path
	return sync.OnceFunc(func() {
		pprof.StopCPUProfile()
		f.Close()
		nodesDone()
	}), nil
}

// profileNodes profiles each node running as a process of its own (they
// run with --pprof) over d, into path.ID, and returns the function that
// waits for the profiles; a node's failure to give one is logged.
func profileNodes(ctx context.Context, path string, d time.Duration, c *benchCluster) func() {
	var wg sync.WaitGroup
	for _, m := range c.members {
		if m.node != nil || m.api == "" {
			continue
		}
		wg.Go(func() {
			if err := nodeProfile(ctx, m.api, d, path+"."+m.id); err != nil {
				c.log.Warn("node profile", "node", m.id, "err", err)
			}
		})
	}
	return wg.Wait
}

func measureThroughput(ctx context.Context, o *options, c *benchCluster, pub *publisher, evs *events, subj []string, log *slog.Logger) (*throughput, error) {
	res := &throughput{Events: evs.len(), Mode: "live"}
	stopProfile, err := startProfile(ctx, o.cpuprofile, o.nodeProfileFor, c, res)
	if err != nil {
		return nil, err
	}
	defer stopProfile()
	log.Info("throughput: publishing", "events", evs.len(), "inflight", o.inflight)
	type pubResult struct {
		d   time.Duration
		err error
	}
	pctx, pcancel := context.WithCancel(ctx)
	defer pcancel()
	pubDone := make(chan pubResult, 1)
	start, cpu, own := time.Now(), startCPU(), startOwn(c)
	go func() {
		d, err := pub.publishAll(pctx, evs, subj)
		pubDone <- pubResult{d, err}
	}()
	var pr *pubResult
	check := func() error {
		if pr == nil {
			select {
			case r := <-pubDone:
				pr = &r
				log.Info("throughput: all published and acknowledged", "took", r.d.Round(time.Millisecond))
			default:
			}
		}
		if pr != nil && pr.err != nil {
			return fmt.Errorf("publish: %w", pr.err)
		}
		return nil
	}
	progress := func(m metrics) {
		log.Info("throughput: applying", "applied", int(m.events), "of", evs.len(), "outbox", int(m.outbox), "elapsed", time.Since(start).Round(time.Second))
	}
	want := float64(evs.len())
	_, at, err := waitApplied(ctx, c, want, false, 50*time.Millisecond, o.stall, o.timeout, check, progress)
	if err != nil {
		return nil, err
	}
	d := at.Sub(start)
	res.CPU = cpu.stop(evs.len())
	if res.Own, err = own.stop(evs.len()); err != nil {
		log.Warn("throughput: own CPU unknown", "err", err)
	}
	stopProfile()
	res.AppliedSeconds = d.Seconds()
	res.EventsPerSec = want / d.Seconds()
	if o.cpuprofile != "" {
		res.Breakdown = breakdowns(o.cpuprofile, o.nodeProfileFor, c, res)
	}
	log.Info("throughput: all applied", "took", d.Round(time.Millisecond), "events/s", int(res.EventsPerSec))
	if pr == nil {
		select {
		case r := <-pubDone:
			pr = &r
		case <-time.After(2 * time.Minute):
			return res, errors.New("publisher did not finish 2 minutes after everything was applied")
		case <-ctx.Done():
			return res, ctx.Err()
		}
	}
	if pr.err != nil {
		return res, pr.err
	}
	res.PublishSeconds = pr.d.Seconds()
	res.PublishEventsPerSec = want / pr.d.Seconds()
	return res, drainOutbox(ctx, o, c, res, start, log)
}

// measureBacklog publishes every event to the source before any pattern
// reads it, then deploys the pattern and times the cluster draining the
// stream: the conditions of the reference consumer.
func measureBacklog(ctx context.Context, o *options, c *benchCluster, pub *publisher, evs *events, subj []string, spec string, log *slog.Logger) (*throughput, error) {
	res := &throughput{Events: evs.len(), Mode: "backlog"}
	log.Info("throughput: publishing the backlog", "events", evs.len(), "inflight", o.inflight)
	d, err := pub.publishAll(ctx, evs, subj)
	if err != nil {
		return nil, fmt.Errorf("publish: %w", err)
	}
	res.PublishSeconds = d.Seconds()
	res.PublishEventsPerSec = float64(evs.len()) / d.Seconds()
	log.Info("throughput: backlog published", "took", d.Round(time.Millisecond), "events/s", int(res.PublishEventsPerSec))
	stopProfile, err := startProfile(ctx, o.cpuprofile, o.nodeProfileFor, c, res)
	if err != nil {
		return nil, err
	}
	defer stopProfile()
	start, cpu, own := time.Now(), startCPU(), startOwn(c)
	// the pattern reads what was published before it, as the reference
	// consumer does
	if err := deploy(ctx, c, spec, true); err != nil {
		return nil, err
	}
	log.Info("throughput: pattern deployed", "took", time.Since(start).Round(time.Millisecond))
	want := float64(evs.len())
	_, at, err := waitApplied(ctx, c, want, false, 50*time.Millisecond, o.stall, o.timeout, nil, func(m metrics) {
		log.Info("throughput: applying", "applied", int(m.events), "of", evs.len(), "outbox", int(m.outbox), "elapsed", time.Since(start).Round(time.Second))
	})
	if err != nil {
		return nil, err
	}
	res.CPU = cpu.stop(evs.len())
	if res.Own, err = own.stop(evs.len()); err != nil {
		log.Warn("throughput: own CPU unknown", "err", err)
	}
	stopProfile()
	res.AppliedSeconds = at.Sub(start).Seconds()
	res.EventsPerSec = want / res.AppliedSeconds
	if o.cpuprofile != "" {
		res.Breakdown = breakdowns(o.cpuprofile, o.nodeProfileFor, c, res)
	}
	log.Info("throughput: all applied", "took", at.Sub(start).Round(time.Millisecond), "events/s", int(res.EventsPerSec))
	return res, drainOutbox(ctx, o, c, res, start, log)
}

// latencyRun follows the output records through the latency and failover
// phases.
type latencyRun struct {
	res  *latency
	base time.Time
	stop func()

	mu      sync.Mutex
	lp      *pacer
	samples []time.Duration
	fo      atomic.Pointer[failoverWatch]
	markers atomic.Pointer[markerWatch]
}

func (l *latencyRun) observe(r *outRecord, at time.Time) {
	if r.Type != "match" {
		return
	}
	if isMarker(r.Key) {
		if w := l.markers.Load(); w != nil {
			w.observe(r.Key)
		}
		return
	}
	idx := int(r.End) - 1
	if l.lp.contains(idx) {
		if t, ok := l.lp.published(idx); ok {
			l.mu.Lock()
			l.samples = append(l.samples, at.Sub(l.base)-t)
			l.mu.Unlock()
		}
		return
	}
	if fo := l.fo.Load(); fo != nil {
		fo.observe(r, idx, at)
	}
}

func measureLatency(ctx context.Context, o *options, c *benchCluster, pub *publisher, js jetstream.JetStream, gen *generator, subj []string, rate float64, applied *int, log *slog.Logger) (*latencyRun, error) {
	l := &latencyRun{base: time.Now(), stop: func() {}}
	n := max(1, int(rate*o.duration.Seconds()))
	l.lp = newPacer(gen.gen(n), subj, rate, l.base)
	stop, err := watchOutputs(ctx, js, patternName, l.observe)
	if err != nil {
		return l, fmt.Errorf("follow the output: %w", err)
	}
	l.stop = sync.OnceFunc(stop)
	log.Info("latency: publishing", "rate", int(rate), "for", o.duration, "events", n)
	sent, elapsed, err := l.lp.run(ctx, pub)
	if err != nil {
		return l, err
	}
	*applied += sent
	res := &latency{RateTarget: rate, RateAchieved: float64(sent) / elapsed.Seconds(), Seconds: elapsed.Seconds(), Events: sent}
	// every event applied and every record published, then a moment for
	// the last records to arrive
	if _, _, err := waitApplied(ctx, c, float64(*applied), true, 50*time.Millisecond, o.stall, 5*time.Minute, nil, nil); err != nil {
		return l, err
	}
	time.Sleep(500 * time.Millisecond)
	l.mu.Lock()
	s := append([]time.Duration(nil), l.samples...)
	l.mu.Unlock()
	sortDurations(s)
	res.Matches = len(s)
	if len(s) > 0 {
		res.P50Ms, res.P90Ms, res.P99Ms, res.MaxMs = ms(percentile(s, 0.50)), ms(percentile(s, 0.90)), ms(percentile(s, 0.99)), ms(s[len(s)-1])
	}
	l.res = res
	log.Info("latency done", "matches", res.Matches, "p50 ms", res.P50Ms, "p99 ms", res.P99Ms, "achieved rate", int(res.RateAchieved))
	if len(s) == 0 {
		return l, errors.New("no match records received")
	}
	return l, nil
}

// failoverWatch waits for the first match of the victim shard's key
// groups whose last event was published after the kill.
type failoverWatch struct {
	pc          *pacer
	first, last int
	killIdx     atomic.Int64 // global index of the first event published after the kill; -1 before
	once        sync.Once
	got         chan time.Time
}

func (f *failoverWatch) observe(r *outRecord, idx int, at time.Time) {
	k := f.killIdx.Load()
	if k < 0 || idx < int(k) || !f.pc.contains(idx) {
		return
	}
	if kg := keygroup.OfKey(r.Key, keyGroups); kg >= f.first && kg <= f.last {
		f.once.Do(func() { f.got <- at })
	}
}

// measureFailover kills the leader of shard 1 --failover-runs times.
func measureFailover(ctx context.Context, o *options, c *benchCluster, pub *publisher, l *latencyRun, gen *generator, subj []string, rate float64, applied *int, log *slog.Logger) (*failoverR, error) {
	raftCfg := shard.DefaultRaftConfig()
	bound := 2*raftCfg.ElectionTimeout + 500*time.Millisecond
	res := &failoverR{Shard: 1, Rate: rate, BoundMs: ms(bound), ElectionTimeoutMs: ms(raftCfg.ElectionTimeout), AllWithinBound: true}
	for i := 1; i <= o.failRuns; i++ {
		log.Info("failover: run", "run", i, "of", o.failRuns)
		r, err := failoverOnce(ctx, o, c, pub, l, gen, subj, rate, bound, i, applied, log)
		if r != nil {
			res.Runs = append(res.Runs, *r)
			if r.FirstOutputMs > 0 {
				res.MaxFirstOutputMs = max(res.MaxFirstOutputMs, r.FirstOutputMs)
			}
			res.AllWithinBound = res.AllWithinBound && r.WithinBound
		}
		if err != nil {
			res.AllWithinBound = false
			return res, fmt.Errorf("run %d: %w", i, err)
		}
	}
	return res, nil
}

// failoverOnce publishes at rate, kills the leader of shard 1, measures,
// stops publishing, restarts the node and waits until everything published
// is applied (a marker match from every shard).
func failoverOnce(ctx context.Context, o *options, c *benchCluster, pub *publisher, l *latencyRun, gen *generator, subj []string, rate float64, bound time.Duration, round int, applied *int, log *slog.Logger) (*failoverRun, error) {
	res := &failoverRun{}
	n := int(rate * (o.warmup + o.failWait + 5*time.Second).Seconds())
	fw := &failoverWatch{pc: newPacer(gen.gen(n), subj, rate, l.base), got: make(chan time.Time, 1)}
	fw.killIdx.Store(-1)
	l.fo.Store(fw)

	pctx, pcancel := context.WithCancel(ctx)
	defer pcancel()
	type pacerResult struct {
		sent int
		err  error
	}
	pubDone := make(chan pacerResult, 1)
	go func() {
		sent, _, err := fw.pc.run(pctx, pub)
		pubDone <- pacerResult{sent, err}
	}()
	var pubRes *pacerResult
	stopPublishing := func() error {
		if pubRes == nil {
			pcancel()
			select {
			case r := <-pubDone:
				pubRes = &r
			case <-time.After(30 * time.Second):
				return errors.New("publisher did not stop within 30s")
			}
		}
		return pubRes.err
	}
	log.Info("failover: publishing before the kill", "rate", int(rate), "for", o.warmup)
	select {
	case <-ctx.Done():
		return res, ctx.Err()
	case r := <-pubDone:
		pubRes = &r
		return res, fmt.Errorf("publisher ended early: %v", r.err)
	case <-time.After(o.warmup):
	}
	var view shardView
	if err := poll(ctx, 10*time.Second, 50*time.Millisecond, func() (err error) {
		view, err = shardLeader(ctx, c, 1)
		return err
	}); err != nil {
		stopPublishing()
		return res, err
	}
	var victim *member
	for _, m := range c.members {
		if m.id == view.leader {
			victim = m
		}
	}
	res.Victim, res.KeyGroups = victim.id, fmt.Sprintf("%d-%d", view.first, view.last)
	fw.first, fw.last = view.first, view.last
	log.Info("failover: SIGKILL", "node", victim.id, "shard", 1, "key groups", res.KeyGroups)
	killAt := time.Now()
	if err := victim.kill(); err != nil {
		stopPublishing()
		return res, err
	}
	fw.killIdx.Store(int64(fw.pc.evs.first) + fw.pc.sent.Load())

	// the survivors elect a new leader
	type leaderResult struct {
		id string
		at time.Time
	}
	leaderDone := make(chan leaderResult, 1)
	go func() {
		var lr leaderResult
		poll(ctx, o.failWait, 20*time.Millisecond, func() error {
			v, err := shardLeader(ctx, c, 1)
			if err != nil {
				return err
			}
			lr = leaderResult{v.leader, time.Now()}
			return nil
		})
		leaderDone <- lr
	}()
	var firstOut time.Time
	select {
	case <-ctx.Done():
		stopPublishing()
		return res, ctx.Err()
	case firstOut = <-fw.got:
	case <-time.After(o.failWait):
	}
	lr := <-leaderDone // bounded by failWait
	if lr.id != "" {
		res.NewLeader, res.NewLeaderMs = lr.id, ms(lr.at.Sub(killAt))
	}
	if firstOut.IsZero() {
		stopPublishing()
		return res, fmt.Errorf("no output of shard 1 within %s of the kill", o.failWait)
	}
	d := firstOut.Sub(killAt)
	res.FirstOutputMs = ms(d)
	res.WithinBound = d <= bound
	log.Info("failover: shard 1 produces again", "after", d.Round(time.Millisecond), "new leader", res.NewLeader)

	// a little more traffic, then stop and bring the node back
	select {
	case <-ctx.Done():
	case <-time.After(time.Second):
	}
	if err := stopPublishing(); err != nil {
		return res, err
	}
	*applied += pubRes.sent
	stoppedAt := time.Now()
	res.EventsPublished = *applied
	restartAt := time.Now()
	if err := victim.start(); err != nil {
		return res, err
	}
	if err := c.waitReady(ctx, 60*time.Second); err != nil {
		return res, fmt.Errorf("restarted %s not ready: %w", victim.id, err)
	}
	res.RestartReadyMs = ms(time.Since(restartAt))
	// the nodes' event counters cannot tell (see markers.go): a marker per
	// shard can
	if err := sendMarkers(ctx, c, pub, l, gen, round, 5*time.Minute); err != nil {
		return res, fmt.Errorf("after the restart: %w", err)
	}
	res.AllAppliedAfter = true
	res.CatchUpAfterStopSec = time.Since(stoppedAt).Seconds()
	logCounters(ctx, c, log)
	log.Info("failover done", "restart ready ms", res.RestartReadyMs, "catch-up s", res.CatchUpAfterStopSec)
	return res, nil
}
