package cluster

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"github.com/cepcluster/cep/api"
	"github.com/cepcluster/cep/cluster/secret"
	"github.com/cepcluster/cep/cluster/transport"
	"github.com/cepcluster/cep/nfa"
	"github.com/cepcluster/cep/shard"
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
	// the gossip; every node needs the same key. Without it the gossip is
	// encrypted with a key derived from Secret, and only with Insecure is
	// it in clear, where anyone reaching the gossip port can announce
	// members (the cluster still takes one only once its API answers,
	// over TLS when the cluster uses it).
	GossipKey []byte
	// NoAutoSplit: the cluster does not split shards when it has more
	// active nodes than shards (it does by default, so that each node leads
	// a shard; only cepctl shard split splits then).
	NoAutoSplit bool
	// SavepointDir is the directory dir:// savepoint targets and
	// locations must lie in (default <DataDir>/savepoints): a relative
	// dir:// path is taken inside it, and one resolving outside it (.., an
	// absolute path elsewhere, a symbolic link out) is refused, so an API
	// client cannot have a node write or read files anywhere it can.
	SavepointDir string
	APIToken     string // an admin's bearer token for the API; empty: none
	// Tokens are more bearer tokens of the API, each with its role
	// (api.ReadTokenFile). Without these and APIToken the API is open to
	// anyone reaching it.
	Tokens *api.Tokens
	// MetricsAuth: /metrics wants a token of role reader (or more), as
	// the API does; without it /metrics is open.
	MetricsAuth bool
	// CORSOrigins are the origins (scheme://host[:port], "*" for any, one
	// "*" within one for part of it) whose browser pages may call the API
	// (api.CORS); empty, the default: none.
	CORSOrigins []string
	// Secret is the cluster secret (package secret): members prove with it
	// that they belong (gossip, Raft, node-to-node calls, embedded NATS).
	// A given one is kept in DataDir (Start refuses a data directory that
	// keeps another). Zero: the one kept in DataDir, or, for the first
	// start of a single-node cluster (Peers only this node, no Join), a new
	// one kept there; a node of several without one does not start.
	Secret secret.Secret
	// Insecure: no cluster secret, no authentication between members, on
	// the operator's explicit request; the node says so at start and in
	// its status.
	Insecure bool
	// TLS, when set, secures the Raft mux (mutual TLS) and the API (HTTPS);
	// see transport.TLS. The embedded NATS server stays plain, on its loopback host.
	TLS    *transport.TLS
	Pprof  bool // serve net/http/pprof under /debug/pprof/ on the API address, to admins only, without the command line
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
	// ClockEvery is how often a shard leader reports its sources' event
	// time to the other shards and logs the clocks across them (default
	// 50ms): the delay a watermark takes to cross shards.
	ClockEvery time.Duration
	// IdleTimeout is a pattern's idleTimeout when its document sets none
	// (default DefaultIdleTimeout): how long a shard without events of a
	// source may hold the source's clock back.
	IdleTimeout time.Duration
	// StreamCheckEvery is how often a shard leader checks that the streams
	// it reads still exist (default 10s).
	StreamCheckEvery time.Duration
	// HandOverAfter is how long a replica that is not its shard's preferred
	// leader leads before handing leadership over (default 2s).
	HandOverAfter time.Duration
	// NATSHandOverAfter is how long a shard leader's node may go without
	// an answer from NATS before the leader hands its shard to a replica
	// whose node has one (default 5s): until then it reads and publishes
	// nothing, and a shorter cut is not worth a leadership change.
	NATSHandOverAfter time.Duration
	// NATSConnectWait is how long a starting node waits for an external
	// NATS server (NATSURL) to accept its connection before it gives up
	// (default 30s): nodes and their NATS started together, by hand or
	// by an orchestrator, come up in any order. Negative: no wait.
	NATSConnectWait time.Duration
	// DeployWait bounds how long DeployPattern, UpdatePattern and
	// DeletePattern wait for every shard to apply the change before they
	// return the shards that have not (default 10s; the request's
	// deadline if sooner).
	DeployWait time.Duration
	// MaxKeys bounds the keys a pattern holds state for on one shard
	// when its document sets no maxKeys (default shard.DefaultMaxKeys),
	// and is the most a document may set: an event of a new key past it
	// is dead-lettered. It is logged with each deployment, so replicas
	// agree whatever their configuration.
	MaxKeys int
	// MaxStateBytes bounds the raw bytes of the events a pattern holds on
	// one shard when its document sets no maxStateBytes (default
	// shard.DefaultMaxStateBytes), and is the most a document may set: an
	// event that would take them past it is dead-lettered. Logged with
	// each deployment, as MaxKeys.
	MaxStateBytes int64
	// TailMaxStreams bounds the MatchService.Tail streams the node serves
	// at once (default 64), TailMaxStreamsPerCaller those of one caller
	// (its bearer token, else its host; default 16): each holds a
	// JetStream consumer and a buffer, so that nobody can open them
	// without bound. One past a limit gets ResourceExhausted.
	TailMaxStreams          int
	TailMaxStreamsPerCaller int
	// TailBufferRecords and TailBufferBytes bound the records a tail holds
	// for a client that does not take them (default 1024 and 1 MiB): a
	// tail whose client falls that far behind is cut off as a slow
	// consumer, as NATS does, instead of buffering the output for it.
	TailBufferRecords int
	TailBufferBytes   int
	// Now is the clock used for processing-time ticks and logged times;
	// default time.Now. It is read by the proposer only: the FSMs see the
	// logged value.
	Now func() time.Time

	// Testing is for tests only (fault injection, shortened timings):
	// nil in production, and only test code may name it (internal/lint).
	Testing *Testing
}

