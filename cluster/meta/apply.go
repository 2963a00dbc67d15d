package meta

import (
	"fmt"
	"slices"
	"strings"

	"github.com/cepcluster/cep/internal/clusterversion"

	"github.com/cepcluster/cep/keygroup"
)

// The command table: one apply method per kind.
func init() {
	register((*Meta).applyInit)
	register((*Meta).applyPutNode)
	register((*Meta).applyRemoveNode)
	register((*Meta).applyForgetNode)
	register((*Meta).applySplitShard)
	register((*Meta).applySplitDone)
	register((*Meta).applySetReplicas)
	register((*Meta).applyPutPattern)
	register((*Meta).applyDeletePattern)
	register((*Meta).applyForgetPattern)
	register((*Meta).applyPutSource)
	register((*Meta).applyDeleteSource)
	register((*Meta).applyRestoreSavepoint)
	register((*Meta).applyDeleteSavepoint)
	register((*Meta).applyAddSavepoint)
}

// Apply applies a command at log index idx and returns the resulting
// object or an error for the proposer. A rejected command changes nothing
// but Index, which every entry advances.
func (m *Meta) Apply(idx uint64, c Command) (any, error) {
	m.Index = idx
	cmd, ok := commands[c.Kind()]
	if !ok {
		return nil, fmt.Errorf("cluster: unknown metadata command %q", c.Kind())
	}
	return cmd.apply(m, idx, c)
}

func (m *Meta) applyInit(idx uint64, c Init) (any, error) {
	if m.KeyGroups != 0 {
		return nil, nil // already initialised: bootstrap is idempotent
	}
	m.ClusterID, m.KeyGroups, m.Shards = c.ClusterID, c.KeyGroups, append([]ShardInfo(nil), c.Shards...)
	m.Replication = c.Replication
	for _, nd := range c.Nodes {
		nd.AddedIndex = idx
		m.putNode(nd)
	}
	return nil, nil
}

func (m *Meta) applyPutNode(idx uint64, c PutNode) (any, error) {
	if c.Node == nil || c.Node.ID == "" {
		return nil, fmt.Errorf("cluster: putNode without a node")
	}
	nd := *c.Node
	if i, removed := m.removedAt(nd.ID); removed {
		if !m.MayRejoin(nd.ID, c.Fresh, c.Started) {
			return nil, refused(ErrPrecondition, "node %q was removed from the cluster; it joins again only started with an empty data directory", nd.ID)
		}
		m.Removed = slices.Delete(m.Removed, i, i+1)
	}
	if old := m.Node(nd.ID); old != nil {
		nd.Removing, nd.AddedIndex = old.Removing, old.AddedIndex
	} else {
		nd.Removing, nd.AddedIndex = false, idx
	}
	m.putNode(nd)
	return &nd, nil
}

func (m *Meta) applyRemoveNode(_ uint64, c RemoveNode) (any, error) {
	nd := m.Node(c.Name)
	if nd == nil {
		return nil, refused(ErrNotFound, "node %q", c.Name)
	}
	active := len(m.ActiveNodes())
	switch {
	case nd.Removing:
	case active == 1:
		return nil, refused(ErrPrecondition, "node %q is the cluster's last; its replicas have nowhere to go: add a node first", c.Name)
	case active-1 < min(m.EffectiveReplication(), active) && !c.Force:
		return nil, refused(ErrPrecondition, "without node %q, %d nodes are left for %d replicas of each shard; add a node first, or allow the shards fewer replicas", c.Name, active-1, min(m.EffectiveReplication(), active))
	}
	nd.Removing = true
	cp := *nd
	return &cp, nil
}

func (m *Meta) applyForgetNode(_ uint64, c ForgetNode) (any, error) {
	i := slices.IndexFunc(m.Nodes, func(nd Node) bool { return nd.ID == c.Name })
	if i < 0 {
		return nil, refused(ErrNotFound, "node %q", c.Name)
	}
	for _, sh := range m.Shards {
		if slices.Contains(sh.Replicas, c.Name) {
			return nil, refused(ErrConflict, "node %q holds a replica of shard %d", c.Name, sh.ID)
		}
	}
	nd := m.Nodes[i]
	m.Nodes = slices.Delete(m.Nodes, i, i+1)
	if j, found := m.removedAt(nd.ID); found {
		m.Removed[j].Time = c.Time
	} else {
		m.Removed = slices.Insert(m.Removed, j, Removed{ID: nd.ID, Time: c.Time})
	}
	return &nd, nil
}

