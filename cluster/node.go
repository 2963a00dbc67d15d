package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	"github.com/hashicorp/raft"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/cepcluster/cep/api"
	"github.com/cepcluster/cep/cluster/meta"
	"github.com/cepcluster/cep/shard"
	"github.com/cepcluster/cep/snapshot"
)

// Peer is one member of the cluster: one the cluster is created with
// (Config.Peers), or one that joined later (Meta.Nodes).
type Peer struct {
	ID         string
	RaftAddr   string // host:port of its Raft mux
	APIAddr    string // host:port of its API
	GossipAddr string // host:port of its membership gossip; may be empty
}

// Config configures a node. The zero value of every field has a working
// default, so that an empty Config is a single-node cluster with an
// embedded NATS server and its data under ./data.
type Config struct {
	NodeID    string // default "node1"
	DataDir   string // default "./data"
	RaftAddr  string // listen address of the Raft mux, default 127.0.0.1:7000
	APIAddr   string // listen address of the API, default 127.0.0.1:7070
	NATSURL   string // external NATS; empty starts an embedded server
	NATSCreds string // credentials file for an external NATS
	NATSCA    string // PEM CA file for an external NATS's TLS certificate
	NATSHost  string // embedded NATS listen host, default 127.0.0.1
	NATSPort  int    // embedded NATS port, default 4222 (-1: any free port)
	Peers     []Peer // the members a new cluster starts with, including this node; empty: alone (or joining)
	Shards    int    // shard count; default: the number of peers (at least 1)
	KeyGroups int    // K, fixed at cluster creation; default 256
	// Replicas is how many replicas each shard should have (default 3),
	// recorded when the cluster is created; a shard has fewer while the
	// cluster has fewer nodes.
	Replicas int
	// GossipAddr is where the membership gossip (memberlist, UDP and TCP)
	// listens; default 127.0.0.1:0, any free port. Others reach it at this
	// node's GossipAddr in Peers when listed there, else at the address
	// bound.
	GossipAddr string
	// Join lists gossip addresses (host:port) of members of a running
	// cluster. A node started with Join and without Peers joins that
	// cluster: it bootstraps nothing and waits to be given replicas.
	Join []string
	// DeadAfter is how long a member may be unreachable before the cluster
	// moves its replicas to other nodes (default 5m).
	DeadAfter time.Duration
	// AdvertiseHost is the host (name or IP) others reach this node at, for
	// a node not listed in Peers whose listeners are bound to a wildcard
	// address (0.0.0.0 in a container): its Raft, API and gossip addresses
	// are advertised with this host and their bound ports.
	AdvertiseHost string
	// GossipKey, when set (16, 24 or 32 bytes), encrypts and authenticates
	// the gossip; every node needs the same key. Without it anyone reaching
	// the gossip port can announce members (the cluster still takes one
	// only once its API answers, over TLS when the cluster uses it).
	GossipKey []byte
	// NoAutoSplit: the cluster does not split shards when it has more
	// active nodes than shards (it does by default, so that each node leads
	// a shard; only cepctl shard split splits then).
	NoAutoSplit bool
	// FastGossip shortens the gossip's probe and suspicion timings (tests).
	FastGossip bool
	APIToken   string // bearer token the API requires; empty: none
	// TLS, when set, secures the Raft mux (mutual TLS) and the API (HTTPS);
	// see TLS. The embedded NATS server stays plain, on its loopback host.
	TLS    *TLS
	Pprof  bool // serve net/http/pprof under /debug/pprof/ on the API address
	Logger *slog.Logger
	Raft   *raft.Config // Raft timeouts (tests shorten them); default shard.DefaultRaftConfig()

	// IngestBatch bounds the events of one log entry; IngestLinger is how
	// long the leader waits to fill a batch.
	IngestBatch  int
	IngestLinger time.Duration
	// OutboxLimit is how many produced records a shard holds unpublished
	// before its leader stops reading (default 50,000): while JetStream
	// does not take the output, the replicated state does not grow
	// without bound, and reading resumes once publishing catches up.
	OutboxLimit int
	// OutputLimits are set on the output stream at start; the stream
	// keeps its own limits where they are zero.
	OutputLimits OutputLimits
	// TickEvery is the processing-time tick period (default 1s).
	TickEvery time.Duration
	// StreamCheckEvery is how often a shard leader checks that the streams
	// it reads still exist (default 10s).
	StreamCheckEvery time.Duration
	// HandOverAfter is how long a replica that is not its shard's preferred
	// leader leads before handing leadership over (default 2s).
	HandOverAfter time.Duration
	// DeployWait bounds how long DeployPattern, UpdatePattern and
	// DeletePattern wait for every shard to apply the change before they
	// return the shards that have not (default 10s; the request's
	// deadline if sooner).
	DeployWait time.Duration
	// ReconcileDelay injects a fault for tests: a shard leader of this node
	// waits this long after its metadata replica changes before it looks
	// at the metadata and proposes the deployments and deletions that
	// follow into its shard's log (changes made meanwhile come together).
	ReconcileDelay time.Duration
	// ApplyDelay injects a fault for tests: every shard state machine of
	// this node sleeps this long before applying each log entry.
	ApplyDelay time.Duration
	// Now is the clock used for processing-time ticks and logged times;
	// default time.Now. It is read by the proposer only: the FSMs see the
	// logged value.
	Now func() time.Time
}