// Testing holds what tests change in a node and nothing else may.
type Testing struct {
	// FastGossip shortens the gossip's probe and suspicion timings, and
	// lets DeadAfter go below MinDeadAfter.
	FastGossip bool
	// ReconcileDelay: a shard leader of this node waits this long after
	// its metadata replica changes before it looks at the metadata and
	// proposes the deployments and deletions that follow into its shard's
	// log (changes made meanwhile come together).
	ReconcileDelay time.Duration
	// ApplyDelay: every shard state machine of this node sleeps this long
	// before applying each log entry.
	ApplyDelay time.Duration
	// RefuseProposal: a shard leader of this node does not propose the
	// entry (of kind shard.OpEvents or shard.OpForward) of the events read
	// from stream whose positions are first to last when it returns true,
	// and takes it as refused, as Raft refuses an entry during a
	// leadership transfer.
	RefuseProposal func(shard uint64, stream string, kind shard.OpKind, first, last uint64) bool
}

// DefaultConfig returns a Config with every default filled in: the values
// Start gives the zero fields, and those cepnode's flags show.
func DefaultConfig() Config {
	return Config{
		NodeID:            "node1",
		DataDir:           "./data",
		RaftAddr:          "127.0.0.1:7000",
		APIAddr:           "127.0.0.1:7070",
		NATSHost:          "127.0.0.1",
		NATSPort:          4222,
		KeyGroups:         256,
		Replicas:          3,
		GossipAddr:        "127.0.0.1:0",
		DeadAfter:         5 * time.Minute,
		Logger:            slog.New(slog.DiscardHandler),
		Raft:              shard.DefaultRaftConfig(),
		IngestBatch:       2000,
		IngestLinger:      5 * time.Millisecond,
		OutboxLimit:       50_000,
		TickEvery:         time.Second,
		ClockEvery:        50 * time.Millisecond,
		IdleTimeout:       DefaultIdleTimeout,
		StreamCheckEvery:  10 * time.Second,
		HandOverAfter:     2 * time.Second,
		NATSHandOverAfter: 5 * time.Second,
		NATSConnectWait:   30 * time.Second,
		DeployWait:        10 * time.Second,
		MaxKeys:           shard.DefaultMaxKeys,
		MaxStateBytes:     shard.DefaultMaxStateBytes,
		Now:               time.Now,

		TailMaxStreams:          64,
		TailMaxStreamsPerCaller: 16,
		TailBufferRecords:       1024,
		TailBufferBytes:         1 << 20,
	}
}

