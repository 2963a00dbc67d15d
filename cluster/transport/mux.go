package transport

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/cepcluster/cep/cluster/secret"
	"github.com/cepcluster/cep/internal/hclogslog"
)

// Wire format of the connection header that opens every multiplexed stream:
//
//	magic   4 bytes  "CEPR"
//	version 1 byte   muxVersion (1) or muxVersionAuth (3)
//	group   uvarint  Raft group id (1 to binary.MaxVarintLen64 bytes)
//
// Version 1 ends there. Version 3, the only one a Mux with a cluster secret
// accepts, goes on with a mutual challenge-response bound to the node
// dialled:
//
//	dialer   → acceptor  nonce    32 random bytes (Nd)
//	                     target   1-byte length, the address dialled (T)
//	                     from     1-byte length, the dialer's own address (F)
//	                     id       1-byte length, the node id it means to reach (I), or empty
//	acceptor → dialer    nonce    32 random bytes (Na)
//	                     proof    MAC(secret.Raft, "acceptor", group, Nd, Na, T, F, I, B)
//	dialer   → acceptor  proof    MAC(secret.Raft, "dialer", group, Nd, Na, T, F, I, B)
//
// (secret.MAC: HMAC-SHA256 of length-prefixed parts, group as 8 bytes big
// endian; B is empty without TLS, and with TLS 32 bytes the TLS session
// exports, so that the proofs hold for that TLS connection only.) Each
// side proves it holds the secret over the other's fresh nonce, so a
// recorded handshake cannot be replayed, and the role label keeps an
// acceptor's proof from serving as a dialer's. The acceptor closes the
// stream unless T is its own advertised address and I, when given, its
// node id (Mux.SetNodeID; the dialer gives the id its Mux.ResolveID finds
// for the address): a Raft server is dialled by address, so a handshake
// relayed to another member (by whoever holds an address members dial: a
// stopped member's, a reused pod IP) names a node that is not the one
// reached and fails. Version 2, the same exchange without T, F, I and B,
// is refused.
//
// Without TLS everything after the header is framed and sealed (stream.go)
// under keys of the secret and both nonces, one per direction; with TLS it
// is TLS's, bound to the handshake by B. Either way the group's Raft
// transport reads only what the authenticated peer wrote.
//
// A stream for an unknown group, with a bad magic or a version this Mux
// does not take is simply closed, unanswered.
const (
	muxMagic       = "CEPR"
	muxVersion     = 1
	muxVersionV2   = 2 // the exchange without the binding: refused
	muxVersionAuth = 3
	nonceSize      = 32
	proofSize      = 32 // HMAC-SHA256
	// tlsBindingLabel names what the TLS session exports for B
	tlsBindingLabel = "EXPORTER-cep-raft-mux-v3"
)

// Defaults of the Mux and of the transports built by NewTransport.
const (
	// defaultHandshakeTimeout bounds how long an accepted connection may take
	// to send its header (and how long a handshaken connection may wait for
	// its Layer to accept it).
	defaultHandshakeTimeout = 5 * time.Second

	// layerBacklog is the number of handshaken connections a Layer holds
	// before Accept takes them.
	layerBacklog = 16

	// defaultIdleTimeout closes an established stream on which nothing
	// was read or written for that long. A live Raft peer is never that
	// quiet: the leader heartbeats each follower several times a second,
	// and a connection waiting in raft's pool is simply redialled once the
	// peer has closed it (the RPC that finds it closed fails and is
	// retried). It bounds how long a stream that went silent holds a
	// goroutine and a socket.
	defaultIdleTimeout = 5 * time.Minute

	// defaultMaxHandshakes bounds the connections in their handshake at
	// once; beyond it new ones are closed at once, so that a flood of
	// silent connections costs a bounded number of sockets and goroutines
	// for at most the handshake timeout.
	defaultMaxHandshakes = 256

	transportMaxPool = 3
	transportTimeout = 10 * time.Second
)

// Errors returned by Mux and Layer. Callers test them with errors.Is;
// ErrMuxClosed and ErrLayerClosed also match net.ErrClosed, which is what
// raft's accept loop and most network code expect.
var (
	ErrMuxClosed       = fmt.Errorf("transport: mux closed: %w", net.ErrClosed)
	ErrLayerClosed     = fmt.Errorf("transport: raft layer closed: %w", net.ErrClosed)
	ErrGroupRegistered = errors.New("transport: raft group already registered")
	ErrMuxServing      = errors.New("transport: mux already serving")
)

