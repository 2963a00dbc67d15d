// Command cepnode runs a node of the CEP cluster. With no flags it is a
// working single-node cluster: an embedded NATS JetStream server, data under
// ./data, the API on 127.0.0.1:7070.
//
//	cepnode                                   # single node, embedded NATS
//	cepnode --nats nats://host:4222 --id n2 --peers n1=h1:7000=h1:7070=h1:7946,n2=h2:7000=h2:7070=h2:7946,...
//	cepnode --nats nats://host:4222 --id n4 --join h1:7946   # joins a running cluster
//	cepnode --config /etc/cep/cepnode.yaml    # flags from a file (YAML, JSON or TOML)
//	cepnode secret                            # prints a new cluster secret
//	cepnode version                           # or --version
//
// Every flag can also be given by its environment variable CEPNODE_<FLAG>
// (--dead-after: CEPNODE_DEAD_AFTER); the command line overrides the
// environment, which overrides the --config file.
package main

import (
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/cepcluster/cep/api"
	"github.com/cepcluster/cep/cluster"
	"github.com/cepcluster/cep/cluster/secret"
	"github.com/cepcluster/cep/cluster/transport"
	"github.com/cepcluster/cep/internal/size"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := Run(ctx, os.Args[1:], os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintf(os.Stderr, "cepnode: %s\n", err)
		os.Exit(1)
	}
}

// env returns the environment value of a flag (CEPNODE_<NAME>) or def.
func env(name, def string) string {
	if v, ok := os.LookupEnv("CEPNODE_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))); ok {
		return v
	}
	return def
}