// applySplitShard starts splitting shard ShardID at key group At (0: the
// block boundary nearest its middle): the key groups from At on go to a
// new shard with the next free id and the same replicas. The split point
// must be a block boundary (a shard reads whole blocks of a source) inside
// the shard; one split at a time.
func (m *Meta) applySplitShard(_ uint64, c SplitShard) (any, error) {
	id, at := c.ShardID, c.At
	i := m.ShardIndex(id)
	if i < 0 {
		return nil, refused(ErrNotFound, "shard %d", id)
	}
	for _, sh := range m.Shards {
		if !sh.Settled() {
			return nil, refused(ErrConflict, "shard %d is splitting; one split at a time", sh.ID)
		}
	}
	s := m.Shards[i]
	per := m.KeyGroups / keygroup.Blocks(m.KeyGroups)
	if at == 0 {
		at = (s.First + (s.Last-s.First+1)/2 + per/2) / per * per
	}
	switch {
	case s.Last-s.First+1 < 2*per:
		return nil, refused(ErrPrecondition, "shard %d holds one block of key groups (%d-%d); it cannot split further", id, s.First, s.Last)
	case at%per != 0 || at <= s.First || at > s.Last:
		return nil, refused(ErrInvalid, "shard %d (key groups %d-%d) splits at a multiple of %d after its first key group, not at %d", id, s.First, s.Last, per, at)
	}
	next := uint64(0)
	for _, sh := range m.Shards {
		next = max(next, sh.ID)
	}
	next++
	m.Shards[i].SplitAt, m.Shards[i].SplitInto = at, next
	if s.LogRange == nil {
		m.Shards[i].LogRange = &[2]int{s.First, s.Last}
	}
	m.Shards = append(m.Shards, ShardInfo{ID: next, First: at, Last: s.Last, Replicas: slices.Clone(s.Replicas), Parent: id, Splitting: true,
		LogRange: &[2]int{at, s.Last}})
	cp := m.Shards[i]
	return &cp, nil
}

func (m *Meta) applySplitDone(_ uint64, c SplitDone) (any, error) {
	i := m.ShardIndex(c.ShardID)
	if i < 0 || m.Shards[i].SplitAt == 0 {
		return nil, refused(ErrConflict, "shard %d is not splitting", c.ShardID)
	}
	s := &m.Shards[i]
	j := m.ShardIndex(s.SplitInto)
	if j >= 0 {
		m.Shards[j].Splitting = false
	}
	s.Last, s.SplitAt, s.SplitInto = s.SplitAt-1, 0, 0
	cp := *s
	return &cp, nil
}

func (m *Meta) applySetReplicas(_ uint64, c SetReplicas) (any, error) {
	i := m.ShardIndex(c.ShardID)
	if i < 0 {
		return nil, refused(ErrNotFound, "shard %d", c.ShardID)
	}
	if !m.Shards[i].Settled() {
		return nil, refused(ErrConflict, "shard %d is splitting", c.ShardID)
	}
	if !slices.Equal(m.Shards[i].Replicas, c.ExpectReplicas) {
		return nil, refused(ErrConflict, "shard %d's replicas are %v", c.ShardID, m.Shards[i].Replicas)
	}
	if len(c.Replicas) == 0 {
		return nil, fmt.Errorf("cluster: shard %d without replicas", c.ShardID)
	}
	for j, id := range c.Replicas {
		if m.Node(id) == nil || slices.Contains(c.Replicas[:j], id) {
			return nil, refused(ErrConflict, "shard %d: node %q is not a member, or listed twice", c.ShardID, id)
		}
	}
	m.Shards[i].Replicas = append([]string(nil), c.Replicas...)
	cp := m.Shards[i]
	return &cp, nil
}