func (c *Config) setDefaults() {
	if c.NodeID == "" {
		c.NodeID = "node1"
	}
	if c.DataDir == "" {
		c.DataDir = "data"
	}
	if c.RaftAddr == "" {
		c.RaftAddr = "127.0.0.1:7000"
	}
	if c.APIAddr == "" {
		c.APIAddr = "127.0.0.1:7070"
	}
	if c.NATSHost == "" {
		c.NATSHost = "127.0.0.1"
	}
	if c.NATSPort == 0 {
		c.NATSPort = 4222
	}
	if len(c.Peers) == 0 && len(c.Join) == 0 {
		c.Peers = []Peer{{ID: c.NodeID, RaftAddr: c.RaftAddr, APIAddr: c.APIAddr}}
	}
	if c.Shards == 0 {
		c.Shards = max(1, len(c.Peers))
	}
	if c.KeyGroups == 0 {
		c.KeyGroups = 256
	}
	if c.Replicas == 0 {
		c.Replicas = 3
	}
	if c.GossipAddr == "" {
		c.GossipAddr = "127.0.0.1:0"
	}
	if c.DeadAfter == 0 {
		c.DeadAfter = 5 * time.Minute
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Raft == nil {
		c.Raft = shard.DefaultRaftConfig()
	}
	if c.IngestBatch == 0 {
		c.IngestBatch = 2000
	}
	if c.IngestLinger == 0 {
		c.IngestLinger = 5 * time.Millisecond
	}
	if c.OutboxLimit == 0 {
		c.OutboxLimit = 50_000
	}
	if c.TickEvery == 0 {
		c.TickEvery = time.Second
	}
	if c.StreamCheckEvery == 0 {
		c.StreamCheckEvery = 10 * time.Second
	}
	if c.HandOverAfter == 0 {
		c.HandOverAfter = 2 * time.Second
	}
	if c.DeployWait == 0 {
		c.DeployWait = 10 * time.Second
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// Node is one cepnode process: NATS connection (and optionally the embedded
// server), the Raft mux, the metadata group, this node's shard replicas and
// the leader loops of the shards it leads. Start launches everything; Close
// stops it in reverse order and waits.
type Node struct {
	cfg    Config
	log    *slog.Logger
	ns     *server.Server
	nc     *nats.Conn
	js     jetstream.JetStream
	mux    *Mux
	muxErr chan error
	meta   *metaGroup
	gossip *gossip
	// replicas are this node's shard replicas by shard id, each with its
	// runner; they change as the cluster places replicas
	replicasMu   sync.RWMutex
	replicas     map[uint64]*replica
	replicasKick chan struct{} // wakes manageReplicas (a split stored)
	// infos is the shard layout a new cluster starts with (Config.Peers)
	infos []meta.ShardInfo
	// advertised are the addresses others reach this node at (its entry
	// in Peers, else built from AdvertiseHost, else the listeners'); the
	// Raft address is the mux's
	advertised Peer
	// unreachable: since when each member has been unreachable, as the
	// metadata leader's loop (manageCluster, its only user) found
	unreachable map[string]time.Time
	apiLn       net.Listener
	apiSrv      *http.Server
	// peerHTTP calls other nodes' APIs (forwarded changes, savepoint parts,
	// health and progress probes); peerTLS is its own transport with TLS.
	peerHTTP *http.Client
	peerTLS  *http.Transport

	applyLatency prometheus.Histogram // proposal to applied, per ingest batch
	// readPaused is 1 while a shard leader does not read a stream, by
	// reason: "alignment" (the source runs ahead of the others a pattern
	// aligns) or "outbox" (the outbox holds its limit)
	readPaused *prometheus.GaugeVec
	// streamMissing is 1 while a stream a shard leader reads is gone
	streamMissing *prometheus.GaugeVec

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// Start starts a node. On an error it has stopped what it started.
func Start(ctx context.Context, cfg Config) (*Node, error) {
	n, err := start(ctx, cfg)
	if err != nil {
		if n != nil {
			n.Close()
		}
		return nil, err
	}
	return n, nil
}

// start is Start, returning the node (to close) with an error after it
// began to build it.
func start(ctx context.Context, cfg Config) (n *Node, err error) {
	cfg.setDefaults()
	if len(cfg.Peers) == 0 && cfg.NATSURL == "" {
		return nil, errors.New("a node joining a cluster needs the cluster's NATS (Config.NATSURL), not an embedded server of its own")
	}
	n = &Node{cfg: cfg, log: cfg.Logger.With("node", cfg.NodeID)}
	n.applyLatency = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "cep_raft_apply_seconds",
		Help:    "Time from proposing an ingest batch to its being applied on the leader.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
	})
	n.readPaused = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "cep_read_paused",
		Help: "1 while a shard's leader does not read a stream: reason \"alignment\" (watermark alignment) or \"outbox\" (unpublished records at the outbox limit).",
	}, []string{"shard", "stream", "reason"})
	n.streamMissing = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "cep_source_stream_missing",
		Help: "1 while a stream a shard leader reads (a source's, or a derived source's) does not exist.",
	}, []string{"shard", "stream"})
	n.ctx, n.cancel = context.WithCancel(context.Background())
	n.peerHTTP = http.DefaultClient
	if cfg.TLS != nil {
		n.peerTLS = http.DefaultTransport.(*http.Transport).Clone()
		n.peerTLS.TLSClientConfig = cfg.TLS.client()
		n.peerTLS.ForceAttemptHTTP2 = true
		n.peerHTTP = &http.Client{Transport: n.peerTLS}
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return n, err
	}
	url := cfg.NATSURL
	if url == "" {
		n.ns, err = StartEmbeddedNATS(filepath.Join(cfg.DataDir, "nats"), cfg.NATSHost, cfg.NATSPort, n.log.With("component", "nats"))
		if err != nil {
			return n, err
		}
		url = n.ns.ClientURL()
	}
	if n.nc, err = dialNATS(url, cfg.NATSCreds, cfg.NATSCA, "cepnode-"+cfg.NodeID); err != nil {
		return n, fmt.Errorf("connect to NATS at %s: %w", url, err)
	}
	if n.js, err = jetstream.New(n.nc); err != nil {
		return n, err
	}
	if err := EnsureOutputStream(ctx, n.js, cfg.OutputLimits); err != nil {
		return n, fmt.Errorf("output stream: %w", err)
	}
	ln, err := net.Listen("tcp", cfg.RaftAddr)
	if err != nil {
		return n, fmt.Errorf("raft listener: %w", err)
	}
	n.apiLn, err = net.Listen("tcp", cfg.APIAddr)
	if err != nil {
		ln.Close()
		return n, fmt.Errorf("api listener: %w", err)
	}
	cfg.APIAddr = n.apiLn.Addr().String()
	n.cfg.APIAddr = cfg.APIAddr
	if cfg.TLS != nil {
		n.apiLn = tls.NewListener(n.apiLn, cfg.TLS.apiServer())
	}
	if len(cfg.Peers) == 1 && cfg.Peers[0].ID == cfg.NodeID {
		// alone: the configured address may have been ":0"
		cfg.RaftAddr = ln.Addr().String()
		n.cfg.RaftAddr = cfg.RaftAddr
		n.cfg.Peers = []Peer{{ID: cfg.NodeID, RaftAddr: cfg.RaftAddr, APIAddr: cfg.APIAddr}}
		cfg.Peers = n.cfg.Peers
	}
	// advertise the address the peers were configured with (the listener
	// may be bound to 0.0.0.0 or a pod IP)
	var advertise net.Addr
	n.advertised = Peer{ID: cfg.NodeID, APIAddr: cfg.APIAddr}
	if cfg.AdvertiseHost != "" {
		// a node not listed in Peers (one that joins) behind a wildcard
		// listener: the host others reach it at, with the bound ports
		advertise = stringAddr(withHost(ln.Addr().String(), cfg.AdvertiseHost))
		n.advertised.APIAddr = withHost(cfg.APIAddr, cfg.AdvertiseHost)
		n.advertised.GossipAddr = net.JoinHostPort(cfg.AdvertiseHost, "0")
	}
	for _, p := range cfg.Peers {
		if p.ID == cfg.NodeID {
			advertise = stringAddr(p.RaftAddr)
			n.advertised = p
		}
	}
	n.mux = NewMux(ln, advertise, n.log.With("component", "mux"))
	if cfg.TLS != nil {
		n.mux.UseTLS(cfg.TLS.peerServer(), cfg.TLS.client())
	}
	n.muxErr = make(chan error, 1)
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		n.muxErr <- n.mux.Serve()
	}()
	var voters []raft.Server
	for _, p := range cfg.Peers {
		voters = append(voters, raft.Server{ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.RaftAddr)})
	}
	layer, err := n.mux.Layer(0)
	if err != nil {
		return n, err
	}
	n.meta, err = openMetaGroup(filepath.Join(cfg.DataDir, "meta"), cfg.NodeID, NewTransport(layer, n.log), voters, cfg.Raft, n.log)
	if err != nil {
		return n, fmt.Errorf("metadata group: %w", err)
	}
	// a new cluster's shard layout follows from the configuration; the
	// metadata group records it when the cluster is first initialised
	replication := min(cfg.Replicas, len(cfg.Peers))
	for i := 0; i < cfg.Shards && len(cfg.Peers) > 0; i++ {
		first, last := snapshot.BlockRange(i, cfg.Shards, cfg.KeyGroups)
		info := meta.ShardInfo{ID: uint64(i + 1), First: first, Last: last}
		for r := 0; r < replication; r++ {
			info.Replicas = append(info.Replicas, cfg.Peers[(i+r)%len(cfg.Peers)].ID)
		}
		n.infos = append(n.infos, info)
	}
	n.replicas = map[uint64]*replica{}
	n.replicasKick = make(chan struct{}, 1)
	if err := n.openLocalReplicas(); err != nil {
		return n, err
	}
	var opts []connect.HandlerOption
	if cfg.APIToken != "" {
		opts = append(opts, api.WithToken(cfg.APIToken))
	}
	mux := http.NewServeMux()
	mux.Handle("/", api.NewHandler(NewService(n).Backends(), opts...))
	for path, h := range n.HTTPHandlers() {
		mux.Handle(path, h)
	}
	mux.Handle(savepointPartPath, n.savepointPartHandler())
	if cfg.Pprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	n.apiSrv = api.Server(cfg.APIAddr, mux)
	n.apiSrv.ErrorLog = slog.NewLogLogger(n.log.With("component", "api").Handler(), slog.LevelWarn)
	n.wg.Add(1)
	srv, apiLn := n.apiSrv, n.apiLn // Close clears the fields
	go func() {
		defer n.wg.Done()
		if err := srv.Serve(apiLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
			n.log.Error("api server", "err", err)
		}
	}()
	n.wg.Add(1)
	go n.initLoop()
	if err := n.joinGossip(); err != nil {
		return n, err
	}
	n.wg.Add(2)
	go n.manageReplicas()
	go n.manageCluster()
	return n, nil
}

