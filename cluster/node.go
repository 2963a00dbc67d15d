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
	"regexp"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"github.com/hashicorp/raft"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/cepcluster/cep/api"
	"github.com/cepcluster/cep/cluster/gossip"
	"github.com/cepcluster/cep/cluster/leader"
	"github.com/cepcluster/cep/cluster/meta"
	"github.com/cepcluster/cep/cluster/peer"
	"github.com/cepcluster/cep/cluster/plan"
	"github.com/cepcluster/cep/cluster/transport"
	"github.com/cepcluster/cep/console"
	"github.com/cepcluster/cep/internal/clusterversion"
	"github.com/cepcluster/cep/internal/raftlog"
	"github.com/cepcluster/cep/keygroup"
	"github.com/cepcluster/cep/shard"
)

// Node is one cepnode process: NATS connection (and optionally the embedded
// server), the Raft mux, the metadata group, this node's shard replicas and
// the leader loops of the shards it leads. Start launches everything; Close
// stops the node's goroutines first, then what they use, and waits.
type Node struct {
	cfg    Config
	log    *slog.Logger
	ns     *server.Server
	conn   atomic.Pointer[natsConn] // the node's NATS connection: made anew when NATS closes it (redialNATS), so read it each time
	mux    *transport.Mux
	muxErr chan error // the mux's Serve, on its own goroutine: Close waits for it after closing the mux
	meta   *metaGroup
	gossip *gossip.Gossip
	// dialNATS connects as the node connected at start; redialed, guarded
	// by redialedMu, is closed (and replaced) each time conn is made anew:
	// what hangs on the old connection is made again
	dialNATS   func() (*nats.Conn, error)
	redialedMu sync.Mutex
	redialed   chan struct{}
	// replicas are this node's shard replicas by shard id, each with its
	// leader loop; they change as the cluster places replicas
	replicas *replicaSet
	// clocks are the source clocks of the shards this node leads
	clocks clockStatuses
	// infos is the shard layout a new cluster starts with (Config.Peers)
	infos []meta.ShardInfo
	// advertised are the addresses others reach this node at (its entry
	// in Peers, else built from AdvertiseHost, else the listeners'); the
	// Raft address is the mux's
	advertised Peer
	// metaFSM is n.meta's state machine once it is open, for what runs
	// before (the mux's dials look member ids up in it)
	metaFSM atomic.Pointer[meta.FSM]
	apiLn   net.Listener
	apiSrv  *http.Server
	// peerHTTP calls other nodes' APIs (forwarded changes, savepoint parts,
	// health and progress probes); peerTLS is its own transport with TLS.
	peerHTTP *http.Client
	peerTLS  *http.Transport
	// auth are the API's tokens: the users' (Config.APIToken and Tokens)
	// and, with a cluster secret, the node credential (peer.go)
	auth *api.Tokens

	applyLatency prometheus.Histogram // proposal to applied, per ingest batch
	// readPaused is 1 while a shard leader does not read a stream, by
	// reason: "alignment" (the source runs ahead of the others a pattern
	// aligns) or "outbox" (the outbox holds its limit)
	readPaused *prometheus.GaugeVec
	// streamMissing is 1 while a stream a shard leader reads is gone
	streamMissing *prometheus.GaugeVec
	// natsLink is what the node's probes found of its NATS connection
	natsLink natsLink
	// unread are the streams this node's shard leaders do not read, and why
	unread     unreadStreams
	rpcMetrics *api.RPCMetrics // the API's calls, by procedure and code
	// membership: joining the gossip, and the metadata leader's loop
	membership *membership
	// quarantine: this node's replicas with damaged files (quarantine.go)
	quarantine *quarantiner

	// lock is held on the data directory until Close has stopped all
	lock *dataDirLock

	ctx    context.Context
	cancel context.CancelFunc
	// failed carries why the node cannot go on (Failed)
	failed chan error
	// wg counts the node's goroutines, all started by spawn; closing,
	// under spawnMu, stops spawn once Close waits for them
	spawnMu sync.Mutex
	closing bool
	wg      sync.WaitGroup
}