// Run parses flags and runs a node until ctx ends; "cepnode secret"
// prints a new cluster secret instead, "cepnode nats-config" a NATS
// server configuration with the cluster's users.
func Run(ctx context.Context, args []string, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "version" {
		if len(args) > 1 {
			return fmt.Errorf("cepnode version takes no argument (got %q)", args[1])
		}
		return printVersion(os.Stdout)
	}
	if wantsVersion(args) {
		return printVersion(os.Stdout) // before the environment and a config file can fail the parse
	}
	if len(args) > 0 && args[0] == "secret" {
		return printSecret(args[1:], os.Stdout)
	}
	if len(args) > 0 && args[0] == "nats-config" {
		return natsConfig(args[1:], os.Stdout, stderr)
	}
	fs := flag.NewFlagSet("cepnode", flag.ContinueOnError)
	d := cluster.DefaultConfig()
	fs.SetOutput(stderr)
	f := defineFlags(fs, d)
	id, data, raftAddr, apiAddr, natsURL, natsCreds := f.id, f.data, f.raftAddr, f.apiAddr, f.natsURL, f.natsCreds
	natsCA, natsPort, peers, gossipAddr, join, gossipKey := f.natsCA, f.natsPort, f.peers, f.gossipAddr, f.join, f.gossipKey
	advertiseHost, deadAfter, autoSplit, replicas, shards, keyGroups := f.advertiseHost, f.deadAfter, f.autoSplit, f.replicas, f.shards, f.keyGroups
	outboxLimit, outputMaxAge, outputMaxBytes, maxKeys, deployWait, savepointDir := f.outboxLimit, f.outputMaxAge, f.outputMaxBytes, f.maxKeys, f.deployWait, f.savepointDir
	token, tokenFile, metricsAuth, tlsCert, tlsKey, tlsCA := f.token, f.tokenFile, f.metricsAuth, f.tlsCert, f.tlsKey, f.tlsCA
	secretFile, insecure, pprofOn, logLevel, logFormat, showVersion := f.secretFile, f.insecure, f.pprofOn, f.logLevel, f.logFormat, f.showVersion
	tailMax, tailMaxCaller := f.tailMax, f.tailMaxCaller
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: cepnode [flags]\n       cepnode version\n       cepnode secret    (prints a new cluster secret)\n       cepnode nats-config [--out FILE]    (a nats-server configuration with the cluster's NATS users)\n\nRuns a node of the CEP cluster. With no flags: a single-node cluster with an\nembedded NATS JetStream server and its data under ./data.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *showVersion {
		return printVersion(os.Stdout)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q (see --help)", fs.Arg(0))
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("--log-level: %v", err)
	}
	var handler slog.Handler
	switch *logFormat {
	case "text":
		handler = slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})
	case "json":
		handler = slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level})
	default:
		return fmt.Errorf("--log-format: %q is neither text nor json", *logFormat)
	}
	logger := slog.New(handler)
	var err error
	cfg := d // what no flag sets keeps its default
	cfg.NodeID, cfg.DataDir, cfg.RaftAddr, cfg.APIAddr = *id, *data, *raftAddr, *apiAddr
	cfg.NATSURL, cfg.NATSCreds, cfg.NATSCA, cfg.NATSPort = *natsURL, *natsCreds, *natsCA, *natsPort
	cfg.Shards, cfg.KeyGroups, cfg.APIToken, cfg.Logger, cfg.Pprof = *shards, *keyGroups, *token, logger, *pprofOn
	cfg.OutboxLimit, cfg.DeployWait, cfg.DeadAfter, cfg.Replicas, cfg.NoAutoSplit = *outboxLimit, *deployWait, *deadAfter, *replicas, !*autoSplit
	cfg.SavepointDir, cfg.NATSHandOverAfter, cfg.IdleTimeout = *savepointDir, *f.natsHandOverAfter, *f.idleTimeout
	if cfg.NATSConnectWait = *f.natsConnectWait; cfg.NATSConnectWait <= 0 {
		cfg.NATSConnectWait = -1 // none (Config's zero is the default)
	}
	cfg.GossipAddr, cfg.AdvertiseHost, cfg.MetricsAuth = *gossipAddr, *advertiseHost, *metricsAuth
	for _, o := range strings.Split(*f.corsOrigins, ",") {
		if o = strings.TrimSpace(o); o != "" {
			cfg.CORSOrigins = append(cfg.CORSOrigins, o)
		}
	}
	if *tokenFile != "" {
		t, err := api.ReadTokenFile(*tokenFile)
		if err != nil {
			return fmt.Errorf("--token-file: %v", err)
		}
		cfg.Tokens = t
		if fi, err := os.Stat(*tokenFile); err == nil && fi.Mode().Perm()&0o077 != 0 {
			logger.Warn("the token file can be read by other users of this machine: chmod 600 it", "file", *tokenFile)
		}
	}
	for _, f := range []struct {
		name string
		v    int
		to   *int
	}{{"max-keys", *maxKeys, &cfg.MaxKeys}, {"tail-max-streams", *tailMax, &cfg.TailMaxStreams}, {"tail-max-per-caller", *tailMaxCaller, &cfg.TailMaxStreamsPerCaller}} {
		if f.v < 1 {
			return fmt.Errorf("--%s: %d is not a positive number", f.name, f.v)
		}
		*f.to = f.v
	}
	if err := setSnapshots(&cfg, *f.snapThreshold, *f.snapInterval); err != nil {
		return err
	}
	if *gossipKey != "" {
		k, err := base64.StdEncoding.DecodeString(*gossipKey)
		if err != nil || (len(k) != 16 && len(k) != 24 && len(k) != 32) {
			return errors.New("--gossip-key: not the base64 of a 16, 24 or 32-byte key (head -c 32 /dev/urandom | base64 makes one)")
		}
		cfg.GossipKey = k
	}
	cfg.Insecure = *insecure
	if cfg.Secret, err = clusterSecret(*secretFile); err != nil {
		return err
	}
	if cfg.GossipAddr == "" {
		host, _, err := net.SplitHostPort(*raftAddr)
		if err != nil {
			return fmt.Errorf("--raft-addr %q: %v", *raftAddr, err)
		}
		cfg.GossipAddr = net.JoinHostPort(host, "7946")
	}
	for _, j := range strings.Split(*join, ",") {
		if j = strings.TrimSpace(j); j != "" {
			cfg.Join = append(cfg.Join, j)
		}
	}
	cfg.OutputLimits.MaxAge = *outputMaxAge
	if n, err := parseSize(*f.maxStateBytes); err != nil || n < 1 {
		if err == nil {
			err = fmt.Errorf("%d is not a positive number", n)
		}
		return fmt.Errorf("--max-state-bytes: %v", err)
	} else {
		cfg.MaxStateBytes = n
	}
	if *outputMaxBytes != "" {
		n, err := parseSize(*outputMaxBytes)
		if err != nil {
			return fmt.Errorf("--output-max-bytes: %v", err)
		}
		cfg.OutputLimits.MaxBytes = n
	}
	switch set := btoi(*tlsCert != "") + btoi(*tlsKey != "") + btoi(*tlsCA != ""); set {
	case 3:
		t, err := transport.LoadTLS(*tlsCert, *tlsKey, *tlsCA, logger)
		if err != nil {
			return err
		}
		cfg.TLS = t
	case 1, 2:
		return errors.New("--tls-cert, --tls-key and --tls-ca go together: give all three or none")
	}
	if *peers != "" {
		ps, err := parsePeers(*peers)
		if err != nil {
			return err
		}
		found := false
		var seeds []string
		for _, p := range ps {
			found = found || p.ID == *id
			if p.GossipAddr != "" {
				seeds = append(seeds, p.GossipAddr)
			}
		}
		switch {
		case found:
			cfg.Peers = ps
		case len(cfg.Join) > 0 || len(seeds) > 0:
			// a node added after the cluster was created (a StatefulSet
			// scaled up): it joins the members the list names
			cfg.Join = append(cfg.Join, seeds...)
		default:
			return fmt.Errorf("--peers does not list this node (%s); to join a running cluster give --join (or gossip addresses in --peers)", *id)
		}
	}
	if err := cfg.Validate(); err != nil {
		return flagError(err)
	}
	n, err := startNode(ctx, cfg, logger)
	if err != nil {
		return flagError(err) // a missing secret is found at start
	}
	logger.Info("cepnode started", "id", *id, "api", n.APIAddr(), "tls", cfg.TLS != nil, "insecure", cfg.Insecure, "nats", n.NATSURL(), "data", *data)
	var failed error
	select {
	case <-ctx.Done():
		logger.Info("shutting down")
	case failed = <-n.Failed():
	}
	done := make(chan error, 1)
	go func() { done <- n.Close() }()
	select {
	case err := <-done:
		return cmp.Or(failed, err)
	case <-time.After(30 * time.Second):
		return errors.New("shutdown took longer than 30s")
	}
}

