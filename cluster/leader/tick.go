package leader

import (
	"context"
	"time"

	"github.com/cepcluster/cep/shard"
)

// tick logs processing time while some pattern runs on it.
func (r *Leader) tick(ctx context.Context) error {
	t := time.NewTicker(r.env.Config.TickEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		needs := false
		r.sh.FSM().View(func(s *shard.State, _ uint64) { needs = s.NeedsTicks() })
		if !needs {
			continue
		}
		now := r.env.Config.Now().UnixMilli()
		if err := r.sh.Propose(ctx, &shard.Batch{Ops: []shard.Op{shard.TickOp{Time: now}}}); err != nil {
			return err
		}
	}
}