// spawn runs f on a goroutine of the node, which Close cancels (n.ctx) and
// waits for. Once Close has begun it starts nothing and reports false: a
// goroutine started then (a quarantine told by a replica's state machine,
// say) could run after Close's Wait, on what Close has closed.
func (n *Node) spawn(f func()) bool {
	n.spawnMu.Lock()
	defer n.spawnMu.Unlock()
	if n.closing {
		return false
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		f()
	}()
	return true
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
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if len(cfg.Peers) == 0 && cfg.NATSURL == "" {
		return nil, errors.New("a node joining a cluster needs the cluster's NATS (Config.NATSURL), not an embedded server of its own")
	}
	// before anything reads or writes the directory (the secret, NATS's
	// store, the Raft logs)
	lock, err := lockDataDir(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	if err := cfg.resolveSecret(cfg.Logger.With("node", cfg.NodeID)); err != nil {
		lock.release()
		return nil, err
	}
	if err := cfg.checkExposure(cfg.Logger.With("node", cfg.NodeID)); err != nil {
		lock.release()
		return nil, err
	}
	n = &Node{cfg: cfg, log: cfg.Logger.With("node", cfg.NodeID), lock: lock}
	n.applyLatency = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "cep_raft_apply_seconds",
		Help:    "Time from proposing an ingest batch to its being applied on the leader.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
	})
	n.readPaused = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "cep_read_paused",
		Help: "1 while a shard's leader does not read a stream: reason \"alignment\" (watermark alignment), \"outbox\" (unpublished records at the outbox limit) or \"stream\" (the stream was created anew: its sequences are not those the shard's positions count in).",
	}, []string{"shard", "stream", "reason"})
	n.streamMissing = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "cep_source_stream_missing",
		Help: "1 while a stream a shard leader reads (a source's, or a derived source's) does not exist.",
	}, []string{"shard", "stream"})
	n.rpcMetrics = api.NewRPCMetrics()
	n.quarantine = newQuarantiner(n)
	n.replicas = newReplicaSet(n)
	n.membership = &membership{n: n}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	n.failed = make(chan error, 1)
	n.peerHTTP = http.DefaultClient
	if cfg.TLS != nil {
		n.peerTLS = http.DefaultTransport.(*http.Transport).Clone()
		n.peerTLS.DialTLSContext = cfg.TLS.DialTLSContext // verifies against the CAs of the moment
		n.peerTLS.ForceAttemptHTTP2 = true
		n.peerHTTP = &http.Client{Transport: n.peerTLS}
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return n, err
	}
	url := cfg.NATSURL
	if url == "" {
		n.ns, err = StartSecureEmbeddedNATS(filepath.Join(cfg.DataDir, "nats"), cfg.NATSHost, cfg.NATSPort, n.log.With("component", "nats"), cfg.Secret)
		if err != nil {
			if le := (*natsListenError)(nil); errors.As(err, &le) {
				return n, &ConfigError{Field: "NATSPort", Msg: ": " + le.Error()}
			}
			return n, err
		}
		url = n.ns.ClientURL()
	}
	n.dialNATS = func() (*nats.Conn, error) {
		return dialNATS(url, cfg.NATSCreds, cfg.NATSCA, "cepnode-"+cfg.NodeID, cfg.Secret)
	}
	n.redialed = make(chan struct{})
	nc, err := dialNATSWaiting(ctx, n.dialNATS, cfg.NATSURL != "", cfg.NATSConnectWait, n.log.With("nats", url))
	if err != nil {
		return n, fmt.Errorf("connect to NATS at %s: %w", url, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return n, err
	}
	n.conn.Store(&natsConn{nc, js})
	if err := EnsureOutputStream(ctx, n.JetStream(), cfg.OutputLimits); err != nil {
		return n, fmt.Errorf("output stream: %w", err)
	}
	ln, err := net.Listen("tcp", cfg.RaftAddr)
	if err != nil {
		return n, &ConfigError{Field: "RaftAddr", Msg: fmt.Sprintf(" %s: raft listener: %v", cfg.RaftAddr, err)}
	}
	n.apiLn, err = net.Listen("tcp", cfg.APIAddr)
	if err != nil {
		ln.Close()
		return n, &ConfigError{Field: "APIAddr", Msg: fmt.Sprintf(" %s: api listener: %v", cfg.APIAddr, err)}
	}
	cfg.APIAddr = n.apiLn.Addr().String()
	n.cfg.APIAddr = cfg.APIAddr
	n.apiLn = api.LimitConns(n.apiLn, api.MaxConns, api.MaxConnsPerHost)
	if cfg.TLS != nil {
		n.apiLn = tls.NewListener(n.apiLn, cfg.TLS.APIServer())
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
	n.mux = transport.NewMux(ln, advertise, n.log.With("component", "mux"))
	if cfg.TLS != nil {
		n.mux.UseTLS(cfg.TLS.PeerServer(), cfg.TLS.Client())
	}
	n.mux.UseSecret(cfg.Secret) // zero (Insecure): unauthenticated streams
	n.mux.SetNodeID(cfg.NodeID)
	n.mux.ResolveID(n.raftIDAt)
	// not spawned: it ends only once Close has closed the mux, after the
	// node's goroutines
	n.muxErr = make(chan error, 1)
	go func() { n.muxErr <- n.mux.Serve() }()
	var voters []raft.Server
	for _, p := range cfg.Peers {
		voters = append(voters, raft.Server{ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.RaftAddr)})
	}
	layer, err := n.mux.Layer(0)
	if err != nil {
		return n, err
	}
	metaTrans := transport.NewTransport(layer, n.log)
	n.meta, err = n.quarantine.openMeta(filepath.Join(cfg.DataDir, "meta"), metaTrans, voters)
	if err != nil {
		// a group that did not open leaves its transport (and its listen
		// goroutine) to whoever made it; closing twice is harmless
		metaTrans.Close()
		return n, fmt.Errorf("metadata group: %w", err)
	}
	n.metaFSM.Store(n.meta.fsm)
	// the metadata as its last snapshot left it: a release that cannot
	// read the cluster's version stops before it writes anything
	if err := clusterversion.Unreadable(n.Meta().ActiveVersion()); err != nil {
		return n, err
	}
	// a new cluster's shard layout follows from the configuration; the
	// metadata group records it when the cluster is first initialised
	replication := min(cfg.Replicas, len(cfg.Peers))
	for i := 0; i < cfg.Shards && len(cfg.Peers) > 0; i++ {
		first, last := keygroup.BlockRange(i, cfg.Shards, cfg.KeyGroups)
		info := meta.ShardInfo{ID: uint64(i + 1), First: first, Last: last}
		for r := 0; r < replication; r++ {
			info.Replicas = append(info.Replicas, cfg.Peers[(i+r)%len(cfg.Peers)].ID)
		}
		n.infos = append(n.infos, info)
	}
	if err := n.replicas.openLocal(); err != nil {
		return n, err
	}
	n.auth = n.cfg.apiTokens()
	if n.auth.Users() == 0 && !isLoopback(n.apiLn.Addr()) {
		n.log.Warn("the API is open to anyone who reaches it: no API token (APIToken, Tokens) on a non-loopback address", "addr", cfg.APIAddr)
	}
	mux := http.NewServeMux()
	// roles are checked before a request body is read (and so need no
	// interceptor as well)
	// preflights are answered before the token check: they carry none
	mux.Handle("/", api.CORS(cfg.CORSOrigins, api.Authorize(n.auth, api.NewHandler(NewService(n).Backends(), connect.WithInterceptors(n.rpcMetrics)))))
	for path, h := range n.HTTPHandlers() {
		if path == "/metrics" && cfg.MetricsAuth {
			h = api.AuthorizeRole(n.auth, api.Access{Least: api.RoleReader}, h)
		}
		mux.Handle(path, h)
	}
	mux.Handle(peer.SavepointPartPath, n.savepointPartHandler())
	// the web console's files are public (the page asks for a token);
	// everything it shows comes through the API and its role checks
	ui := console.Handler(n.auth)
	mux.Handle(console.Prefix, ui)
	mux.Handle("GET /{$}", ui)
	if cfg.Pprof {
		// admins only, and without /debug/pprof/cmdline: the command
		// line may hold secrets (--token itself)
		prof := http.NewServeMux()
		prof.HandleFunc("/debug/pprof/", pprof.Index)
		prof.HandleFunc("/debug/pprof/cmdline", http.NotFound)
		prof.HandleFunc("/debug/pprof/profile", pprof.Profile)
		prof.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		prof.HandleFunc("/debug/pprof/trace", pprof.Trace)
		mux.Handle("/debug/pprof/", api.AuthorizeRole(n.auth, api.Access{Least: api.RoleAdmin}, prof))
	}
	n.apiSrv = api.Server(cfg.APIAddr, mux)
	n.apiSrv.ErrorLog = slog.NewLogLogger(n.log.With("component", "api").Handler(), slog.LevelWarn)
	srv, apiLn := n.apiSrv, n.apiLn // Close clears the fields
	n.spawn(func() {
		if err := srv.Serve(apiLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
			n.log.Error("api server", "err", err)
		}
	})
	n.spawn(n.membership.initLoop)
	if err := n.membership.joinGossip(); err != nil {
		return n, &ConfigError{Field: "GossipAddr", Msg: ": " + err.Error()} // it names the address
	}
	n.spawn(n.probeNATS)
	n.spawn(n.replicas.run)
	n.spawn(n.membership.run)
	n.spawn(n.forgetDeleted)
	n.spawn(n.moveVersion)
	if n.ns != nil && !cfg.Secret.IsZero() {
		n.spawn(n.guardDerivedSources)
	}
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

// Close stops the node: API, the node's goroutines, shards (and their
// leader loops), gossip, metadata group, transport, NATS. Safe to call
// more than once. The Raft groups this node leads hand their leadership to
// another replica first (for at most closeHandOff), so a planned stop or
// rolling restart pauses them for a transfer instead of an election after
// the leader's silence.
func (n *Node) Close() error {
	var errs []error
	var groups []handOff
	for _, sh := range n.Shards() {
		groups = append(groups, handOff{sh.Raft(), func(ctx context.Context) (string, string, bool) { return n.closingTarget(ctx, sh) }})
	}
	if n.meta != nil {
		groups = append(groups, handOff{r: n.meta.raft})
	}
	handOffLeadership(groups, closeHandOff, n.log)
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
	n.spawnMu.Lock()
	n.closing = true
	n.spawnMu.Unlock()
	if n.cancel != nil {
		n.cancel()
	}
	// the goroutines first: they open and close replicas and use the
	// gossip, the metadata group and the mux until they have returned, so
	// that the replicas are closed once, after the last was opened
	n.wg.Wait()
	if n.replicas != nil {
		errs = append(errs, n.replicas.closeAll())
	}
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
		if n.muxErr != nil {
			errs = append(errs, <-n.muxErr)
			n.muxErr = nil
		}
	}
	n.meta = nil
	if c := n.conn.Load(); c != nil {
		c.nc.Close()
	}
	if n.ns != nil {
		n.ns.Shutdown()
		n.ns.WaitForShutdown()
		n.ns = nil
	}
	if n.peerTLS != nil {
		n.peerTLS.CloseIdleConnections()
	}
	n.lock.release()
	return errors.Join(errs...)
}

