package main

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/keygroup"
)

// Markers prove, end to end, that every shard has applied everything
// published before them, without relying on the nodes' counters (which
// are not part of a shard's snapshot, so a restarted replica under-counts,
// and it may lead again after a restart).
//
// For each shard, a key of its key-group range that no benchmark event
// uses gets an A (v = 0), a B (v = 99) and two later fillers, with
// timestamps after every event so far: the B completes a match once the
// fillers move the watermark past it. A shard applies its events in stream
// order, so its marker match arrives only after everything published
// before it was applied.
const markerPrefix = "marker-"

// markerWatch collects the marker matches of one round.
type markerWatch struct {
	mu      sync.Mutex
	pending map[string]uint32 // key -> shard
	done    chan struct{}
}

func (w *markerWatch) observe(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.pending[key]; !ok {
		return
	}
	delete(w.pending, key)
	if len(w.pending) == 0 {
		close(w.done)
	}
}

func (w *markerWatch) missing() []uint32 {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []uint32
	for _, s := range w.pending {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// shardRanges lists every shard's key groups, from the live nodes.
func shardRanges(ctx context.Context, c *benchCluster) (map[uint32][2]int, error) {
	out := map[uint32][2]int{}
	for _, m := range c.alive() {
		res, err := newClients(m.api).cluster.ListShards(ctx, connect.NewRequest(&cepv1.ListShardsRequest{}))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", m.id, err)
		}
		for _, s := range res.Msg.Shards {
			if s.KeyGroups != nil {
				out[s.Id] = [2]int{int(s.KeyGroups.First), int(s.KeyGroups.Last)}
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no shards listed")
	}
	return out, nil
}

// sendMarkers publishes round's markers and waits (at most timeout) until
// the match of every shard's marker has arrived. The watcher l must be
// following the output.
func sendMarkers(ctx context.Context, c *benchCluster, pub *publisher, l *latencyRun, gen *generator, round int, timeout time.Duration) error {
	var ranges map[uint32][2]int
	if err := poll(ctx, 30*time.Second, 100*time.Millisecond, func() (err error) {
		ranges, err = shardRanges(ctx, c)
		return err
	}); err != nil {
		return err
	}
	w := &markerWatch{pending: map[string]uint32{}, done: make(chan struct{})}
	keys := map[uint32]string{}
	for id, r := range ranges {
		for j := 0; ; j++ {
			k := markerPrefix + strconv.Itoa(round) + "-" + strconv.Itoa(int(id)) + "-" + strconv.Itoa(j)
			if kg := keygroup.OfKey(k, keyGroups); kg >= r[0] && kg <= r[1] {
				keys[id] = k
				w.pending[k] = id
				break
			}
		}
	}
	l.markers.Store(w)
	ids := make([]uint32, 0, len(keys))
	for id := range keys {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	first := gen.reserve(4 * len(ids))
	for i, id := range ids {
		k := keys[id]
		subject := sourceName + "." + keygroup.KeyToken(k)
		for j, ev := range []struct {
			typ string
			v   int
		}{{"A", 0}, {"B", 99}, {"N", 0}, {"N", 0}} {
			ts := first + 4*i + j + 1
			data := fmt.Sprintf(`{"k":%q,"type":%q,"ts":%d,"v":%d}`, k, ev.typ, ts, ev.v)
			if err := pub.publish(ctx, subject, []byte(data)); err != nil {
				return fmt.Errorf("marker: %w", err)
			}
		}
	}
	if err := pub.drain(ctx, time.Minute); err != nil {
		return fmt.Errorf("marker: %w", err)
	}
	deadline := time.After(timeout)
	for {
		select {
		case <-w.done:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline:
			return fmt.Errorf("no marker match from shard(s) %v within %s", w.missing(), timeout)
		case <-time.After(time.Second):
			if err := c.checkProcesses(); err != nil {
				return err
			}
		}
	}
}

func isMarker(key string) bool { return strings.HasPrefix(key, markerPrefix) }