// nodeFlags are the values of cepnode's flags.
type nodeFlags struct {
	id                *string
	data              *string
	raftAddr          *string
	apiAddr           *string
	natsURL           *string
	natsCreds         *string
	natsCA            *string
	natsPort          *int
	peers             *string
	gossipAddr        *string
	join              *string
	gossipKey         *string
	advertiseHost     *string
	deadAfter         *time.Duration
	natsHandOverAfter *time.Duration
	natsConnectWait   *time.Duration
	idleTimeout       *time.Duration
	autoSplit         *bool
	replicas          *int
	shards            *int
	keyGroups         *int
	outboxLimit       *int
	outputMaxAge      *time.Duration
	outputMaxBytes    *string
	maxKeys           *int
	maxStateBytes     *string
	deployWait        *time.Duration
	savepointDir      *string
	token             *string
	tokenFile         *string
	metricsAuth       *bool
	corsOrigins       *string
	tlsCert           *string
	tlsKey            *string
	tlsCA             *string
	secretFile        *string
	insecure          *bool
	pprofOn           *bool
	logLevel          *string
	logFormat         *string
	showVersion       *bool
	tailMax           *int
	tailMaxCaller     *int
	snapThreshold     *int
	snapInterval      *time.Duration
}

// defineFlags defines cepnode's flags on fs, with the defaults of d.
func defineFlags(fs *flag.FlagSet, d cluster.Config) *nodeFlags {
	f := &nodeFlags{}
	f.id = fs.String("id", d.NodeID, "node id, unique in the cluster")
	f.data = fs.String("data", d.DataDir, "data directory: Raft logs, snapshots, embedded NATS store; one node at a time holds it (its pid in <data>/LOCK): a second one on it fails at once")
	f.raftAddr = fs.String("raft-addr", d.RaftAddr, "listen address for Raft traffic of all groups: only members proving the cluster secret (and with TLS a certificate of --tls-ca) get past the handshake; without TLS the traffic is not encrypted")
	f.apiAddr = fs.String("api-addr", d.APIAddr, "listen address of the Connect/gRPC API, /metrics, /healthz, /readyz; off loopback, give it tokens (--token-file) and TLS: without TLS tokens travel in clear, without tokens anyone reaching it may do anything")
	f.natsURL = fs.String("nats", "", "URL of an external NATS server with JetStream, yours to secure (cepnode nats-config prints a configuration with the cluster's users); empty starts an embedded one, on loopback, which admits only the cluster's users")
	f.natsCreds = fs.String("nats-creds", "", "credentials file for the external NATS; without it the node logs in as the cluster's NATS user cep-node, whose password is derived from the cluster secret")
	f.natsCA = fs.String("nats-ca", "", "PEM file of the CA that signed the external NATS server's certificate, if not a system-trusted one")
	f.natsPort = fs.Int("nats-port", d.NATSPort, "client port of the embedded NATS server")
	f.peers = fs.String("peers", "", "the members a new cluster starts with, as id=raftaddr=apiaddr[=gossipaddr],... including this node; empty: a single-node cluster, or with --join a node joining one")
	f.gossipAddr = fs.String("gossip-addr", "", "listen address (UDP and TCP) of the membership gossip, encrypted and authenticated with a key of the cluster secret; default: the host of --raft-addr, port 7946")
	f.join = fs.String("join", "", "gossip addresses (host:port, comma-separated) of members of a running cluster: without --peers, this node joins that cluster and is given replicas (needs --nats)")
	f.gossipKey = fs.String("gossip-key", "", "base64 of a 16, 24 or 32-byte key that encrypts and authenticates the membership gossip, the same on every node, instead of the key derived from the cluster secret (which encrypts it by default); with --insecure and no key the gossip is in clear and anyone reaching its port can announce members")
	f.advertiseHost = fs.String("advertise-host", "", "host (name or IP) other nodes reach this one at, for a node not listed in --peers whose addresses are wildcards like 0.0.0.0")
	f.deadAfter = fs.Duration("dead-after", d.DeadAfter, "how long a member may be unreachable before its replicas are moved to other nodes")
	f.idleTimeout = fs.Duration("idle-timeout", d.IdleTimeout, "a pattern's idleTimeout when its document sets none: a shard with no event of a source for this long stops holding the source's event-time clock back (docs/time.md)")
	f.natsConnectWait = fs.Duration("nats-connect-wait", d.NATSConnectWait, "how long a starting node waits for the external NATS server (--nats) to accept connections; 0: not at all")
	f.natsHandOverAfter = fs.Duration("nats-handover-after", d.NATSHandOverAfter, "how long a shard leader may go without an answer from NATS before it hands its shard to a replica whose node reaches NATS (it reads and publishes nothing meanwhile)")
	f.autoSplit = fs.Bool("auto-split", true, "split shards while the cluster has more nodes than shards, so that each node leads one (at most 32 shards with the default key groups; cepctl shard split splits by hand)")
	f.replicas = fs.Int("replicas", d.Replicas, "replicas per shard, recorded at cluster creation (a shard has fewer while the cluster has fewer nodes)")
	f.shards = fs.Int("shards", 0, "number of shards at cluster creation (default: the number of peers)")
	f.keyGroups = fs.Int("key-groups", d.KeyGroups, "number of key groups K, fixed at cluster creation")
	f.outboxLimit = fs.Int("outbox-limit", d.OutboxLimit, "unpublished output records a shard holds before its leader stops reading, while JetStream does not take the output")
	f.outputMaxAge = fs.Duration("output-max-age", 0, "remove output records (matches, timeouts, late events, dead letters) older than this from the output stream, at least 30m; 0 keeps the stream's limit (none when the cluster creates it)")
	f.outputMaxBytes = fs.String("output-max-bytes", "", "remove the oldest output records once the output stream holds more than this many bytes (suffixes K, M, G, T: powers of 1024); empty keeps the stream's limit (1G when the cluster creates it)")
	f.maxKeys = fs.Int("max-keys", d.MaxKeys, "keys a pattern may hold state for on one shard, unless its document sets a lower maxKeys: an event of a new key past it is dead-lettered, so a flood of distinct keys cannot exhaust memory; also the most a document's maxKeys may ask for")
	f.maxStateBytes = fs.String("max-state-bytes", "256M", "bytes of events a pattern may hold on one shard (suffixes K, M, G, T: powers of 1024), unless its document sets a lower maxStateBytes: an event that would take it past is dead-lettered, so a few keys of large events cannot exhaust memory; also the most a document's maxStateBytes may ask for")
	f.deployWait = fs.Duration("deploy-wait", d.DeployWait, "how long a pattern deploy, update or delete waits for every shard to apply it before it returns naming those that have not")
	f.savepointDir = fs.String("savepoint-dir", "", "directory that dir:// savepoint targets and restore locations must lie in (a relative dir://NAME is taken inside it); anything resolving outside it, by .., an absolute path or a symbolic link, is refused, so API clients cannot make the node write or read files elsewhere; default: <--data>/savepoints")
	f.token = fs.String("token", "", "an admin's bearer token for the API; without it and --token-file the API is open to anyone who reaches it; prefer the environment or --token-file, as a command line is visible to others on the machine")
	f.tokenFile = fs.String("token-file", "", "file of the API's bearer tokens, one a line as ROLE TOKEN (ROLE admin: everything; operator: patterns, sources, savepoints and what reader may; reader: status, list, get, tail), # comments; calls without a valid token are refused")
	f.metricsAuth = fs.Bool("metrics-auth", false, "/metrics wants a bearer token of role reader or more (needs --token or --token-file); without it anyone reaching the API address reads the metrics")
	f.corsOrigins = fs.String("cors-origin", "", "origins (scheme://host[:port], comma-separated; * for any, or within one for part of a name) whose browser pages may call the API; empty, the default, answers no cross-origin request (calls still need their token)")
	f.tlsCert = fs.String("tls-cert", "", "PEM certificate of this node: with --tls-key and --tls-ca, peers talk mutual TLS on the Raft port and the API serves HTTPS; it must name the host of this node's Raft and API addresses and allow server and client use")
	f.tlsKey = fs.String("tls-key", "", "PEM private key of --tls-cert: whoever holds it (with the cluster secret) can act as this node; keep it mode 0600")
	f.tlsCA = fs.String("tls-ca", "", "PEM file of the CA(s) that sign the nodes' certificates and any client certificate")
	f.secretFile = fs.String("cluster-secret-file", "", "file holding the cluster secret (64 hex digits; cepnode secret makes one): members prove with it that they belong on the Raft port, the gossip (encrypted with a key of it) and node-to-node calls; every node of a cluster needs the same. The environment variable CEPNODE_CLUSTER_SECRET may hold the value instead. A single new node without one makes one and keeps it in its data directory (cluster-secret), which later starts use")
	f.insecure = fs.Bool("insecure", false, "run without a cluster secret: members do not authenticate each other, so anyone who reaches the Raft or gossip port can act as a member and change or delete anything; only for a trusted network or tests")
	f.pprofOn = fs.Bool("pprof", false, "serve Go profiles (net/http/pprof) under /debug/pprof/ on the API address, to admin tokens only when the API has tokens (send one as a bearer token); the command line (/debug/pprof/cmdline) is not served, as it may hold secrets")
	f.logLevel = fs.String("log-level", "info", "debug, info, warn or error")
	f.logFormat = fs.String("log-format", "text", "text (key=value lines) or json (one JSON object a line, for log collectors)")
	fs.String("config", "", "YAML or JSON file (TOML when named *.toml) of flag values, keyed by flag name (id: n1, dead-after: 30s, ...); the command line overrides the environment, which overrides the file")
	f.showVersion = fs.Bool("version", false, "print the version and exit")
	f.tailMax = fs.Int("tail-max-streams", d.TailMaxStreams, "MatchService.Tail streams (cepctl tail) this node serves at once; one more is refused, so that no client can hold JetStream consumers and buffers without bound")
	f.tailMaxCaller = fs.Int("tail-max-per-caller", d.TailMaxStreamsPerCaller, "Tail streams one caller (its bearer token, else its host) holds at once on this node")
	f.snapThreshold = fs.Int("raft-snapshot-threshold", int(d.Raft.SnapshotThreshold), "log entries a Raft group (each shard, and the metadata group) lets accumulate before it snapshots and compacts its log; a shard whose state takes long to encode lets more accumulate. Lower: shorter replay at restart, more snapshot work")
	f.snapInterval = fs.Duration("raft-snapshot-interval", d.Raft.SnapshotInterval, "how often each Raft group (each shard, and the metadata group) checks whether --raft-snapshot-threshold entries have accumulated (at a random moment between one and two intervals), at least 100ms")
	withEnvNames(fs)
	return f
}