// setDefaults gives every zero field its DefaultConfig value; the peers
// and the shard count follow from the node's own addresses.
func (c *Config) setDefaults() {
	d := DefaultConfig()
	orDefault(&c.NodeID, d.NodeID)
	orDefault(&c.DataDir, d.DataDir)
	orDefault(&c.SavepointDir, filepath.Join(c.DataDir, "savepoints"))
	orDefault(&c.RaftAddr, d.RaftAddr)
	orDefault(&c.APIAddr, d.APIAddr)
	orDefault(&c.NATSHost, d.NATSHost)
	orDefault(&c.NATSPort, d.NATSPort)
	if len(c.Peers) == 0 && len(c.Join) == 0 {
		c.Peers = []Peer{{ID: c.NodeID, RaftAddr: c.RaftAddr, APIAddr: c.APIAddr}}
	}
	orDefault(&c.Shards, max(1, len(c.Peers)))
	orDefault(&c.KeyGroups, d.KeyGroups)
	orDefault(&c.Replicas, d.Replicas)
	orDefault(&c.GossipAddr, d.GossipAddr)
	orDefault(&c.DeadAfter, d.DeadAfter)
	orDefault(&c.Logger, d.Logger)
	orDefault(&c.Raft, d.Raft)
	orDefault(&c.IngestBatch, d.IngestBatch)
	orDefault(&c.IngestLinger, d.IngestLinger)
	orDefault(&c.OutboxLimit, d.OutboxLimit)
	orDefault(&c.TickEvery, d.TickEvery)
	orDefault(&c.ClockEvery, d.ClockEvery)
	orDefault(&c.IdleTimeout, d.IdleTimeout)
	orDefault(&c.StreamCheckEvery, d.StreamCheckEvery)
	orDefault(&c.HandOverAfter, d.HandOverAfter)
	orDefault(&c.NATSHandOverAfter, d.NATSHandOverAfter)
	orDefault(&c.NATSConnectWait, d.NATSConnectWait)
	orDefault(&c.DeployWait, d.DeployWait)
	orDefault(&c.MaxKeys, d.MaxKeys)
	orDefault(&c.MaxStateBytes, d.MaxStateBytes)
	orDefault(&c.TailMaxStreams, d.TailMaxStreams)
	orDefault(&c.TailMaxStreamsPerCaller, d.TailMaxStreamsPerCaller)
	orDefault(&c.TailBufferRecords, d.TailBufferRecords)
	orDefault(&c.TailBufferBytes, d.TailBufferBytes)
	if c.Now == nil {
		c.Now = d.Now
	}
}

func orDefault[T comparable](v *T, d T) {
	var zero T
	if *v == zero {
		*v = d
	}
}

// MinDeadAfter is the shortest DeadAfter outside tests: a node restarting
// or briefly partitioned would otherwise have its replicas moved.
const MinDeadAfter = 10 * time.Second

// ConfigError is a Config field whose value is refused (by Validate, or
// by Start: an address or port that cannot be listened on). Field is the
// Config field's name; cepnode names its flag instead.
type ConfigError struct {
	Field string
	// Msg follows the name: " must be at least 1", ": not host:port".
	Msg string
}

func (e *ConfigError) Error() string { return "cluster: Config." + e.Field + e.Msg }

