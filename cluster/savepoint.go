package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/cepcluster/cep/api"
	"github.com/cepcluster/cep/cluster/meta"
	"github.com/cepcluster/cep/cluster/secret"
	"github.com/cepcluster/cep/shard"
	"github.com/cepcluster/cep/snapshot"
)

// A savepoint is one file per shard in a snapshot store (a directory or a
// JetStream object-store bucket), named "<savepoint id>-shard-<shard id>",
// each in the snapshot format: the shard's key groups with their state and
// applied source positions. The header metadata of every file carries the
// cluster's patterns and sources, so a fresh cluster can be restored from
// the files alone. Its location is "<store>#<savepoint id>".

const (
	metaPatterns = "patterns"
	metaSources  = "sources"
)

func savepointFile(id string, shardID uint64) string { return fmt.Sprintf("%s-shard-%d", id, shardID) }

// splitLocation splits "<store>#<id>".
func splitLocation(loc string) (store, id string) {
	store, id, _ = strings.Cut(loc, "#")
	return store, id
}

// savepointKey is the key that seals this cluster's savepoint parts, nil
// for a cluster without a secret (--insecure).
func (c *Config) savepointKey() []byte {
	if c.Secret.IsZero() {
		return nil
	}
	return c.Secret.Derive(secret.Savepoint, 32)
}

// openSavepoint opens every file of a savepoint; with a key, only files
// sealed with it (each section's MAC is then checked as it is read).
func openSavepoint(ctx context.Context, store snapshot.Store, id string, key []byte) ([]*snapshot.Reader, func(), error) {
	ids, err := store.List(ctx)
	if err != nil {
		return nil, nil, err
	}
	var objs []snapshot.Object
	closeAll := func() {
		for _, o := range objs {
			o.Close()
		}
	}
	var readers []*snapshot.Reader
	for _, f := range ids {
		if !strings.HasPrefix(f, id+"-shard-") {
			continue
		}
		o, err := store.Open(ctx, f)
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		objs = append(objs, o)
		r, err := snapshot.NewReader(o, o.Size())
		if err == nil && key != nil {
			r, err = r.Authenticated(key)
		}
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("%w: savepoint %q: part %s: %w", damaged(err), id, f, err)
		}
		readers = append(readers, r)
	}
	if len(readers) == 0 {
		closeAll()
		return nil, nil, fmt.Errorf("%w: savepoint %q has no files there", api.ErrNotFound, id)
	}
	return readers, closeAll, nil
}

// damaged is the API error for a savepoint file a reader refused: its
// bytes are not what was written (DataLoss), or it is of a format this
// release cannot read.
func damaged(err error) error {
	switch {
	case errors.Is(err, snapshot.ErrUnsealed), errors.Is(err, snapshot.ErrMAC):
		// another cluster's, an older release's, or edited: the operator
		// may restore it all the same (RestoreSavepointRequest.unsealed)
		return api.ErrFailedPrecondition
	case errors.Is(err, snapshot.ErrVersion):
		return api.ErrFailedPrecondition
	case errors.Is(err, snapshot.ErrCorrupt), errors.Is(err, snapshot.ErrTruncated), errors.Is(err, snapshot.ErrNotSnapshot):
		return api.ErrDataLoss
	}
	return api.ErrUnavailable
}

// savepointPart asks for one shard's file of a savepoint.
type savepointPart struct {
	Shard        uint64 `json:"shard"`
	Target       string `json:"target"`
	File         string `json:"file"`
	Shards       int    `json:"shards"`
	LoggedTimeMs int64  `json:"loggedTimeMs"`
	Patterns     string `json:"patterns"`
	Sources      string `json:"sources"`
	// Streams: the identity of each source's stream, which the part's
	// positions count in (savepointStreams)
	Streams []snapshot.Source `json:"streams,omitempty"`
}