// Mux accepts TCP connections on one listener and routes each to the Raft
// group named in its header, so that every Raft group of a node (one per
// key-range shard plus the metadata group) shares one port.
//
// Ownership: the Mux owns the listener, its accept loop (Serve) and one
// short-lived handshake goroutine per accepted connection. Close stops all of
// them, closes every registered Layer and waits. All methods are safe for
// concurrent use.
type Mux struct {
	ln        net.Listener
	advertise net.Addr
	logger    *slog.Logger
	tlsClient *tls.Config // set by UseTLS: how Layers dial peers
	// secret, set by UseSecret: streams are opened with the authenticated
	// header (muxVersionAuth) and only those are accepted; zero: version 1,
	// no authentication
	secret secret.Secret
	// id is this node's id, checked against the one a dialer means to
	// reach (SetNodeID); resolveID gives the id of the node a Layer
	// dials at an address, "" when unknown (ResolveID)
	id        string
	resolveID func(addr string) string

	// handshakeTimeout is the header read deadline; idleTimeout closes a
	// stream quiet that long; maxHandshakes bounds the connections in
	// their handshake. Tests shorten them. Set them only before Serve.
	handshakeTimeout time.Duration
	idleTimeout      time.Duration
	maxHandshakes    int

	mu      sync.Mutex
	closed  bool
	serving bool
	layers  map[uint64]*Layer
	pending map[net.Conn]struct{} // accepted, header not yet read
	// lastWarn: when a refused proof was last warned of
	lastWarn time.Time

	closing chan struct{}  // closed by Close
	wg      sync.WaitGroup // Serve and handshake goroutines
}

// NewMux returns a Mux that will serve ln once Serve is called. advertise is
// the address peers dial to reach this node and what every Layer reports as
// its Addr (and so what Raft uses as this server's address); nil means
// ln.Addr(). It must be routable from the peers: not an unspecified address
// such as 0.0.0.0. A nil logger discards.
func NewMux(ln net.Listener, advertise net.Addr, logger *slog.Logger) *Mux {
	if advertise == nil {
		advertise = ln.Addr()
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if tcp, ok := advertise.(*net.TCPAddr); ok && tcp.IP.IsUnspecified() {
		logger.Warn("raft mux advertises an unspecified address; peers cannot dial it", "addr", advertise)
	}
	return &Mux{
		ln:               ln,
		advertise:        advertise,
		logger:           logger,
		handshakeTimeout: defaultHandshakeTimeout,
		idleTimeout:      defaultIdleTimeout,
		maxHandshakes:    defaultMaxHandshakes,
		layers:           make(map[uint64]*Layer),
		pending:          make(map[net.Conn]struct{}),
		closing:          make(chan struct{}),
	}
}

// UseTLS makes the Mux accept only TLS connections, configured by server
// (which should require and verify client certificates), and its Layers
// dial peers with client, naming the peer by the host of its address. Call
// it before Serve.
func (m *Mux) UseTLS(server, client *tls.Config) {
	m.ln = tls.NewListener(m.ln, server)
	m.tlsClient = client
}

// UseSecret makes the Mux accept only streams whose dialer proves it holds
// s (the authenticated header, version 2, refusing version 1), and its
// Layers open streams the same way, refusing a peer that does not prove
// it holds s. Without it (a zero s) streams carry no proof: anyone who
// reaches the port speaks Raft to every group. Call it before Serve. It
// combines with UseTLS: the handshake then runs inside TLS.
func (m *Mux) UseSecret(s secret.Secret) { m.secret = s }

// SetNodeID makes the Mux refuse streams whose dialer means to reach a
// node of another id. Call it before Serve.
func (m *Mux) SetNodeID(id string) { m.id = id }

// ResolveID gives the Mux the node id its Layers mean to reach when they
// dial an address (fn returns "" when it does not know, and the address
// alone is checked). fn is called on every dial, from any goroutine. Call
// it before any Layer dials.
func (m *Mux) ResolveID(fn func(addr string) string) { m.resolveID = fn }

// Addr returns the advertised address of the Mux.
func (m *Mux) Addr() net.Addr { return m.advertise }

// Serve runs the accept loop until Close and then returns nil. Each accepted
// connection is handshaken in its own goroutine, so a slow or silent client
// delays nobody else. Serve returns nil at once if the Mux is already closed,
// ErrMuxServing if another Serve is running, and the listener's error if the
// listener is closed by someone other than Close.
func (m *Mux) Serve() error {
	m.mu.Lock()
	switch {
	case m.closed:
		m.mu.Unlock()
		return nil
	case m.serving:
		m.mu.Unlock()
		return ErrMuxServing
	}
	m.serving = true
	m.wg.Add(1)
	m.mu.Unlock()
	defer m.wg.Done()

	const baseDelay, maxDelay = 5 * time.Millisecond, time.Second
	var delay time.Duration
	for {
		conn, err := m.ln.Accept()
		if err != nil {
			if m.isClosing() {
				return nil
			}
			if errors.Is(err, net.ErrClosed) {
				return fmt.Errorf("transport: raft mux listener: %w", err)
			}
			// Transient (EMFILE, ECONNABORTED...): back off like net/http.
			delay = min(max(2*delay, baseDelay), maxDelay)
			m.logger.Warn("raft mux accept failed; retrying", "err", err, "delay", delay)
			t := time.NewTimer(delay)
			select {
			case <-t.C:
				continue
			case <-m.closing:
				t.Stop()
				return nil
			}
		}
		delay = 0
		m.startHandshake(conn)
	}
}

// startHandshake runs handshake(conn) in a goroutine tracked by m.wg, or
// closes conn if the Mux is closed.
func (m *Mux) startHandshake(conn net.Conn) {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		conn.Close()
		return
	}
	if len(m.pending) >= m.maxHandshakes {
		m.mu.Unlock()
		m.logger.Debug("raft mux: too many connections in their handshake; dropping one", "remote", conn.RemoteAddr(), "max", m.maxHandshakes)
		conn.Close()
		return
	}
	m.pending[conn] = struct{}{}
	m.wg.Add(1)
	m.mu.Unlock()
	go func() {
		defer m.wg.Done()
		m.handshake(conn)
	}()
}

