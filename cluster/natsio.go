package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cepcluster/cep/cluster/meta"
	"github.com/cepcluster/cep/cluster/secret"
	"github.com/cepcluster/cep/keygroup"
)

// OutputStream is the JetStream stream that holds every pattern's output
// records and the dead letters. Its duplicate window de-duplicates records
// re-published after a failover (they carry their deterministic id as the
// message id).
const (
	OutputStream       = "CEP_OUT"
	OutputDuplicateWin = 30 * time.Minute
)

// The users of the embedded NATS server of a cluster with a secret. The
// node's user may do anything; the publisher's may publish events and
// nothing else (publisherPermissions). Their passwords are derived from
// the cluster secret, so every member can compute them and nobody else.
const (
	NATSNodeUser      = "cep-node"
	NATSPublisherUser = "cep-publisher"
	// NATSSubscriberUser reads the output and dead letters
	// (subscriberPermissions)
	NATSSubscriberUser = "cep-subscriber"
	// nodeInboxPrefix is where the node's replies arrive (JetStream API
	// answers, consumer deliveries, publish acks): not under _INBOX, which
	// publishers may subscribe to for their acks, so that no publisher can
	// read what the node reads.
	nodeInboxPrefix = "_CEP_NODE_INBOX"
)

// StartEmbeddedNATS starts an in-process NATS server with JetStream,
// storing under dir, listening on host:port (port -1 picks a free one),
// open to anyone who reaches it: StartSecureEmbeddedNATS with no secret.
func StartEmbeddedNATS(dir, host string, port int, logger *slog.Logger) (*server.Server, error) {
	return StartSecureEmbeddedNATS(dir, host, port, logger, secret.Secret{})
}