// apiURL is the base URL of the API served at addr by a node of this
// cluster (https when the cluster uses TLS).
func (c *Config) apiURL(addr string) string {
	if c.TLS != nil {
		return "https://" + addr
	}
	return "http://" + addr
}

// closeHandOff bounds how long Close waits for leadership transfers.
const closeHandOff = 3 * time.Second

// closeReports bounds how long Close asks the other replicas' nodes about
// them before it hands a shard over: past it, Raft picks the target.
const closeReports = time.Second

// handOff is a Raft group a closing node may lead, and for a shard the
// replica to hand it to (closingTarget); nil target: the voter Raft finds
// most up to date.
type handOff struct {
	r      *raft.Raft
	target func(ctx context.Context) (id, addr string, ok bool)
}

// handOffLeadership transfers the leadership of every one of groups this
// node leads and shares with another voter, all at once, waiting at most
// timeout: a shard to the replica plan.HandOverTarget picks (one that
// reaches NATS and has nearly caught up, the preferred one first); the
// metadata group, and a shard none of whose replicas qualifies or answers
// in time, to the voter Raft finds most up to date.
func handOffLeadership(groups []handOff, timeout time.Duration, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var wg sync.WaitGroup
	for _, g := range groups {
		r := g.r
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
			fut := r.LeadershipTransfer
			if g.target != nil {
				if to, addr, ok := g.target(ctx); ok {
					fut = func() raft.Future { return r.LeadershipTransferToServer(raft.ServerID(to), raft.ServerAddress(addr)) }
				}
			}
			if err := raftlog.Wait(ctx, fut()); err != nil {
				log.Debug("leadership stays until shutdown", "err", err)
			}
		}()
	}
	wg.Wait()
}