// handshake reads the header of conn within the handshake timeout and hands
// conn to the group's Layer, or closes it.
func (m *Mux) handshake(conn net.Conn) {
	group, keys, err := m.accept(conn)

	m.mu.Lock()
	delete(m.pending, conn)
	closed := m.closed
	l := m.layers[group]
	m.mu.Unlock()

	lg := m.logger.With("remote", conn.RemoteAddr())
	switch {
	case closed:
		conn.Close()
	case handshakeFailed(conn, err):
		lg.Warn("raft mux: TLS handshake failed; dropping connection", "err", err)
		conn.Close()
	case errors.Is(err, errBadProof) && m.warnNow():
		// a node of another cluster, or an attacker: worth a warning, at
		// most one every warnEvery so that a flood does not flood the log
		lg.Warn("raft mux: the peer does not prove the cluster secret; dropping connection", "err", err)
		conn.Close()
	case errors.Is(err, errWrongNode) && m.warnNow():
		// a relay, or a member still dialling an address this node took
		lg.Warn("raft mux: the peer dialled another node's address; dropping connection", "err", err)
		conn.Close()
	case err != nil:
		lg.Debug("raft mux: dropping connection", "err", err)
		conn.Close()
	case l == nil:
		lg.Debug("raft mux: dropping connection for unknown group", "group", group)
		conn.Close()
	default:
		c := newIdleConn(conn, m.idleTimeout)
		if keys != nil {
			sc := &sealedConn{Conn: c}
			if err := sc.setKeys(keys.toDialer, keys.toAcceptor); err != nil {
				lg.Warn("raft mux: stream keys", "err", err)
				conn.Close()
				return
			}
			c = sc
		}
		l.deliver(c, m.handshakeTimeout)
	}
}