func (m *Meta) applyPutPattern(idx uint64, c PutPattern) (any, error) {
	if c.Pattern == nil {
		return nil, refused(ErrInvalid, "putPattern without a pattern")
	}
	p := *c.Pattern
	old := m.Patterns[p.Name]
	if old != nil && old.Deleted {
		old = nil
	}
	switch {
	case c.Create && old != nil:
		return nil, refused(ErrExists, "pattern %q (version %d); use update to change it", p.Name, old.Version)
	case !c.Create && old == nil:
		return nil, refused(ErrNotFound, "pattern %q", p.Name)
	case old != nil && c.Expect != 0 && old.Version != c.Expect:
		return nil, refused(ErrConflict, "pattern %q is at version %d", p.Name, old.Version)
	}
	for _, s := range append(append([]string(nil), p.Sources...), p.Reads...) {
		if m.Sources[s] == nil {
			return nil, refused(ErrNotFound, "source %q (create it first)", s)
		}
	}
	if p.FromStart && old == nil {
		// a source is read once for every pattern: from its start only
		// while nothing reads it
		for _, name := range m.PatternNames() {
			for _, s := range p.ReadsOf() {
				if o := m.Patterns[name]; name != p.Name && slices.Contains(o.ReadsOf(), s) {
					return nil, refused(ErrPrecondition, "pattern %q reads %q already, so a pattern can start on it only at its deployment, not from its start", name, s)
				}
			}
		}
	}
	if old == nil {
		prev := m.Patterns[p.Name] // a deleted pattern's versions keep counting
		p.Version = m.ForgottenOf(p.Name) + 1
		if prev != nil {
			p.Version = max(prev.Version, m.ForgottenOf(p.Name)) + 1
		}
		p.CreatedIndex = idx
	} else {
		p.Version = old.Version + 1
		p.CreatedIndex = old.CreatedIndex
	}
	p.UpdatedIndex = idx
	p.Deleted = false
	m.Patterns[p.Name] = &p
	cp := p
	return &cp, nil
}

func (m *Meta) applyDeletePattern(idx uint64, c DeletePattern) (any, error) {
	p := m.Patterns[c.Name]
	if p == nil || p.Deleted {
		return nil, refused(ErrNotFound, "pattern %q", c.Name)
	}
	p.Deleted = true
	p.Version++
	p.UpdatedIndex = idx
	cp := *p // the proposer learns what was deleted, as it always has
	// the metadata keeps a tombstone: what shard reconcile needs to delete
	// the pattern (its name and the deletion) and a re-deploy to count on
	// from (the version); its spec would be copied with every metadata
	// change for nothing
	m.Patterns[c.Name] = &Pattern{Name: p.Name, Version: p.Version, CreatedIndex: p.CreatedIndex, UpdatedIndex: idx, Deleted: true}
	return &cp, nil
}

// applyForgetPattern removes the tombstone of a deleted pattern (Expect:
// its version, as the proposer saw it applied by every shard). The
// versions of the name keep counting past it: a pattern deployed later
// under that name starts above its forgotten version, so record ids (a
// hash of name, version and record) never repeat those of a deleted
// pattern; other names are not concerned (PerName; before it, every
// name's versions went on above it).
func (m *Meta) applyForgetPattern(_ uint64, c ForgetPattern) (any, error) {
	p := m.Patterns[c.Name]
	switch {
	case p == nil:
		return nil, refused(ErrNotFound, "pattern %q", c.Name)
	case !p.Deleted || p.Version != c.Expect:
		return nil, refused(ErrConflict, "pattern %q is at version %d (deleted: %v), not deleted at %d", c.Name, p.Version, p.Deleted, c.Expect)
	}
	delete(m.Patterns, c.Name)
	if !c.PerName {
		m.ForgottenVersion = max(m.ForgottenVersion, p.Version)
	} else {
		if m.Forgotten == nil {
			m.Forgotten = map[string]uint64{}
		}
		m.Forgotten[c.Name] = max(m.Forgotten[c.Name], p.Version)
	}
	cp := *p
	return &cp, nil
}