// writeSavepointPart writes this node's replica of a shard into store
// and returns the shard's source positions. Only the shard's leader
// writes it, once everything committed is applied (a barrier): a
// follower learns that entries committed only with the leader's next
// message, so its state can lack events the leader applied and published
// records from — restored where they are not read again (a fresh
// cluster, from-start) they would be lost.
func (n *Node) writeSavepointPart(ctx context.Context, store snapshot.Store, part savepointPart) (map[string]uint64, error) {
	sh := n.replicas.shard(part.Shard)
	if sh == nil {
		return nil, fmt.Errorf("%w: shard %d has no replica on node %s", api.ErrFailedPrecondition, part.Shard, n.cfg.NodeID)
	}
	if !sh.IsLeader() {
		return nil, fmt.Errorf("%w: shard %d is not led by node %s (its part is its leader's state)", api.ErrUnavailable, part.Shard, n.cfg.NodeID)
	}
	if err := sh.Barrier(ctx, 10*time.Second); err != nil {
		return nil, fmt.Errorf("%w: shard %d: %v", api.ErrUnavailable, part.Shard, err)
	}
	if err := n.savepointFormats(); err != nil {
		return nil, err
	}
	sink, err := store.Create(ctx, part.File)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", api.ErrUnavailable, err)
	}
	var werr error
	var positions map[string]uint64
	sh.FSM().View(func(st *shard.State, index uint64) {
		h := snapshot.Header{ID: part.File, Kind: snapshot.KindSavepoint, ClusterID: "cep",
			CreatedIndex: index, LoggedTimeMs: part.LoggedTimeMs, Shards: part.Shards, Sources: part.Streams,
			Metadata: map[string]string{metaPatterns: part.Patterns, metaSources: part.Sources}}
		var opts []snapshot.WriterOption
		if key := n.cfg.savepointKey(); key != nil {
			opts = append(opts, snapshot.WithMAC(key))
		}
		werr = st.WriteSnapshot(sink, h, opts...)
		positions = st.Positions()
	})
	if werr != nil {
		sink.Abort()
		return nil, fmt.Errorf("%w: shard %d: %v", api.ErrUnavailable, part.Shard, werr)
	}
	if err := sink.Close(); err != nil {
		return nil, fmt.Errorf("%w: shard %d: %v", api.ErrUnavailable, part.Shard, err)
	}
	return positions, nil
}

// savepointPartOf has the shard's leader write the shard's part: this
// node when it leads the shard, else the replica that does (each
// refuses unless it leads). A "dir:" target is a directory on that
// node's machine: a cluster spanning machines takes savepoints into a
// NATS object store.
func (n *Node) savepointPartOf(ctx context.Context, store snapshot.Store, info meta.ShardInfo, part savepointPart) (map[string]uint64, error) {
	if sh := n.replicas.shard(info.ID); sh != nil && sh.IsLeader() {
		return n.writeSavepointPart(ctx, store, part)
	}
	body, _ := json.Marshal(part)
	var errs []string
	for _, id := range info.Replicas {
		if id == n.cfg.NodeID {
			continue
		}
		p, _ := n.peer(id)
		addr := p.APIAddr
		if addr == "" {
			continue
		}
		b, err := n.peerAt(addr).SavepointPart(ctx, body)
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", id, err))
			continue
		}
		var positions map[string]uint64
		if err := json.Unmarshal(b, &positions); err != nil {
			return nil, fmt.Errorf("%w: shard %d: %s answered %v", api.ErrUnavailable, info.ID, id, err)
		}
		return positions, nil
	}
	return nil, fmt.Errorf("%w: shard %d: no leader of it wrote its part (%s)", api.ErrUnavailable, info.ID, strings.Join(errs, "; "))
}

// savepointPartHandler serves peer.SavepointPartPath, to the other nodes only
// (their node credential; partAccess), checked before the body is read.
func (n *Node) savepointPartHandler() http.Handler {
	return api.AuthorizeRole(n.auth, n.partAccess(), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "POST only", http.StatusMethodNotAllowed)
			return
		}
		var part savepointPart
		if err := json.NewDecoder(io.LimitReader(r.Body, 64<<20)).Decode(&part); err != nil {
			http.Error(w, "bad request: "+err.Error(), http.StatusBadRequest)
			return
		}
		store, err := n.openStore(r.Context(), part.Target)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		positions, err := n.writeSavepointPart(r.Context(), store, part)
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		json.NewEncoder(w).Encode(positions)
	}))
}

// openStore opens the store at a savepoint location, a dir:// one only
// inside the configured savepoint directory (savepointPath).
func (n *Node) openStore(ctx context.Context, loc string) (snapshot.Store, error) {
	scheme, path, err := snapshot.ParseLocation(loc)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", api.ErrInvalidArgument, err)
	}
	if scheme != snapshot.SchemeDir {
		s, err := snapshot.OpenStore(ctx, loc, n.JetStream())
		if err != nil {
			return nil, fmt.Errorf("%w: %v", api.ErrUnavailable, err)
		}
		return s, nil
	}
	dir, err := savepointPath(n.cfg.SavepointDir, path)
	if err != nil {
		return nil, fmt.Errorf("%w: location %q: %v", api.ErrInvalidArgument, loc, err)
	}
	return snapshot.NewDirStore(dir), nil
}