// accept reads the header of an accepted conn, and with a secret runs the
// acceptor's part of the challenge-response, all within the handshake
// timeout; it returns the group.
func (m *Mux) accept(conn net.Conn) (uint64, *streamKeys, error) {
	// (both directions: over TLS the first read also runs the handshake,
	// which writes)
	if err := conn.SetDeadline(time.Now().Add(m.handshakeTimeout)); err != nil {
		return 0, nil, err
	}
	// Read the fixed part and the first varint byte at once, then the rest
	// of the varint byte by byte: nothing past the header may be consumed.
	var buf [len(muxMagic) + 1 + binary.MaxVarintLen64]byte
	n := len(muxMagic) + 2
	if _, err := io.ReadFull(conn, buf[:n]); err != nil {
		return 0, nil, fmt.Errorf("read header: %w", err)
	}
	if string(buf[:len(muxMagic)]) != muxMagic {
		return 0, nil, fmt.Errorf("bad magic %q", buf[:len(muxMagic)])
	}
	want := byte(muxVersion)
	if !m.secret.IsZero() {
		want = muxVersionAuth
	}
	switch v := buf[len(muxMagic)]; {
	case v == muxVersionV2 && want == muxVersionAuth:
		return 0, nil, errors.New("handshake of version 2 (not bound to the node dialled): the peer runs an older release")
	case v == muxVersion && want == muxVersionAuth:
		return 0, nil, errors.New("unauthenticated header (version 1): this node requires the cluster secret")
	case v != want:
		return 0, nil, fmt.Errorf("unsupported version %d", v)
	}
	for buf[n-1]&0x80 != 0 && n < len(buf) {
		if _, err := io.ReadFull(conn, buf[n:n+1]); err != nil {
			return 0, nil, fmt.Errorf("read header: %w", err)
		}
		n++
	}
	group, k := binary.Uvarint(buf[len(muxMagic)+1 : n])
	if k <= 0 {
		return 0, nil, errors.New("bad group id")
	}
	var keys *streamKeys
	if want == muxVersionAuth {
		var err error
		if keys, err = m.challenge(conn, group); err != nil {
			return 0, nil, err
		}
	}
	if err := conn.SetDeadline(time.Time{}); err != nil {
		return 0, nil, err
	}
	return group, keys, nil
}

// challenge is the acceptor's part of the authenticated header, after the
// group: it reads the dialer's nonce and the addresses, answers with its
// own nonce and its proof when the dialer means to reach this node, and
// checks the dialer's proof. An unknown group is not answered. It returns
// the stream's keys, nil with TLS (which then protects the stream).
func (m *Mux) challenge(conn net.Conn, group uint64) (*streamKeys, error) {
	m.mu.Lock()
	_, known := m.layers[group]
	m.mu.Unlock()
	var dn [nonceSize]byte
	if _, err := io.ReadFull(conn, dn[:]); err != nil {
		return nil, fmt.Errorf("read nonce: %w", err)
	}
	target, err := readShort(conn)
	if err != nil {
		return nil, fmt.Errorf("read the address dialled: %w", err)
	}
	from, err := readShort(conn)
	if err != nil {
		return nil, fmt.Errorf("read the dialer's address: %w", err)
	}
	wantID, err := readShort(conn)
	if err != nil {
		return nil, fmt.Errorf("read the node id dialled: %w", err)
	}
	if !known {
		return nil, fmt.Errorf("unknown group %d", group)
	}
	if target != m.advertise.String() {
		return nil, fmt.Errorf("%w: the dialer (%q) means to reach %q, this node is %q", errWrongNode, from, target, m.advertise)
	}
	if wantID != "" && wantID != m.id {
		return nil, fmt.Errorf("%w: the dialer (%q) means to reach node %q, this node is %q", errWrongNode, from, wantID, m.id)
	}
	bind, err := tlsBinding(conn)
	if err != nil {
		return nil, err
	}
	h := handshake{group: group, dn: dn[:], target: target, from: from, id: wantID, bind: bind}
	var an [nonceSize]byte
	_, _ = rand.Read(an[:]) // never fails (Go 1.24+)
	h.an = an[:]
	reply := append(an[:], m.proof("acceptor", h)...)
	if _, err := conn.Write(reply); err != nil {
		return nil, fmt.Errorf("write challenge: %w", err)
	}
	var got [proofSize]byte
	if _, err := io.ReadFull(conn, got[:]); err != nil {
		return nil, fmt.Errorf("read proof: %w", err)
	}
	if !hmac.Equal(got[:], m.proof("dialer", h)) {
		return nil, errBadProof
	}
	return m.streamKeys(conn, h), nil
}