// StartSecureEmbeddedNATS is StartEmbeddedNATS whose server, for a
// non-zero sec, takes only the node's and the publisher's users
// (natsUsers): no anonymous client. A zero sec leaves it open. A port that
// cannot be listened on is reported at once, with the bind error, not
// after the readiness wait.
func StartSecureEmbeddedNATS(dir, host string, port int, logger *slog.Logger, sec secret.Secret) (*server.Server, error) {
	hostPort := net.JoinHostPort(host, strconv.Itoa(port))
	if port > 0 {
		// before the server recovers its JetStream store, which may take
		// long, only to fail to listen after
		ln, err := net.Listen("tcp", hostPort)
		if err != nil {
			return nil, &natsListenError{fmt.Sprintf("embedded nats: client port %d on %s: %v", port, hostPort, err)}
		}
		ln.Close()
	}
	opts, err := embeddedOptions(dir, host, port, sec)
	if err != nil {
		return nil, fmt.Errorf("embedded nats: %w", err)
	}
	if err := moveGlobalStore(dir, sec); err != nil {
		return nil, fmt.Errorf("embedded nats: %w", err)
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("embedded nats: %w", err)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	// the server reports a failed listen only to its logger (and then
	// never becomes ready): the first fatal message ends the wait
	fatal := make(chan string, 1)
	s.SetLoggerV2(natsLogger{l: logger, fatal: fatal}, false, false, false)
	s.Start()
	deadline := time.Now().Add(15 * time.Second)
	for !s.ReadyForConnections(50 * time.Millisecond) {
		select {
		case msg := <-fatal:
			s.Shutdown()
			return nil, &natsListenError{fmt.Sprintf("embedded nats on %s: %s", hostPort, msg)}
		default:
		}
		if time.Now().After(deadline) {
			s.Shutdown()
			return nil, fmt.Errorf("embedded nats on %s: not ready after 15s", hostPort)
		}
	}
	return s, nil
}

// natsListenError is the embedded server's failure to listen (its port
// taken, its host not one of this machine's), told apart from its other
// failures so that the error can name the port's setting.
type natsListenError struct{ msg string }

func (e *natsListenError) Error() string { return e.msg }

func embeddedOptions(dir, host string, port int, sec secret.Secret) (*server.Options, error) {
	opts := &server.Options{
		ServerName: "cep-embedded",
		Host:       host,
		Port:       port,
		JetStream:  true,
		StoreDir:   dir,
		NoSigs:     true,
		MaxPayload: 8 << 20,
	}
	if !sec.IsZero() {
		// the accounts and users of an external server's configuration
		// (NATSServerConfig), parsed from the same text
		if err := setNATSAccounts(opts, sec, DefaultPublisherLimits); err != nil {
			return nil, err
		}
	}
	return opts, nil
}

// guardDerivedSources keeps the publisher user of this node's embedded
// server off the subjects of the derived sources, which only the shards
// re-keying a source write: each time the metadata changes them, the
// publisher account maps each derived subject into deniedSubjectRoot,
// which its permissions deny, so a publish there is refused as a
// permissions violation.
//
// A mapping changes while the server runs; reloading the server's users
// with those subjects denied, as this did before, dropped every account's
// JetStream API import until the server had checked every connected
// client's password again (nats-server's reloadAuthorization), so a
// JetStream request in that moment was answered "no responders" — for
// microseconds with plain passwords, for a bcrypt comparison per client
// with hashed ones.
func (n *Node) guardDerivedSources() {
	acc, err := n.ns.LookupAccount(NATSPublisherAccount)
	if err != nil {
		n.log.Warn("embedded nats: cannot deny publishers the derived sources' subjects", "err", err)
		return
	}
	g := derivedGuard{acc: acc, have: map[string]bool{}}
	for {
		var want []string
		changed := n.meta.fsm.Watch(func(m *meta.Meta) {
			for _, s := range m.Sources {
				if s.Origin != "" {
					want = append(want, s.Subjects...)
				}
			}
		})
		if err := g.set(want); err != nil {
			n.log.Warn("embedded nats: cannot deny publishers a derived source's subject", "err", err)
		}
		select {
		case <-changed:
		case <-n.ctx.Done():
			return
		}
	}
}

// derivedGuard maps the subjects of the derived sources into
// deniedSubjectRoot in the publisher account acc; have are those mapped.
type derivedGuard struct {
	acc  *server.Account
	have map[string]bool
}

// set maps the subjects want and no others.
func (g *derivedGuard) set(want []string) error {
	var errs []error
	keep := map[string]bool{}
	for _, subj := range want {
		keep[subj] = true
		if g.have[subj] {
			continue
		}
		if err := g.acc.AddMapping(subj, deniedMapping(subj)); err != nil {
			errs = append(errs, fmt.Errorf("subject %s: %w", subj, err))
			continue
		}
		g.have[subj] = true
	}
	for subj := range g.have {
		if !keep[subj] {
			g.acc.RemoveMapping(subj)
			delete(g.have, subj)
		}
	}
	return errors.Join(errs...)
}

// deniedSubjectRoot is where the publisher account's mappings send a
// publish to a derived source's subject (guardDerivedSources): the
// publisher's permissions deny it.
const deniedSubjectRoot = "_CEP_DENIED"

// deniedMapping is the destination of subj's mapping: subj under
// deniedSubjectRoot, each wildcard carried over.
func deniedMapping(subj string) string {
	toks := strings.Split(subj, ".")
	w := 0
	for i, t := range toks {
		if t == "*" {
			w++
			toks[i] = "{{wildcard(" + strconv.Itoa(w) + ")}}"
		}
	}
	return deniedSubjectRoot + "." + strings.Join(toks, ".")
}

type natsLogger struct {
	l     *slog.Logger
	fatal chan<- string // the first fatal message, if any
}

func (n natsLogger) Noticef(format string, v ...any) { n.l.Debug(fmt.Sprintf(format, v...)) }
func (n natsLogger) Warnf(format string, v ...any)   { n.l.Warn(fmt.Sprintf(format, v...)) }
func (n natsLogger) Fatalf(format string, v ...any) {
	msg := fmt.Sprintf(format, v...)
	n.l.Error(msg)
	select {
	case n.fatal <- msg:
	default:
	}
}
func (n natsLogger) Errorf(format string, v ...any) { n.l.Error(fmt.Sprintf(format, v...)) }
func (n natsLogger) Debugf(format string, v ...any) {}
func (n natsLogger) Tracef(format string, v ...any) {}

// SourceConfig is the stream of a source: publishers send to
// "<source>.<key token>", and the stream's subject transform stores each
// message under "<source>.<block>", the block of key groups NATS's
// partition() (FNV-1a of the token) assigns — the same hash the cluster
// uses (keygroup.OfToken numbers key groups so that a block is a run of
// consecutive key groups) — so a shard leader reads exactly its blocks,
// with one literal filter subject each (keygroup.BlockFilters). The stored
// subject names the block, not the key: the server's cost of serving a
// consumer with several filters grows with the distinct subjects stored.
func SourceConfig(source string, keyGroups int) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:      keygroup.SourceStreamName(source),
		Subjects:  []string{keygroup.SourceWildcard(source)},
		Storage:   jetstream.FileStorage,
		Retention: jetstream.LimitsPolicy,
		SubjectTransform: &jetstream.SubjectTransformConfig{
			Source:      keygroup.SourceWildcard(source),
			Destination: keygroup.PartitionDestination(source, keyGroups),
		},
	}
}

