// Command cepnode runs a node of the CEP cluster. With no flags it is a
// working single-node cluster: an embedded NATS JetStream server, data under
// ./data, the API on 127.0.0.1:7070.
//
//	cepnode                                   # single node, embedded NATS
//	cepnode --nats nats://host:4222 --id n2 --peers n1=h1:7000=h1:7070=h1:7946,n2=h2:7000=h2:7070=h2:7946,...
//	cepnode --nats nats://host:4222 --id n4 --join h1:7946   # joins a running cluster
package main

import (
	"context"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cepcluster/cep/cluster"
	"github.com/cepcluster/cep/cluster/transport"
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

// Run parses flags and runs a node until ctx ends.
func Run(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("cepnode", flag.ContinueOnError)
	d := cluster.DefaultConfig()
	fs.SetOutput(stderr)
	id := fs.String("id", env("id", d.NodeID), "node id, unique in the cluster (env CEPNODE_ID)")
	data := fs.String("data", env("data", d.DataDir), "data directory: Raft logs, snapshots, embedded NATS store (env CEPNODE_DATA)")
	raftAddr := fs.String("raft-addr", env("raft-addr", d.RaftAddr), "listen address for Raft traffic of all groups (env CEPNODE_RAFT_ADDR)")
	apiAddr := fs.String("api-addr", env("api-addr", d.APIAddr), "listen address of the Connect/gRPC API, /metrics, /healthz, /readyz (env CEPNODE_API_ADDR)")
	natsURL := fs.String("nats", env("nats", ""), "URL of an external NATS server with JetStream; empty starts an embedded one (env CEPNODE_NATS)")
	natsCreds := fs.String("nats-creds", env("nats-creds", ""), "credentials file for the external NATS (env CEPNODE_NATS_CREDS)")
	natsCA := fs.String("nats-ca", env("nats-ca", ""), "PEM file of the CA that signed the external NATS server's certificate, if not a system-trusted one (env CEPNODE_NATS_CA)")
	natsPort := fs.Int("nats-port", d.NATSPort, "client port of the embedded NATS server")
	peers := fs.String("peers", env("peers", ""), "the members a new cluster starts with, as id=raftaddr=apiaddr[=gossipaddr],... including this node; empty: a single-node cluster, or with --join a node joining one (env CEPNODE_PEERS)")
	gossipAddr := fs.String("gossip-addr", env("gossip-addr", ""), "listen address (UDP and TCP) of the membership gossip; default: the host of --raft-addr, port 7946 (env CEPNODE_GOSSIP_ADDR)")
	join := fs.String("join", env("join", ""), "gossip addresses (host:port, comma-separated) of members of a running cluster: without --peers, this node joins that cluster and is given replicas (needs --nats) (env CEPNODE_JOIN)")
	gossipKey := fs.String("gossip-key", env("gossip-key", ""), "base64 of a 16, 24 or 32-byte key that encrypts the membership gossip, the same on every node; use it where others can reach the gossip port, with TLS (env CEPNODE_GOSSIP_KEY)")
	advertiseHost := fs.String("advertise-host", env("advertise-host", ""), "host (name or IP) other nodes reach this one at, for a node not listed in --peers whose addresses are wildcards like 0.0.0.0 (env CEPNODE_ADVERTISE_HOST)")
	deadAfter := fs.Duration("dead-after", d.DeadAfter, "how long a member may be unreachable before its replicas are moved to other nodes")
	autoSplit := fs.Bool("auto-split", true, "split shards while the cluster has more nodes than shards, so that each node leads one (at most 32 shards with the default key groups; cepctl shard split splits by hand)")
	replicas := fs.Int("replicas", d.Replicas, "replicas per shard, recorded at cluster creation (a shard has fewer while the cluster has fewer nodes)")
	shards := fs.Int("shards", 0, "number of shards at cluster creation (default: the number of peers)")
	keyGroups := fs.Int("key-groups", d.KeyGroups, "number of key groups K, fixed at cluster creation")
	outboxLimit := fs.Int("outbox-limit", d.OutboxLimit, "unpublished output records a shard holds before its leader stops reading, while JetStream does not take the output")
	outputMaxAge := fs.Duration("output-max-age", 0, "remove output records (matches, timeouts, late events, dead letters) older than this from the output stream, at least 30m; 0 keeps the stream's limit (none when the cluster creates it)")
	outputMaxBytes := fs.String("output-max-bytes", "", "remove the oldest output records once the output stream holds more than this many bytes (suffixes K, M, G, T: powers of 1024); empty keeps the stream's limit")
	deployWait := fs.Duration("deploy-wait", d.DeployWait, "how long a pattern deploy, update or delete waits for every shard to apply it before it returns naming those that have not")
	token := fs.String("token", env("token", ""), "bearer token the API requires; empty: no authentication (env CEPNODE_TOKEN)")
	tlsCert := fs.String("tls-cert", env("tls-cert", ""), "PEM certificate of this node: with --tls-key and --tls-ca, peers talk mutual TLS on the Raft port and the API serves HTTPS; it must name the host of this node's Raft and API addresses and allow server and client use (env CEPNODE_TLS_CERT)")
	tlsKey := fs.String("tls-key", env("tls-key", ""), "PEM private key of --tls-cert (env CEPNODE_TLS_KEY)")
	tlsCA := fs.String("tls-ca", env("tls-ca", ""), "PEM file of the CA(s) that sign the nodes' certificates and any client certificate (env CEPNODE_TLS_CA)")
	pprofOn := fs.Bool("pprof", false, "serve Go profiles (net/http/pprof) under /debug/pprof/ on the API address; behind --token when one is set (send it as a bearer token); the command line (/debug/pprof/cmdline) is not served, as it may hold secrets")
	logLevel := fs.String("log-level", env("log-level", "info"), "debug, info, warn or error (env CEPNODE_LOG_LEVEL)")
	tailMax := fs.String("tail-max-streams", env("tail-max-streams", strconv.Itoa(d.TailMaxStreams)), "MatchService.Tail streams (cepctl tail) this node serves at once; one more is refused, so that no client can hold JetStream consumers and buffers without bound (env CEPNODE_TAIL_MAX_STREAMS)")
	tailMaxCaller := fs.String("tail-max-per-caller", env("tail-max-per-caller", strconv.Itoa(d.TailMaxStreamsPerCaller)), "Tail streams one caller (its bearer token, else its host) holds at once on this node (env CEPNODE_TAIL_MAX_PER_CALLER)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: cepnode [flags]\n\nRuns a node of the CEP cluster. With no flags: a single-node cluster with an\nembedded NATS JetStream server and its data under ./data.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q (see --help)", fs.Arg(0))
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("--log-level: %v", err)
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	cfg := d // what no flag sets keeps its default
	cfg.NodeID, cfg.DataDir, cfg.RaftAddr, cfg.APIAddr = *id, *data, *raftAddr, *apiAddr
	cfg.NATSURL, cfg.NATSCreds, cfg.NATSCA, cfg.NATSPort = *natsURL, *natsCreds, *natsCA, *natsPort
	cfg.Shards, cfg.KeyGroups, cfg.APIToken, cfg.Logger, cfg.Pprof = *shards, *keyGroups, *token, logger, *pprofOn
	cfg.OutboxLimit, cfg.DeployWait, cfg.DeadAfter, cfg.Replicas, cfg.NoAutoSplit = *outboxLimit, *deployWait, *deadAfter, *replicas, !*autoSplit
	cfg.GossipAddr, cfg.AdvertiseHost = *gossipAddr, *advertiseHost
	for _, f := range []struct {
		name, v string
		to      *int
	}{{"tail-max-streams", *tailMax, &cfg.TailMaxStreams}, {"tail-max-per-caller", *tailMaxCaller, &cfg.TailMaxStreamsPerCaller}} {
		n, err := strconv.Atoi(f.v)
		if err != nil || n < 1 {
			return fmt.Errorf("--%s: %q is not a positive number", f.name, f.v)
		}
		*f.to = n
	}
	if *gossipKey != "" {
		k, err := base64.StdEncoding.DecodeString(*gossipKey)
		if err != nil || (len(k) != 16 && len(k) != 24 && len(k) != 32) {
			return errors.New("--gossip-key: not the base64 of a 16, 24 or 32-byte key (head -c 32 /dev/urandom | base64 makes one)")
		}
		cfg.GossipKey = k
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
	n, err := cluster.Start(ctx, cfg)
	if err != nil {
		return err
	}
	logger.Info("cepnode started", "id", *id, "api", n.APIAddr(), "tls", cfg.TLS != nil, "nats", n.NATSURL(), "data", *data)
	<-ctx.Done()
	logger.Info("shutting down")
	done := make(chan error, 1)
	go func() { done <- n.Close() }()
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		return errors.New("shutdown took longer than 30s")
	}
}

// flags are the cepnode flags of the Config fields Validate may refuse.
var flags = map[string]string{
	"DeadAfter": "--dead-after", "Replicas": "--replicas", "KeyGroups": "--key-groups", "Shards": "--shards",
	"OutboxLimit": "--outbox-limit", "DeployWait": "--deploy-wait", "OutputLimits.MaxAge": "--output-max-age",
	"OutputLimits.MaxBytes": "--output-max-bytes", "GossipKey": "--gossip-key", "NATSCA": "--nats-ca", "Join": "--join",
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
	}
	return errors.New(name + msg)
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

// parseSize reads a byte count: digits with an optional K, M, G or T
// suffix (powers of 1024, "B" or "iB" after it allowed), as "512M" or
// "10GiB".
func parseSize(v string) (int64, error) {
	num := strings.TrimSuffix(strings.TrimSuffix(strings.ToUpper(strings.TrimSpace(v)), "B"), "I")
	shift := 0
	if i := len(num) - 1; i >= 0 {
		if k := strings.IndexByte("KMGT", num[i]); k >= 0 {
			shift, num = 10*(k+1), num[:i]
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n <= 0 || n > math.MaxInt64>>shift {
		return 0, fmt.Errorf("%q is not a positive size in bytes (such as 512M or 10G)", v)
	}
	return n << shift, nil
}