// warnEvery is the least time between two warnings of refused proofs.
const warnEvery = 10 * time.Second

// warnNow reports whether a refused proof may be warned of now.
func (m *Mux) warnNow() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if now := time.Now(); now.Sub(m.lastWarn) >= warnEvery {
		m.lastWarn = now
		return true
	}
	return false
}

// errBadProof: the other side does not hold this node's cluster secret.
var errBadProof = errors.New("wrong proof of the cluster secret")

// errWrongNode: the dialer means to reach another node (a relayed stream).
var errWrongNode = errors.New("stream meant for another node")

// handshake is what a stream's proofs and keys are bound to.
type handshake struct {
	group        uint64
	dn, an       []byte // the dialer's and the acceptor's nonces
	target, from string // the address dialled, the dialer's own
	id           string // the node id dialled, "" if the dialer did not know it
	bind         []byte // the TLS session's, empty without TLS
}

// proof is what the side role shows for the stream of h.
func (m *Mux) proof(role string, h handshake) []byte {
	return m.secret.MAC(secret.Raft, []byte(role), binary.BigEndian.AppendUint64(nil, h.group), h.dn, h.an,
		[]byte(h.target), []byte(h.from), []byte(h.id), h.bind)
}

// streamKeys are the sealing keys of a stream, one per direction.
type streamKeys struct{ toAcceptor, toDialer []byte }

// streamKeys returns the keys of the stream of h, nil over TLS (TLS
// protects the stream).
func (m *Mux) streamKeys(conn net.Conn, h handshake) *streamKeys {
	if _, ok := conn.(*tls.Conn); ok {
		return nil
	}
	key := func(dir string) []byte {
		return m.secret.MAC(secret.RaftStream, []byte(dir), binary.BigEndian.AppendUint64(nil, h.group), h.dn, h.an,
			[]byte(h.target), []byte(h.from), []byte(h.id))
	}
	return &streamKeys{toAcceptor: key("dialer to acceptor"), toDialer: key("acceptor to dialer")}
}

// tlsBinding is what conn's TLS session exports for the handshake to
// bind; nil when conn is not TLS.
func tlsBinding(conn net.Conn) ([]byte, error) {
	tc, ok := conn.(*tls.Conn)
	if !ok {
		return nil, nil
	}
	st := tc.ConnectionState()
	b, err := st.ExportKeyingMaterial(tlsBindingLabel, nil, 32)
	if err != nil {
		return nil, fmt.Errorf("TLS channel binding: %w", err)
	}
	return b, nil
}

// readShort reads a string with a 1-byte length in front.
func readShort(r io.Reader) (string, error) {
	var n [1]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return "", err
	}
	b := make([]byte, n[0])
	if _, err := io.ReadFull(r, b); err != nil {
		return "", err
	}
	return string(b), nil
}

// appendShort appends s with a 1-byte length in front.
func appendShort(b []byte, s string) ([]byte, error) {
	if len(s) > 255 {
		return nil, fmt.Errorf("%q longer than 255 bytes", s)
	}
	return append(append(b, byte(len(s))), s...), nil
}