// jsAgain makes a JetStream API call again while nobody answers the API
// (a server whose JetStream is still starting, an external server reloading
// its accounts, which drops JetStream's API imports for a moment). Bounded by ctx and 5 s; any other outcome is returned at once.
func jsAgain(ctx context.Context, call func() error) error {
	wait, deadline := 50*time.Millisecond, time.Now().Add(5*time.Second)
	for {
		err := call()
		if !errors.Is(err, nats.ErrNoResponders) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

// EnsureSourceStream creates the source's stream, or checks an existing one.
func EnsureSourceStream(ctx context.Context, js jetstream.JetStream, source string, keyGroups int) (string, error) {
	cfg := SourceConfig(source, keyGroups)
	err := jsAgain(ctx, func() error {
		_, err := js.CreateStream(ctx, cfg)
		return err
	})
	if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		st, err := js.Stream(ctx, cfg.Name)
		if err != nil {
			return "", err
		}
		info := st.CachedInfo()
		if info.Config.SubjectTransform == nil || info.Config.SubjectTransform.Destination != cfg.SubjectTransform.Destination {
			return "", fmt.Errorf("stream %s exists but does not store events by block of %d key groups (its subject transform must be %s → %s)",
				cfg.Name, keyGroups, cfg.SubjectTransform.Source, cfg.SubjectTransform.Destination)
		}
		return cfg.Name, nil
	}
	if err != nil {
		return "", err
	}
	return cfg.Name, nil
}

// DefaultOutputMaxBytes bounds the output stream the cluster creates
// when no limit is given: without one, a flood of bad events (each
// dead-lettered with its payload) would fill the disk NATS shares with
// the sources' streams. The oldest records go first.
const DefaultOutputMaxBytes = 1 << 30

// OutputLimits are retention limits for the output stream; a zero field
// leaves the stream's own.
type OutputLimits struct {
	MaxAge   time.Duration // records older than this are removed (at least OutputDuplicateWin)
	MaxBytes int64         // the oldest records go once the stream holds more
}

// EnsureOutputStream creates the output stream if it is missing, with
// limits (DefaultOutputMaxBytes where they set no size). An existing stream keeps the limits it has (an operator's `nats
// stream edit` survives a node restart) except those limits sets, and gets
// back the subjects and duplicate window the cluster relies on if they
// were changed.
func EnsureOutputStream(ctx context.Context, js jetstream.JetStream, limits OutputLimits) error {
	if limits.MaxAge > 0 && limits.MaxAge < OutputDuplicateWin {
		return fmt.Errorf("a max age of %v is shorter than the duplicate window (%v) that de-duplicates records published again after a failover", limits.MaxAge, OutputDuplicateWin)
	}
	cfg := jetstream.StreamConfig{
		Name:       OutputStream,
		Subjects:   []string{keygroup.OutputSubjectRoot + ">", keygroup.DeadLetterRoot + ">"},
		Storage:    jetstream.FileStorage,
		Duplicates: OutputDuplicateWin,
		MaxAge:     limits.MaxAge,
		MaxBytes:   limits.MaxBytes,
	}
	if cfg.MaxBytes == 0 {
		cfg.MaxBytes = DefaultOutputMaxBytes
	}
	_, err := js.CreateStream(ctx, cfg)
	if !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		return err
	}
	st, err := js.Stream(ctx, OutputStream)
	if err != nil {
		return err
	}
	have := st.CachedInfo().Config
	want := have
	want.Subjects = append([]string(nil), have.Subjects...)
	for _, sub := range cfg.Subjects {
		if !slices.Contains(want.Subjects, sub) {
			want.Subjects = append(want.Subjects, sub)
		}
	}
	want.Duplicates = max(want.Duplicates, OutputDuplicateWin)
	if limits.MaxAge > 0 {
		want.MaxAge = limits.MaxAge
	}
	if limits.MaxBytes > 0 {
		want.MaxBytes = limits.MaxBytes
	}
	if want.MaxAge > 0 && want.Duplicates > want.MaxAge {
		want.Duplicates = want.MaxAge
	}
	if slices.Equal(want.Subjects, have.Subjects) && want.Duplicates == have.Duplicates && want.MaxAge == have.MaxAge && want.MaxBytes == have.MaxBytes {
		return nil
	}
	_, err = js.UpdateStream(ctx, want)
	return err
}