// minSnapshotInterval bounds --raft-snapshot-interval: checking more
// often only costs.
const minSnapshotInterval = 100 * time.Millisecond

// setSnapshots gives cfg the snapshot threshold and interval of the
// flags, on a copy of its Raft configuration (the metadata group's too).
func setSnapshots(cfg *cluster.Config, threshold int, interval time.Duration) error {
	if threshold < 1 {
		return fmt.Errorf("--raft-snapshot-threshold must be at least 1 (got %d)", threshold)
	}
	if interval < minSnapshotInterval {
		return fmt.Errorf("--raft-snapshot-interval must be at least %v (got %v)", minSnapshotInterval, interval)
	}
	rc := *cfg.Raft
	rc.SnapshotThreshold, rc.SnapshotInterval = uint64(threshold), interval
	cfg.Raft = &rc
	return nil
}

// startAbandon bounds how long a start that a signal interrupted may take
// to give up: past it cepnode exits without waiting for it.
const startAbandon = time.Second

// startNode is cluster.Start, given up when ctx ends (SIGTERM, Ctrl-C)
// even if the start waits on something that does not watch ctx.
func startNode(ctx context.Context, cfg cluster.Config, logger *slog.Logger) (*cluster.Node, error) {
	type result struct {
		n   *cluster.Node
		err error
	}
	done := make(chan result, 1)
	go func() {
		n, err := cluster.Start(ctx, cfg)
		done <- result{n, err}
	}()
	select {
	case r := <-done:
		return r.n, r.err
	case <-ctx.Done():
	}
	logger.Info("stopping while starting")
	select {
	case r := <-done:
		if r.err != nil {
			return nil, fmt.Errorf("stopped while starting: %w", r.err)
		}
		return r.n, nil // started after all: it is stopped as usual
	case <-time.After(startAbandon):
		return nil, fmt.Errorf("stopped while starting (not waiting more than %v for the start to give up)", startAbandon)
	}
}