// open runs the dialer's part of the header on conn (tc: conn's TLS, if
// any), meaning to reach the node advertised as target: the header, and
// with a secret the challenge-response. It returns the stream's keys, nil
// without a secret or with TLS.
func (m *Mux) open(conn net.Conn, tc *tls.Conn, group uint64, target string) (*streamKeys, error) {
	if m.secret.IsZero() {
		_, err := conn.Write(appendHeader(nil, muxVersion, group))
		return nil, err
	}
	var dn [nonceSize]byte
	_, _ = rand.Read(dn[:])
	h := handshake{group: group, dn: dn[:], target: target, from: m.advertise.String()}
	if m.resolveID != nil {
		h.id = m.resolveID(target)
	}
	hello, err := appendShort(append(appendHeader(nil, muxVersionAuth, group), dn[:]...), h.target)
	if err == nil {
		hello, err = appendShort(hello, h.from)
	}
	if err == nil {
		hello, err = appendShort(hello, h.id)
	}
	if err != nil {
		return nil, err
	}
	if _, err := conn.Write(hello); err != nil {
		return nil, err
	}
	var reply [nonceSize + proofSize]byte
	if _, err := io.ReadFull(conn, reply[:]); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, errors.New("closed by the peer during the handshake (no such group there, it is not the node advertised at this address, or it does not take this node's cluster secret)")
		}
		return nil, fmt.Errorf("read challenge: %w", err)
	}
	h.an = reply[:nonceSize]
	var bconn net.Conn = conn
	if tc != nil {
		bconn = tc
	}
	if h.bind, err = tlsBinding(bconn); err != nil {
		return nil, err
	}
	if !hmac.Equal(reply[nonceSize:], m.proof("acceptor", h)) {
		return nil, fmt.Errorf("the peer does not hold this node's cluster secret: %w", errBadProof)
	}
	if _, err := conn.Write(m.proof("dialer", h)); err != nil {
		return nil, err
	}
	return m.streamKeys(bconn, h), nil
}

// appendHeader appends the connection header of version for group to b
// (for version 2, without the nonce that follows).
func appendHeader(b []byte, version byte, group uint64) []byte {
	b = append(b, muxMagic...)
	b = append(b, version)
	return binary.AppendUvarint(b, group)
}

func (m *Mux) isClosing() bool {
	select {
	case <-m.closing:
		return true
	default:
		return false
	}
}

// Layer registers Raft group group and returns its stream layer. It fails
// with ErrGroupRegistered if the group already has an open Layer and with
// ErrMuxClosed after Close. Closing the Layer frees the group id.
func (m *Mux) Layer(group uint64) (*Layer, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrMuxClosed
	}
	if _, ok := m.layers[group]; ok {
		return nil, fmt.Errorf("%w: group %d", ErrGroupRegistered, group)
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &Layer{
		mux:    m,
		group:  group,
		ctx:    ctx,
		cancel: cancel,
		connCh: make(chan net.Conn, layerBacklog),
		conns:  make(map[*layerConn]struct{}),
	}
	m.layers[group] = l
	return l, nil
}

// Close closes the listener, every connection still handshaking and every
// Layer, and waits for Serve and the handshake goroutines to return. It is
// safe to call more than once; later calls return nil.
func (m *Mux) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		m.wg.Wait()
		return nil
	}
	m.closed = true
	close(m.closing)
	pending := make([]net.Conn, 0, len(m.pending))
	for c := range m.pending {
		pending = append(pending, c)
	}
	layers := make([]*Layer, 0, len(m.layers))
	for _, l := range m.layers {
		layers = append(layers, l)
	}
	m.layers = make(map[uint64]*Layer)
	m.mu.Unlock()

	err := m.ln.Close()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	for _, c := range pending {
		c.Close() // unblocks the handshake's read
	}
	for _, l := range layers {
		l.close()
	}
	m.wg.Wait()
	return err
}

// Layer is the raft.StreamLayer of one Raft group on a Mux: Accept returns
// the streams peers opened for this group, Dial opens a stream to the same
// group on another node's Mux.
//
// The Layer owns every connection it returns from Accept or Dial: Close (or
// the Mux's Close) closes them all, so that the transport's per-connection
// goroutines end even when the peer does not hang up. All methods are safe
// for concurrent use.
type Layer struct {
	mux    *Mux
	group  uint64
	ctx    context.Context // cancelled by close
	cancel context.CancelFunc
	connCh chan net.Conn // handshaken conns, already tracked

	mu     sync.Mutex
	closed bool
	conns  map[*layerConn]struct{}
}

var _ raft.StreamLayer = (*Layer)(nil)

// Group returns the Raft group id of the Layer.
func (l *Layer) Group() uint64 { return l.group }

// Accept waits for the next stream a peer opened for this group. After Close
// (of the Layer or the Mux) it returns ErrLayerClosed, which matches
// net.ErrClosed.
func (l *Layer) Accept() (net.Conn, error) {
	select {
	case c := <-l.connCh:
		if l.ctx.Err() != nil {
			c.Close()
			return nil, ErrLayerClosed
		}
		return c, nil
	case <-l.ctx.Done():
		return nil, ErrLayerClosed
	}
}