// Validate checks the values as they are (Start fills the zero fields
// with DefaultConfig's first): the first refused one is returned as a
// *ConfigError.
func (c *Config) Validate() error {
	bad := func(field, format string, a ...any) error {
		return &ConfigError{Field: field, Msg: fmt.Sprintf(format, a...)}
	}
	switch {
	case c.DeadAfter < MinDeadAfter && (c.Testing == nil || !c.Testing.FastGossip):
		return bad("DeadAfter", " must be at least %v (a node restarting or briefly partitioned would have its replicas moved)", MinDeadAfter)
	case c.NATSHandOverAfter < time.Second:
		return bad("NATSHandOverAfter", " must be at least 1s (a slow answer from NATS would move leaderships)")
	case c.Replicas < 1:
		return bad("Replicas", " must be at least 1")
	case c.KeyGroups < 1:
		return bad("KeyGroups", " must be at least 1")
	case c.Shards < 0:
		return bad("Shards", " must not be negative")
	case c.IngestBatch < 1:
		return bad("IngestBatch", " must be at least 1")
	case c.OutboxLimit < 1:
		return bad("OutboxLimit", " must be at least 1")
	case c.MaxKeys < 0 || c.MaxKeys > nfa.MaxKeysLimit:
		return bad("MaxKeys", " must be between 1 and %d", nfa.MaxKeysLimit)
	case c.MaxStateBytes < 0 || c.MaxStateBytes > nfa.MaxStateBytesLimit:
		return bad("MaxStateBytes", " must be between 1 and %d", int64(nfa.MaxStateBytesLimit))
	case c.DeployWait <= 0:
		return bad("DeployWait", " must be positive (a deploy that does not wait can miss the events published right after it)")
	case c.OutputLimits.MaxAge < 0 || c.OutputLimits.MaxAge > 0 && c.OutputLimits.MaxAge < OutputDuplicateWin:
		return bad("OutputLimits.MaxAge", " %v: at least %v, the window in which records published again after a failover are de-duplicated", c.OutputLimits.MaxAge, OutputDuplicateWin)
	case c.OutputLimits.MaxBytes < 0:
		return bad("OutputLimits.MaxBytes", " must not be negative")
	case c.Insecure && !c.Secret.IsZero():
		return bad("Insecure", " with a Secret: a node either authenticates its members with the cluster secret or runs insecure, not both")
	case len(c.GossipKey) != 0 && len(c.GossipKey) != 16 && len(c.GossipKey) != 24 && len(c.GossipKey) != 32:
		return bad("GossipKey", ": not a 16, 24 or 32-byte key")
	case c.TailMaxStreams < 0 || c.TailMaxStreamsPerCaller < 0 || c.TailBufferRecords < 0 || c.TailBufferBytes < 0:
		return bad("TailMaxStreams", ", TailMaxStreamsPerCaller, TailBufferRecords and TailBufferBytes must not be negative")
	case c.NATSCA != "" && c.NATSURL == "":
		return bad("NATSCA", " is for an external NATS server (NATSURL)")
	case len(c.Join) > 0 && len(c.Peers) == 0 && c.NATSURL == "":
		return bad("Join", " needs an external NATS: a joining node reads and publishes through the cluster's NATS, not an embedded server of its own")
	case strings.ContainsAny(c.APIToken, " \t\r\n"):
		return bad("APIToken", ": a token with white space") // never the token itself
	case c.APIToken != "" && c.Tokens.Role(c.APIToken) != api.RoleNone:
		return bad("APIToken", " is in Tokens as well")
	case c.MetricsAuth && c.APIToken == "" && c.Tokens.Users() == 0:
		return bad("MetricsAuth", " needs API tokens (APIToken or Tokens) to check")
	}
	if err := api.CheckOrigins(c.CORSOrigins); err != nil {
		return bad("CORSOrigins", ": %v", err)
	}
	for _, j := range c.Join {
		if _, _, err := net.SplitHostPort(j); err != nil {
			return bad("Join", ": %q is not host:port", j)
		}
	}
	return nil
}