// natsConnectRetry is how often a starting node tries an external NATS
// server again (dialNATSWaiting).
const natsConnectRetry = 250 * time.Millisecond

// dialNATSWaiting dials NATS with dial, and when the server is external
// and not up yet (no server answers: a refused or unreachable address),
// tries again until wait has passed, saying once that it waits: a node
// may start before its NATS server does. Any other failure (a refused
// user, a bad certificate) is returned at once.
func dialNATSWaiting(ctx context.Context, dial func() (*nats.Conn, error), external bool, wait time.Duration, log *slog.Logger) (*nats.Conn, error) {
	nc, err := dial()
	if !external || wait <= 0 || !errors.Is(err, nats.ErrNoServers) {
		return nc, err
	}
	log.Warn("waiting for the NATS server to accept connections", "for", wait, "err", err)
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	for errors.Is(err, nats.ErrNoServers) {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w (gave up waiting after up to %v: --nats-connect-wait)", err, wait)
		case <-time.After(natsConnectRetry):
		}
		nc, err = dial()
	}
	return nc, err
}

// dialNATS dials NATS with reconnects forever (the cluster outlives NATS
// restarts). With a credentials file the node is who that file says;
// without one, in a cluster with a secret, it is the node user of the
// cluster's embedded server (StartSecureEmbeddedNATS), whose replies come
// under an inbox prefix publishers cannot read.
func dialNATS(url, creds, ca string, name string, sec secret.Secret) (*nats.Conn, error) {
	opts := []nats.Option{nats.Name(name), nats.MaxReconnects(-1), nats.ReconnectWait(250 * time.Millisecond)}
	switch {
	case creds != "":
		opts = append(opts, nats.UserCredentials(creds))
	case !sec.IsZero():
		opts = append(opts, nats.UserInfo(NATSNodeUser, sec.Token(secret.NATSNode)), nats.CustomInboxPrefix(nodeInboxPrefix))
	}
	if ca != "" {
		opts = append(opts, nats.RootCAs(ca))
	}
	return nats.Connect(url, opts...)
}
