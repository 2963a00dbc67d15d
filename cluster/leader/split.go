package leader

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/hashicorp/raft"

	"github.com/cepcluster/cep/cluster/meta"
	"github.com/cepcluster/cep/shard"
)

// splitIfAsked proposes the split the metadata asks of this shard, once;
// it reports whether it did (the session then starts again, to read the
// shard's new range).
func (r *Leader) splitIfAsked(ctx context.Context, m *meta.Meta) (bool, error) {
	i := m.ShardIndex(r.sh.ID())
	if i < 0 || m.Shards[i].SplitAt == 0 {
		return false, nil
	}
	at, into := m.Shards[i].SplitAt, m.Shards[i].SplitInto
	if _, last := r.sh.Range(); last < at {
		return false, nil // split already
	}
	f := r.sh.Raft().GetConfiguration()
	if err := f.Error(); err != nil {
		return false, err
	}
	var members []string
	for _, srv := range f.Configuration().Servers {
		if srv.Suffrage == raft.Voter {
			members = append(members, string(srv.ID)+"="+string(srv.Address))
		}
	}
	sort.Strings(members)
	err := r.sh.Propose(ctx, &shard.Batch{Ops: []shard.Op{shard.Split{At: at, Shard: into, Members: members}}})
	if err != nil {
		return false, fmt.Errorf("splitting at key group %d: %w", at, err)
	}
	r.log.Info("shard split", "at", at, "into", into, "members", members)
	return true, nil
}

// installSplitState runs when a replica of a shard split off first leads
// it, before it adds replicas: its state came from the split, not from its
// log, so a replica added later must be sent a snapshot of it and never
// the log from its start. Raft's restore of that state (the same) puts a
// gap in the log that does so.
func (r *Leader) installSplitState() error {
	if r.sh.SnapshotIndex() != 0 {
		return nil
	}
	state, ok := r.env.ReadSplit(r.sh.ID())
	if !ok {
		return nil
	}
	if err := r.sh.Install(state, time.Minute); err != nil {
		return err
	}
	r.log.Info("state of the split installed")
	return nil
}