// single reports whether the node starts a single-node cluster: its Peers
// only itself, no Join.
func (c *Config) single() bool {
	return len(c.Join) == 0 && len(c.Peers) == 1 && c.Peers[0].ID == c.NodeID
}

// resolveSecret settles the cluster secret at start (see Config.Secret):
// a given one is kept in DataDir (a data directory holding another is
// refused), else the one kept there is used, else a single-node cluster
// creates one and keeps it; a node of several without one is refused
// unless Insecure. It logs the creation of a secret, once, and the
// warning of an insecure node.
func (c *Config) resolveSecret(log *slog.Logger) error {
	path := filepath.Join(c.DataDir, secret.File)
	if c.Insecure {
		log.Warn("INSECURE: no cluster secret; members do not authenticate each other: anyone who reaches the Raft or gossip port can act as a member (run without --insecure, with a cluster secret)")
		if _, ok, _ := secret.Load(c.DataDir); ok {
			log.Warn("insecure: the cluster secret kept in the data directory is not used", "file", path)
		}
		return nil
	}
	if !c.Secret.IsZero() {
		if err := secret.Keep(c.DataDir, c.Secret); err != nil {
			if errors.Is(err, secret.ErrOtherCluster) {
				return fmt.Errorf("cluster secret: %w: the secret given is not the one kept there (wrong secret, or another cluster's data directory)", err)
			}
			return fmt.Errorf("cluster secret: keep it in %s: %w", c.DataDir, err)
		}
		return nil
	}
	s, ok, err := secret.Load(c.DataDir)
	if err != nil {
		return fmt.Errorf("cluster secret: %w", err)
	}
	if ok {
		c.Secret = s
		return nil
	}
	if !c.single() {
		return &ConfigError{Field: "Secret", Msg: " is needed by a node of a cluster of several (Peers, or Join): give every node the same secret (the one the first node keeps in its data directory), or set Insecure"}
	}
	s = secret.Generate()
	if err := secret.Keep(c.DataDir, s); err != nil {
		return fmt.Errorf("cluster secret: keep a new one in %s: %w", c.DataDir, err)
	}
	c.Secret = s
	log.Info("created the cluster secret; nodes joining this cluster need it (cepnode --cluster-secret-file, or CEPNODE_CLUSTER_SECRET)", "file", path)
	return nil
}

// checkExposure refuses a node with a listener other machines can reach
// (not on a loopback address) and neither TLS nor a cluster secret, unless
// Insecure, and warns of what travels in clear. Run after resolveSecret.
func (c *Config) checkExposure(log *slog.Logger) error {
	var exposed []string
	for _, l := range []struct{ name, addr string }{{"Raft", c.RaftAddr}, {"API", c.APIAddr}, {"gossip", c.GossipAddr}} {
		if !loopback(l.addr) {
			exposed = append(exposed, l.name+" "+l.addr)
		}
	}
	if len(exposed) == 0 {
		return nil
	}
	switch {
	case c.TLS == nil && c.Secret.IsZero() && !c.Insecure:
		return fmt.Errorf("cluster: %s reachable from other machines with neither TLS nor a cluster secret: give a secret (or TLS), bind to a loopback address, or set Insecure", strings.Join(exposed, ", "))
	case c.Insecure:
		log.Warn("INSECURE: listeners reachable from other machines without member authentication", "listeners", strings.Join(exposed, ", "))
	case c.TLS == nil && !loopback(c.APIAddr):
		log.Warn("the API is not TLS: bearer tokens and data travel in clear (give --tls-cert, --tls-key and --tls-ca)", "api", c.APIAddr)
	}
	return nil
}

// loopback reports whether addr (host:port) listens on a loopback address
// only: an empty host or a wildcard is every interface; a name other than
// localhost may resolve to anything.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// knobs returns the test knobs, zero outside tests.
func (c *Config) knobs() Testing {
	if c.Testing == nil {
		return Testing{}
	}
	return *c.Testing
}