// Addr returns the Mux's advertised address, which is this Raft server's
// address for every group.
func (l *Layer) Addr() net.Addr { return l.mux.advertise }

// Dial opens a stream to this group on the Mux listening at address, running
// the header (and with a secret the challenge-response) before it returns.
// timeout bounds the dial and the header together; zero means no timeout
// for the dial and the handshake timeout for the header. Close aborts a
// pending Dial.
func (l *Layer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx := l.ctx
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	if l.ctx.Err() != nil {
		return nil, ErrLayerClosed
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", string(address))
	if err != nil {
		if l.ctx.Err() != nil {
			return nil, ErrLayerClosed
		}
		return nil, err
	}
	var tc *tls.Conn
	if l.mux.tlsClient != nil {
		tc = tls.Client(conn, clientFor(l.mux.tlsClient, string(address)))
		conn = tc
	}
	// Track the conn before the handshake and the header, so that Close
	// aborts them by closing it. Without TLS, a stream with a secret is
	// sealed once the header gives it its keys.
	inner := newIdleConn(conn, l.mux.idleTimeout)
	var sc *sealedConn
	if !l.mux.secret.IsZero() && tc == nil {
		sc = &sealedConn{Conn: inner}
	}
	tracked := inner
	if sc != nil {
		tracked = sc
	}
	lc, ok := l.track(tracked)
	if !ok {
		return nil, ErrLayerClosed
	}
	if tc != nil {
		if err = tc.HandshakeContext(ctx); err != nil {
			err = fmt.Errorf("TLS handshake: %w", err)
		}
	}
	// the header waits for the peer's answer: never without a deadline
	dl, ok := ctx.Deadline()
	if !ok {
		dl = time.Now().Add(l.mux.handshakeTimeout)
	}
	if err == nil {
		err = lc.SetDeadline(dl)
	}
	var keys *streamKeys
	if err == nil {
		keys, err = l.mux.open(inner, tc, l.group, string(address))
	}
	if err == nil && sc != nil {
		if keys == nil {
			err = errors.New("no stream keys")
		} else {
			err = sc.setKeys(keys.toAcceptor, keys.toDialer)
		}
	}
	if err == nil {
		err = lc.SetDeadline(time.Time{})
	}
	if err != nil {
		lc.Close()
		if l.ctx.Err() != nil {
			return nil, ErrLayerClosed
		}
		return nil, fmt.Errorf("transport: raft group %d: open stream to %s: %w", l.group, address, err)
	}
	return lc, nil
}

// Close unregisters the group from the Mux, makes pending and future Accept
// and Dial calls fail with ErrLayerClosed, and closes every connection the
// Layer handed out. It does not close the Mux. Safe to call more than once.
func (l *Layer) Close() error {
	m := l.mux
	m.mu.Lock()
	if m.layers[l.group] == l {
		delete(m.layers, l.group)
	}
	m.mu.Unlock()
	l.close()
	return nil
}

// close shuts the Layer without touching the Mux's registry.
func (l *Layer) close() {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	l.closed = true
	l.cancel()
	conns := l.conns
	l.conns = nil
	l.mu.Unlock()
	for c := range conns {
		c.Conn.Close()
	}
	// Drop what the backlog still holds (already closed above).
	for {
		select {
		case <-l.connCh:
		default:
			return
		}
	}
}

// track wraps conn so the Layer can close it, or closes it and reports false
// if the Layer is closed.
func (l *Layer) track(conn net.Conn) (*layerConn, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		conn.Close()
		return nil, false
	}
	lc := &layerConn{Conn: conn, layer: l}
	l.conns[lc] = struct{}{}
	return lc, true
}

func (l *Layer) untrack(c *layerConn) {
	l.mu.Lock()
	delete(l.conns, c) // no-op once closed (nil map)
	l.mu.Unlock()
}

// deliver hands a handshaken conn to Accept, waiting at most wait for room in
// the backlog; the conn is closed if it cannot be delivered.
func (l *Layer) deliver(conn net.Conn, wait time.Duration) {
	lc, ok := l.track(conn)
	if !ok {
		return
	}
	select {
	case l.connCh <- lc:
		return
	default:
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case l.connCh <- lc:
	case <-l.ctx.Done():
		lc.Close()
	case <-t.C:
		l.mux.logger.Warn("raft mux: layer backlog full; dropping connection", "group", l.group, "remote", conn.RemoteAddr())
		lc.Close()
	}
}