// savepointPath resolves the directory of a dir:// location (relative:
// inside root) and refuses one outside root: lexically (.., an absolute
// path elsewhere), and once the symbolic links of the part that exists
// are followed, so a link inside root cannot lead out of it. The result
// has those links resolved: the store works on what was checked.
func savepointPath(root, path string) (string, error) {
	if root == "" {
		return "", fmt.Errorf("no savepoint directory is configured (cepnode --savepoint-dir)")
	}
	root, err := filepath.Abs(root)
	if err != nil {
		return "", err
	}
	p := path
	if !filepath.IsAbs(p) {
		p = filepath.Join(root, p)
	}
	p = filepath.Clean(p)
	outside := fmt.Errorf("%s is outside the savepoint directory %s (cepnode --savepoint-dir)", p, root)
	if !insideDir(root, p) {
		return "", outside
	}
	realRoot, err := resolveExisting(root)
	if err != nil {
		return "", err
	}
	real, err := resolveExisting(p)
	if err != nil {
		return "", err
	}
	if !insideDir(realRoot, real) {
		return "", fmt.Errorf("%s resolves to %s, outside the savepoint directory %s (cepnode --savepoint-dir)", p, real, root)
	}
	return real, nil
}

// insideDir reports whether path p is dir or inside it (both clean and absolute).
func insideDir(dir, p string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

// resolveExisting follows the symbolic links of the longest part of p that
// exists and appends the rest, which has none yet.
func resolveExisting(p string) (string, error) {
	rest := ""
	for cur := p; ; {
		r, err := filepath.EvalSymlinks(cur)
		if err == nil {
			return filepath.Join(r, rest), nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		if _, lerr := os.Lstat(cur); lerr == nil {
			// a link to nothing (yet): where it leads is not known
			return "", fmt.Errorf("%s is a symbolic link to a path that does not exist", cur)
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			return p, nil
		}
		rest = filepath.Join(filepath.Base(cur), rest)
		cur = parent
	}
}

// verifySavepoint checks a savepoint before a restore proposes it and
// returns its header (the first part's) with the patterns and sources it
// carries, and per source the lowest position over its parts. Each part is read twice — here whole, with its checksums
// (Reader.Verify: every section and the whole file) and its sections
// decoded as its shard would (shard.RestoreState, one part at a time), and
// again by the shards restoring it — rather than kept in memory between.
// The parts must be of this savepoint, agree on its metadata and cover
// every key group once; the patterns and sources pass a deploy's checks
// (checkPattern, checkSource), and read only sources the savepoint or
// the cluster has.
func verifySavepoint(ctx context.Context, store snapshot.Store, id string, m *meta.Meta, key []byte) (snapshot.Header, []meta.Pattern, []meta.Source, map[string]uint64, error) {
	readers, closeAll, err := openSavepoint(ctx, store, id, key)
	if err != nil {
		return snapshot.Header{}, nil, nil, nil, err
	}
	defer closeAll()
	h := readers[0].Header()
	bad := func(code error, format string, a ...any) error {
		return fmt.Errorf("%w: savepoint %q: %s", code, id, fmt.Sprintf(format, a...))
	}
	fail := func(err error) (snapshot.Header, []meta.Pattern, []meta.Source, map[string]uint64, error) {
		return snapshot.Header{}, nil, nil, nil, err
	}
	var partPositions []map[string]uint64
	if h.KeyGroups != m.KeyGroups {
		return fail(fmt.Errorf("%w: savepoint has %d key groups, this cluster %d", api.ErrFailedPrecondition, h.KeyGroups, m.KeyGroups))
	}
	type span struct{ first, last int }
	var spans []span
	for _, r := range readers {
		ph := r.Header()
		part := ph.ID
		switch {
		case ph.Kind != snapshot.KindSavepoint || !strings.HasPrefix(ph.ID, id+"-shard-"):
			return fail(bad(api.ErrInvalidArgument, "part %s is not a part of it (kind %s)", part, ph.Kind))
		case ph.KeyGroups != h.KeyGroups || ph.ClusterID != h.ClusterID:
			return fail(bad(api.ErrInvalidArgument, "part %s has %d key groups of cluster %q, part %s %d of %q", part, ph.KeyGroups, ph.ClusterID, h.ID, h.KeyGroups, h.ClusterID))
		case ph.Metadata[metaPatterns] != h.Metadata[metaPatterns] || ph.Metadata[metaSources] != h.Metadata[metaSources]:
			return fail(bad(api.ErrInvalidArgument, "part %s lists other patterns or sources than part %s", part, h.ID))
		case !slices.EqualFunc(ph.Sources, h.Sources, func(a, b snapshot.Source) bool {
			return a.Name == b.Name && a.Stream == b.Stream && a.StreamCreated == b.StreamCreated
		}):
			return fail(bad(api.ErrInvalidArgument, "part %s records other streams than part %s", part, h.ID))
		}
		if err := ctx.Err(); err != nil {
			return fail(err)
		}
		if err := r.Verify(); err != nil {
			return fail(bad(damaged(err), "part %s: %v", part, err))
		}
		st, err := shard.RestoreState([]*snapshot.Reader{r}, ph.FirstKeyGroup, ph.LastKeyGroup)
		if err != nil {
			return fail(bad(api.ErrDataLoss, "part %s does not decode: %v", part, err))
		}
		partPositions = append(partPositions, st.Positions())
		spans = append(spans, span{ph.FirstKeyGroup, ph.LastKeyGroup})
	}
	slices.SortFunc(spans, func(a, b span) int { return a.first - b.first })
	next := 0
	for _, sp := range spans {
		if sp.first != next {
			return fail(bad(api.ErrDataLoss, "its parts do not cover key groups %d-%d exactly once (a part missing, or one too many)", min(next, sp.first), max(next, sp.first)-1))
		}
		next = sp.last + 1
	}
	if next != h.KeyGroups {
		return fail(bad(api.ErrDataLoss, "its parts do not cover key groups %d-%d (a part missing)", next, h.KeyGroups-1))
	}
	var pats []meta.Pattern
	var srcs []meta.Source
	if err := json.Unmarshal([]byte(h.Metadata[metaPatterns]), &pats); err != nil {
		return fail(bad(api.ErrInvalidArgument, "bad pattern list: %v", err))
	}
	if err := json.Unmarshal([]byte(h.Metadata[metaSources]), &srcs); err != nil {
		return fail(bad(api.ErrInvalidArgument, "bad source list: %v", err))
	}
	known := map[string]bool{}
	for _, name := range m.SourceNames() {
		known[name] = true
	}
	for i := range srcs {
		s := &srcs[i]
		if err := checkSource(s); err != nil {
			return fail(bad(api.ErrInvalidArgument, "%s", api.Detail(err)))
		}
		if s.Stream == "" {
			return fail(bad(api.ErrInvalidArgument, "source %q has no stream", s.Name))
		}
		if s.Origin != "" && !slices.ContainsFunc(srcs, func(o meta.Source) bool { return o.Name == s.Origin }) && m.Sources[s.Origin] == nil {
			return fail(bad(api.ErrInvalidArgument, "source %q re-keys %q, which neither it nor the cluster has", s.Name, s.Origin))
		}
		known[s.Name] = true
	}
	seen := map[string]bool{}
	for i := range pats {
		p := &pats[i]
		if seen[p.Name] {
			return fail(bad(api.ErrInvalidArgument, "pattern %q is listed twice", p.Name))
		}
		seen[p.Name] = true
		if p.Deleted || p.Version == 0 {
			return fail(bad(api.ErrInvalidArgument, "pattern %q: version %d, deleted %v", p.Name, p.Version, p.Deleted))
		}
		if err := checkPattern(p); err != nil {
			return fail(bad(api.ErrInvalidArgument, "%s", api.Detail(err)))
		}
		for _, s := range slices.Concat(p.Sources, p.Reads) {
			if !known[s] {
				return fail(bad(api.ErrInvalidArgument, "pattern %q reads source %q, which neither it nor the cluster has", p.Name, s))
			}
		}
	}
	saved := map[string]uint64{}
	for _, s := range srcs {
		lowest, all := uint64(0), true
		for i, pp := range partPositions {
			p, ok := pp[s.Name]
			all = all && ok
			if i == 0 || p < lowest {
				lowest = p
			}
		}
		if all {
			saved[s.Name] = lowest
		}
	}
	return h, pats, srcs, saved, nil
}
