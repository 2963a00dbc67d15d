package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/timestamppb"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
)

type savepointRestoreOptions struct {
	globalOptions
	// Exactly one of ID and Location is set: an argument with "://" is a
	// location.
	ID       string
	Location string
	// Shards is the number of shards to restore into; 0 keeps the
	// savepoint's.
	Shards uint32
	// Positions is what the saved positions of a source mean when its
	// stream is not the saved one: keep, from-start, from-end or
	// from-time=RFC3339; empty: such a restore is refused.
	Positions string
	// Unsealed restores parts without this cluster's seal.
	Unsealed bool
}

func newSavepointRestoreCmd(d *deps, runF func(*savepointRestoreOptions) error) *cobra.Command {
	opts := &savepointRestoreOptions{}
	cmd := &cobra.Command{
		Use:   "restore ID|LOCATION",
		Short: "Replace the cluster's state with a savepoint's",
		Long: `Replace the cluster's patterns, source positions and state with a
savepoint's: one the cluster recorded (by ID) or any written LOCATION
(dir://path#ID or nats://bucket#ID; without #ID the newest there).
--shards re-shards the state into that many shards; by default the
savepoint's shard count is kept.

Before anything changes, the node reads every part of the savepoint and
checks its checksums and that its patterns and sources pass the checks a
deploy makes: a damaged part fails the restore (DataLoss, naming the part
and section), metadata a deploy would refuse fails it too (InvalidArgument),
and the cluster stays as it was. A dir:// path must lie in the node's
savepoint directory (cepnode --savepoint-dir).

Every part a cluster writes is sealed with a key of its cluster secret,
and a restore takes only parts sealed by this cluster's secret: another
cluster's savepoint, one of a release that did not seal them, or an
edited part fails it (FailedPrecondition naming the part). --unsealed
restores them all the same, their checksums checked but not who wrote
them: only for files you trust.

A savepoint's positions are stream sequences of the streams it was taken
from. Restored where a source's stream is another (a fresh cluster, a
stream deleted and created again), they mean nothing there, and the
restore fails naming the source and both streams unless --positions says
where such sources are read from:
  keep              after the saved sequence anyway (what restores did before)
  from-start        the stream's first message on
  from-end          only what is published after the restore
  from-time=TIME    the first message stored at or after TIME (RFC 3339)
Sources whose stream is the saved one resume where they were.`,
		Example: `  cepctl savepoint restore sp-0042
  cepctl savepoint restore 'dir://nightly#sp-0042' --shards 8
  cepctl savepoint restore 'dir://nightly#sp-0042' --positions from-start
  cepctl savepoint restore sp-0042 --positions from-time=2026-12-01T09:00:00Z`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			g, err := resolveGlobals(d, cmd)
			if err != nil {
				return err
			}
			opts.globalOptions = g
			if _, _, err := positionMapping(opts.Positions); err != nil {
				return err
			}
			if strings.Contains(args[0], "://") {
				opts.Location = args[0]
			} else {
				opts.ID = args[0]
			}
			if runF != nil {
				return runF(opts)
			}
			return runSavepointRestore(cmd.Context(), d, opts)
		},
	}
	cmd.Flags().Uint32Var(&opts.Shards, "shards", 0, "number of shards to restore into (default: the savepoint's)")
	cmd.Flags().BoolVar(&opts.Unsealed, "unsealed", false, "restore parts that carry no seal of this cluster's secret (another cluster's savepoint, an older release's): only for files you trust")
	cmd.Flags().StringVar(&opts.Positions, "positions", "", "where a source whose stream is not the saved one is read from: keep, from-start, from-end or from-time=RFC3339 (default: refuse)")
	return cmd
}

func runSavepointRestore(ctx context.Context, d *deps, opts *savepointRestoreOptions) error {
	mapping, from, err := positionMapping(opts.Positions)
	if err != nil {
		return err
	}
	req := &cepv1.RestoreSavepointRequest{ShardCount: opts.Shards, Positions: mapping, PositionsFrom: from, Unsealed: opts.Unsealed}
	if opts.Location != "" {
		req.Savepoint = &cepv1.RestoreSavepointRequest_Location{Location: opts.Location}
	} else {
		req.Savepoint = &cepv1.RestoreSavepointRequest_Id{Id: opts.ID}
	}
	c := newClients(d, opts.globalOptions)
	res, err := c.savepoints.RestoreSavepoint(ctx, connect.NewRequest(req))
	if err != nil {
		return err
	}
	if pending := res.Msg.GetPendingShards(); len(pending) > 0 {
		fmt.Fprintf(d.stderr, "cepctl: warning: shard(s) %s have not restored their part yet; each does once it has a leader, and publishes nothing of the savepoint's until then\n", joinIDs(pending))
	}
	if opts.Output != "table" {
		return writeProto(d.stdout, opts.Output, res.Msg)
	}
	sp := res.Msg.GetSavepoint()
	if _, err := fmt.Fprintf(d.stdout, "restored savepoint %s (%s) into %s at index %d\n",
		sp.GetId(), sp.GetLocation(), plural(res.Msg.GetShardCount(), "shard"), res.Msg.GetRestoredIndex()); err != nil {
		return err
	}
	for _, p := range res.Msg.GetSourcePositions() {
		created := "creation not recorded"
		if p.GetStreamCreated() != nil {
			created = "created " + p.GetStreamCreated().AsTime().UTC().Format(time.RFC3339Nano)
		}
		if _, err := fmt.Fprintf(d.stdout, "  %s: stream %s (%s), read after %d\n", p.GetSource(), p.GetStream(), created, p.GetSequence()); err != nil {
			return err
		}
	}
	return nil
}

// positionMapping parses --positions.
func positionMapping(s string) (cepv1.PositionMapping, *timestamppb.Timestamp, error) {
	switch s {
	case "":
		return cepv1.PositionMapping_POSITION_MAPPING_UNSPECIFIED, nil, nil
	case "keep":
		return cepv1.PositionMapping_POSITION_MAPPING_KEEP, nil, nil
	case "from-start":
		return cepv1.PositionMapping_POSITION_MAPPING_FROM_START, nil, nil
	case "from-end":
		return cepv1.PositionMapping_POSITION_MAPPING_FROM_END, nil, nil
	}
	if v, ok := strings.CutPrefix(s, "from-time="); ok {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return 0, nil, fmt.Errorf("--positions from-time=%s: not an RFC 3339 time (2026-12-01T09:00:00Z)", v)
		}
		return cepv1.PositionMapping_POSITION_MAPPING_FROM_TIME, timestamppb.New(t), nil
	}
	return 0, nil, fmt.Errorf("--positions %q: want keep, from-start, from-end or from-time=RFC3339", s)
}