// layerConn is a connection owned by a Layer; closing it removes it from the
// Layer's set.
type layerConn struct {
	net.Conn
	layer *Layer
	once  sync.Once
}

func (c *layerConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.layer.untrack(c) })
	return err
}

// NewTransport returns a raft transport over l: a raft.NetworkTransport
// with a pool of transportMaxPool connections per peer and a
// transportTimeout I/O timeout, logging to logger (nil discards), that
// replicates without pipelining (see Transport). The transport owns l: its
// Close (called by raft's Shutdown) closes the Layer.
func NewTransport(l *Layer, logger *slog.Logger) *Transport {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Transport{raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream:  l,
		MaxPool: transportMaxPool,
		Timeout: transportTimeout,
		Logger:  hclogslog.New(logger.With("group", l.group)).Named("raft-net"),
	})}
}

// Transport is a raft.NetworkTransport without pipelined replication.
// hashicorp/raft's pipeline can deadlock: when a follower answers
// Success=false the decoder goroutine ends, a send already under way parks
// on the full in-flight channel while the response reader parks on the
// done channel nobody reads, and the pipeline is closed only by the sender
// that is stuck. The follower then gets heartbeats but no entry for ever,
// and the leader's Shutdown waits for that sender without end (seen when a
// node removed from a shard closed its replica). Without a pipeline raft
// sends one AppendEntries at a time per follower, each carrying up to
// MaxAppendEntries batches.
type Transport struct {
	*raft.NetworkTransport
}

// AppendEntriesPipeline tells raft to replicate without a pipeline.
func (t *Transport) AppendEntriesPipeline(raft.ServerID, raft.ServerAddress) (raft.AppendPipeline, error) {
	return nil, raft.ErrPipelineReplicationNotSupported
}

// idleConn is a connection closed for reads and writes once nothing went
// either way for idle: each Read and Write moves its deadline to idle from
// now, or to the deadline its user set if that is sooner (raft sets one
// per RPC).
type idleConn struct {
	net.Conn
	idle time.Duration

	mu       sync.Mutex
	rdl, wdl time.Time // the user's deadlines; zero: none
}

// newIdleConn wraps conn; idle 0 leaves it as it is.
func newIdleConn(conn net.Conn, idle time.Duration) net.Conn {
	if idle <= 0 {
		return conn
	}
	return &idleConn{Conn: conn, idle: idle}
}

func (c *idleConn) deadline(user time.Time) time.Time {
	d := time.Now().Add(c.idle)
	if !user.IsZero() && user.Before(d) {
		return user
	}
	return d
}

// Read reports the idle timeout as io.EOF, a peer gone quiet, so that the
// raft transport ends the stream as it does when the peer hangs up rather
// than log a decode error; a deadline its user set stays a timeout.
func (c *idleConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	user := c.rdl
	d := c.deadline(user)
	c.mu.Unlock()
	if err := c.Conn.SetReadDeadline(d); err != nil {
		return 0, err
	}
	n, err := c.Conn.Read(p)
	var ne net.Error
	if err != nil && !d.Equal(user) && errors.As(err, &ne) && ne.Timeout() {
		c.mu.Lock()
		idle := c.rdl.Equal(user) // no deadline of the user's came meanwhile
		c.mu.Unlock()
		if idle {
			return n, io.EOF
		}
	}
	return n, err
}

func (c *idleConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	d := c.deadline(c.wdl)
	c.mu.Unlock()
	if err := c.Conn.SetWriteDeadline(d); err != nil {
		return 0, err
	}
	return c.Conn.Write(p)
}

func (c *idleConn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	c.rdl, c.wdl = t, t
	c.mu.Unlock()
	return c.Conn.SetDeadline(c.deadline(t))
}

func (c *idleConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	c.rdl = t
	c.mu.Unlock()
	return c.Conn.SetReadDeadline(c.deadline(t))
}

func (c *idleConn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	c.wdl = t
	c.mu.Unlock()
	return c.Conn.SetWriteDeadline(c.deadline(t))
}