// flags are the cepnode flags of the Config fields Validate or Start may
// refuse.
var flags = map[string]string{
	"DeadAfter": "--dead-after", "NATSHandOverAfter": "--nats-handover-after", "Replicas": "--replicas", "KeyGroups": "--key-groups", "Shards": "--shards",
	"OutboxLimit": "--outbox-limit", "DeployWait": "--deploy-wait", "MaxKeys": "--max-keys", "MaxStateBytes": "--max-state-bytes", "OutputLimits.MaxAge": "--output-max-age",
	"OutputLimits.MaxBytes": "--output-max-bytes", "GossipKey": "--gossip-key", "CORSOrigins": "--cors-origin", "NATSCA": "--nats-ca", "Join": "--join",
	"Secret": "--cluster-secret-file", "Insecure": "--insecure",
	"APIToken": "--token", "MetricsAuth": "--metrics-auth",
	"NATSPort": "--nats-port", "RaftAddr": "--raft-addr", "APIAddr": "--api-addr", "GossipAddr": "--gossip-addr",
}

// flagError names the flag of a refused Config field.
func flagError(err error) error {
	var ce *cluster.ConfigError
	if !errors.As(err, &ce) {
		return err
	}
	name, ok := flags[ce.Field]
	if !ok {
		return err
	}
	msg := ce.Msg
	switch ce.Field {
	case "NATSCA":
		msg = " is for an external NATS server (--nats)"
	case "Join":
		msg = strings.Replace(msg, " needs an external NATS:", " needs --nats:", 1)
	case "Secret":
		msg = " (or CEPNODE_CLUSTER_SECRET) is needed by a node of a cluster of several (--peers, --join): give every node the same secret (the file cluster-secret in the first node's data directory, or one from cepnode secret), or --insecure"
	case "Insecure":
		msg = " with a cluster secret (--cluster-secret-file, CEPNODE_CLUSTER_SECRET): choose one"
	case "APIToken":
		msg = strings.Replace(msg, "in Tokens", "in --token-file", 1)
	case "MetricsAuth":
		msg = " needs --token or --token-file"
	}
	return errors.New(name + msg)
}