// closingTarget is the replica a closing node hands shard sh to, and its
// Raft address.
func (n *Node) closingTarget(ctx context.Context, sh *shard.Shard) (id, addr string, ok bool) {
	if n.meta == nil {
		return "", "", false
	}
	ctx, cancel := context.WithTimeout(ctx, closeReports)
	defer cancel()
	m, _ := n.meta.fsm.View()
	id, ok = plan.HandOverTarget(plan.HandOver{Trigger: plan.Closing, Self: n.cfg.NodeID, Preferred: leader.PreferredOf(m, sh.ID()),
		Applied: sh.FSM().Index(), Replicas: n.replicaReports(ctx, sh)})
	if !ok {
		return "", "", false
	}
	p, found := n.peer(id)
	return id, p.RaftAddr, found
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
func (n *Node) JetStream() jetstream.JetStream { return n.conn.Load().js }

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
	return n.replicas.list()
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

// outputSubject is where a pattern's records go by default.
func outputSubject(pattern string) string { return keygroup.OutputSubjectRoot + pattern }

// validSourceName checks a source name is usable as a subject token.
// (the name is in its subjects, its dead-letter subject and its stream's
// name: kept short and plain, none of them is past a NATS bound).
func validSourceName(s string) error {
	if !sourceNameRE.MatchString(s) {
		return fmt.Errorf("source name %.64q: use letters, digits, '-' and '_' (at most 64)", s)
	}
	return nil
}

var sourceNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