// withHost is addr (host:port) with its host replaced.
func withHost(addr, host string) string {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	return net.JoinHostPort(host, port)
}

// stringAddr is a configured host:port used as an advertised address.
type stringAddr string

func (a stringAddr) Network() string { return "tcp" }
func (a stringAddr) String() string  { return string(a) }

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// initLoop records the cluster layout in the metadata group once a leader
// exists (idempotent: only the first init takes effect).
func (n *Node) initLoop() {
	defer n.wg.Done()
	for {
		m, changed := n.meta.fsm.View()
		if m.KeyGroups != 0 {
			return
		}
		if n.meta.raft.State() == raft.Leader {
			var nodes []meta.Node
			for _, p := range n.cfg.Peers {
				nodes = append(nodes, meta.Node{ID: p.ID, RaftAddr: p.RaftAddr, APIAddr: p.APIAddr, GossipAddr: p.GossipAddr})
			}
			_, err := n.meta.propose(n.ctx, meta.Init{ClusterID: "cep", KeyGroups: n.cfg.KeyGroups, Shards: n.infos,
				Nodes: nodes, Replication: n.cfg.Replicas})
			if err == nil {
				return
			}
		}
		select {
		case <-n.ctx.Done():
			return
		case <-changed:
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Close stops the node: leader loops, shards, metadata group, transport,
// NATS. Safe to call more than once. The Raft groups this node leads hand
// their leadership to another replica first (for at most closeHandOff), so
// a planned stop or rolling restart pauses them for a transfer instead of
// an election after the leader's silence.
func (n *Node) Close() error {
	var errs []error
	n.handOffLeadership(closeHandOff)
	if n.apiSrv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		if err := n.apiSrv.Shutdown(ctx); err != nil {
			n.apiSrv.Close()
		}
		cancel()
		n.apiSrv = nil
	} else if n.apiLn != nil {
		n.apiLn.Close()
	}
	if n.cancel != nil {
		n.cancel()
	}
	errs = append(errs, n.closeReplicas())
	if n.gossip != nil {
		if err := n.gossip.Leave(time.Second); err != nil {
			n.log.Debug("leaving the gossip", "err", err)
		}
		errs = append(errs, n.gossip.Close())
	}
	if n.meta != nil {
		errs = append(errs, n.meta.close())
	}
	if n.mux != nil {
		errs = append(errs, n.mux.Close())
	}
	// the leader loops still read n.meta until they have returned
	n.wg.Wait()
	// a replica manageReplicas opened while the first call closed them
	errs = append(errs, n.closeReplicas())
	n.meta = nil
	if n.nc != nil {
		n.nc.Close()
	}
	if n.ns != nil {
		n.ns.Shutdown()
		n.ns.WaitForShutdown()
		n.ns = nil
	}
	if n.peerTLS != nil {
		n.peerTLS.CloseIdleConnections()
	}
	return errors.Join(errs...)
}

// apiURL is the base URL of the API served at addr by a node of this
// cluster (https when the cluster uses TLS).
func (n *Node) apiURL(addr string) string {
	if n.cfg.TLS != nil {
		return "https://" + addr
	}
	return "http://" + addr
}

// closeHandOff bounds how long Close waits for leadership transfers.
const closeHandOff = 3 * time.Second

// handOffLeadership transfers the leadership of every group this node leads
// and shares with another voter, all at once, waiting at most timeout.
func (n *Node) handOffLeadership(timeout time.Duration) {
	var groups []*raft.Raft
	for _, sh := range n.Shards() {
		groups = append(groups, sh.Raft())
	}
	if n.meta != nil {
		groups = append(groups, n.meta.raft)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var wg sync.WaitGroup
	for _, r := range groups {
		if r.State() != raft.Leader {
			continue
		}
		f := r.GetConfiguration()
		if f.Error() != nil {
			continue
		}
		voters := 0
		for _, srv := range f.Configuration().Servers {
			if srv.Suffrage == raft.Voter {
				voters++
			}
		}
		if voters < 2 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := shard.Wait(ctx, r.LeadershipTransfer()); err != nil {
				n.log.Debug("leadership stays until shutdown", "err", err)
			}
		}()
	}
	wg.Wait()
}

// APIAddr is the address the API listens on.
func (n *Node) APIAddr() string { return n.cfg.APIAddr }

// GossipAddr is the address (host:port) of this node's membership gossip,
// what others give as Join to join the cluster.
func (n *Node) GossipAddr() string { return n.gossip.Addr() }

// NATSURL is the URL of the NATS server the node uses.
func (n *Node) NATSURL() string {
	if n.ns != nil {
		return n.ns.ClientURL()
	}
	return n.cfg.NATSURL
}

// JetStream returns the node's JetStream context.
func (n *Node) JetStream() jetstream.JetStream { return n.js }

// Meta returns a copy of the current metadata.
func (n *Node) Meta() *meta.Meta {
	m, _ := n.meta.fsm.View()
	return m
}

// IsMetaLeader reports whether this node leads the metadata group.
func (n *Node) IsMetaLeader() bool { return n.meta.raft.State() == raft.Leader }

// MetaLeader returns the id of the metadata leader, if known.
func (n *Node) MetaLeader() string {
	_, id := n.meta.raft.LeaderWithID()
	return string(id)
}

// Shards returns this node's shard replicas, by shard id.
func (n *Node) Shards() []*shard.Shard {
	n.replicasMu.RLock()
	defer n.replicasMu.RUnlock()
	out := make([]*shard.Shard, 0, len(n.replicas))
	for _, r := range n.replicas {
		out = append(out, r.sh)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID() < out[j].ID() })
	return out
}

// Config returns the node's configuration with defaults applied.
func (n *Node) Config() Config { return n.cfg }

// Propose applies a metadata change through the metadata leader.
func (n *Node) Propose(ctx context.Context, c meta.Command) (any, error) {
	return n.meta.propose(ctx, c)
}

// WaitReady waits until the cluster is initialised and every shard of this
// node has a leader.
func (n *Node) WaitReady(ctx context.Context) error {
	for {
		ready := n.Meta().KeyGroups != 0
		for _, sh := range n.Shards() {
			if addr, _ := sh.Raft().LeaderWithID(); addr == "" {
				ready = false
			}
		}
		if ready {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// sourcesOf lists the sources read by the live patterns (derived sources
// for re-keyed ones), sorted.
func sourcesOf(m *meta.Meta) []string {
	set := map[string]bool{}
	for _, name := range m.PatternNames() {
		for _, s := range m.Patterns[name].ReadsOf() {
			set[s] = true
		}
	}
	out := make([]string, 0, len(set))
	for s := range set {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// outputSubject is where a pattern's records go by default.
func outputSubject(pattern string) string { return OutputSubjectRoot + pattern }

// validSourceName checks a source name is usable as a subject token.
func validSourceName(s string) error {
	if s == "" || strings.ContainsAny(s, ".*> \t") || len(s) > 64 {
		return fmt.Errorf("source name %q: use letters, digits, '-' and '_' (at most 64)", s)
	}
	return nil
}