// clusterSecret reads the cluster secret from file, or from the
// environment variable CEPNODE_CLUSTER_SECRET; zero when neither is given.
// The value never goes on the command line, where ps shows it.
func clusterSecret(file string) (secret.Secret, error) {
	value, inEnv := os.LookupEnv("CEPNODE_CLUSTER_SECRET")
	switch {
	case file != "" && inEnv:
		return secret.Secret{}, errors.New("--cluster-secret-file and CEPNODE_CLUSTER_SECRET both given: give one")
	case file != "":
		s, err := secret.ReadFile(file)
		if err != nil {
			return s, fmt.Errorf("--cluster-secret-file: %w", err)
		}
		return s, nil
	case inEnv:
		s, err := secret.Parse(value)
		if err != nil {
			return s, fmt.Errorf("CEPNODE_CLUSTER_SECRET: %w", err)
		}
		return s, nil
	}
	return secret.Secret{}, nil
}

// printSecret is "cepnode secret": a new cluster secret on out, to keep
// in a file every node is given (--cluster-secret-file).
func printSecret(args []string, out io.Writer) error {
	if len(args) > 0 {
		return fmt.Errorf("cepnode secret takes no argument (got %q): it prints a new cluster secret, as in cepnode secret > cluster-secret", args[0])
	}
	_, err := fmt.Fprintln(out, secret.Generate().String())
	return err
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func parsePeers(s string) ([]cluster.Peer, error) {
	var out []cluster.Peer
	for _, item := range strings.Split(s, ",") {
		parts := strings.Split(strings.TrimSpace(item), "=")
		if len(parts) < 3 || len(parts) > 4 || slices.Contains(parts, "") {
			return nil, fmt.Errorf("--peers: %q is not id=raftaddr=apiaddr[=gossipaddr]", item)
		}
		p := cluster.Peer{ID: parts[0], RaftAddr: parts[1], APIAddr: parts[2]}
		if len(parts) == 4 {
			p.GossipAddr = parts[3]
		}
		out = append(out, p)
	}
	return out, nil
}

// parseSize reads a byte count, as "512M" or "10GiB" (see package size).
func parseSize(v string) (int64, error) { return size.Parse(v) }