func (m *Meta) applyPutSource(idx uint64, c PutSource) (any, error) {
	if c.Source == nil {
		return nil, refused(ErrInvalid, "putSource without a source")
	}
	s := *c.Source
	if m.Sources[s.Name] != nil {
		return nil, refused(ErrExists, "source %q", s.Name)
	}
	if err := s.Limits.Valid(); err != nil {
		return nil, refused(ErrInvalid, "source %q: %v", s.Name, err)
	}
	if s.Origin != "" && m.Sources[s.Origin] == nil {
		// the source it re-keys was deleted meanwhile
		return nil, refused(ErrNotFound, "source %q", s.Origin)
	}
	if s.Strict && m.ActiveVersion() < clusterversion.Strict {
		// its shards would log an op a node of an older release cannot read
		return nil, refused(ErrPrecondition, "source %q: a strict source needs cluster version %v, which every node's release must write; the cluster is at %v", s.Name, clusterversion.Strict, m.ActiveVersion())
	}
	s.CreatedIndex = idx
	m.Sources[s.Name] = &s
	cp := s
	return &cp, nil
}

func (m *Meta) applyDeleteSource(_ uint64, c DeleteSource) (any, error) {
	s := m.Sources[c.Name]
	if s == nil {
		return nil, refused(ErrNotFound, "source %q", c.Name)
	}
	gone := []*Source{s}
	for _, name := range m.SourceNames() {
		if d := m.Sources[name]; d.Origin == c.Name {
			gone = append(gone, d)
		}
	}
	var readers []string
	for _, name := range m.PatternNames() {
		p := m.Patterns[name]
		for _, g := range gone {
			if slices.Contains(p.Sources, g.Name) || slices.Contains(p.Reads, g.Name) {
				readers = append(readers, name)
				break
			}
		}
	}
	if len(readers) > 0 {
		return nil, refused(ErrPrecondition, "source %q is read by pattern(s) %s; delete them first", c.Name, strings.Join(readers, ", "))
	}
	out := make([]Source, len(gone))
	for i, g := range gone {
		out[i] = *g
		delete(m.Sources, g.Name)
	}
	return out, nil
}

func (m *Meta) applyRestoreSavepoint(idx uint64, c RestoreSavepoint) (any, error) {
	if c.Savepoint == nil {
		return nil, refused(ErrInvalid, "restore without a savepoint")
	}
	sp := c.Savepoint
	m.Patterns = map[string]*Pattern{}
	for i := range c.Patterns {
		p := c.Patterns[i]
		p.UpdatedIndex = idx
		m.Patterns[p.Name] = &p
	}
	for i := range c.Sources {
		s := c.Sources[i]
		cur := m.Sources[s.Name]
		switch {
		case cur == nil:
			s.CreatedIndex = idx
			m.Sources[s.Name] = &s
		case cur.Stream == s.Stream && s.StreamCreated != 0:
			// the positions now count in the stream the proposer found
			cur.StreamCreated = s.StreamCreated
		}
	}
	m.Restore = &Restore{ID: fmt.Sprintf("%s@%d", sp.ID, idx), Savepoint: sp.ID, Location: sp.Location,
		Positions: c.Positions, Forwarded: c.Forwarded, Unsealed: c.Unsealed}
	return m.Restore, nil
}

func (m *Meta) applyDeleteSavepoint(_ uint64, c DeleteSavepoint) (any, error) {
	i := slices.IndexFunc(m.Savepoints, func(s Savepoint) bool { return s.ID == c.Name })
	if i < 0 {
		return nil, refused(ErrNotFound, "savepoint %q", c.Name)
	}
	sp := m.Savepoints[i]
	m.Savepoints = slices.Delete(m.Savepoints, i, i+1)
	return &sp, nil
}

func (m *Meta) applyAddSavepoint(idx uint64, c AddSavepoint) (any, error) {
	if c.Savepoint == nil {
		return nil, refused(ErrInvalid, "addSavepoint without a savepoint")
	}
	sp := *c.Savepoint
	sp.CreatedIndex = idx
	m.Savepoints = append(m.Savepoints, sp)
	return &sp, nil
}
