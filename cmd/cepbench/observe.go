package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/nats-io/nats.go/jetstream"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/api/gen/cep/v1/cepv1connect"
	"github.com/cepcluster/cep/cluster"
	"github.com/cepcluster/cep/keygroup"
)

var apiHTTP = &http.Client{Timeout: 5 * time.Second}

type clients struct {
	patterns cepv1connect.PatternServiceClient
	sources  cepv1connect.SourceServiceClient
	cluster  cepv1connect.ClusterServiceClient
}

func newClients(addr string) clients {
	base := "http://" + addr
	return clients{
		patterns: cepv1connect.NewPatternServiceClient(apiHTTP, base),
		sources:  cepv1connect.NewSourceServiceClient(apiHTTP, base),
		cluster:  cepv1connect.NewClusterServiceClient(apiHTTP, base),
	}
}

// setup creates the source and deploys the pattern through any live node
// (retrying while the metadata group elects its leader), then waits until
// every shard runs the pattern.
func setup(ctx context.Context, c *benchCluster, source, key, spec string) error {
	if err := setupSource(ctx, c, source, key); err != nil {
		return err
	}
	return deploy(ctx, c, spec, false)
}

// setupSource creates the source.
func setupSource(ctx context.Context, c *benchCluster, source, key string) error {
	cl := newClients(c.members[0].api)
	err := poll(ctx, 60*time.Second, 100*time.Millisecond, func() error {
		_, err := cl.sources.CreateSource(ctx, connect.NewRequest(&cepv1.CreateSourceRequest{Name: source, Key: key}))
		if err != nil && connect.CodeOf(err) == connect.CodeAlreadyExists {
			return nil
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("create source: %w", err)
	}
	return nil
}

// deploy deploys the pattern and waits until every shard runs it;
// fromStart has it read the events already in the source's stream.
func deploy(ctx context.Context, c *benchCluster, spec string, fromStart bool) error {
	cl := newClients(c.members[0].api)
	err := poll(ctx, 60*time.Second, 100*time.Millisecond, func() error {
		_, err := cl.patterns.DeployPattern(ctx, connect.NewRequest(&cepv1.DeployPatternRequest{Spec: spec, FromStart: fromStart}))
		switch connect.CodeOf(err) {
		case connect.CodeAlreadyExists:
			return nil
		case connect.CodeInvalidArgument, connect.CodeFailedPrecondition:
			return permanent(err)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("deploy pattern: %w", err)
	}
	return poll(ctx, 60*time.Second, 100*time.Millisecond, func() error {
		if err := c.checkProcesses(); err != nil {
			return permanent(err)
		}
		for _, m := range c.alive() {
			res, err := newClients(m.api).cluster.ListShards(ctx, connect.NewRequest(&cepv1.ListShardsRequest{}))
			if err != nil {
				return err
			}
			for _, s := range res.Msg.Shards {
				if s.Patterns == 0 {
					return fmt.Errorf("shard %d on %s runs no pattern yet", s.Id, m.id)
				}
			}
		}
		return nil
	})
}

// shardView is one shard as the live nodes report it.
type shardView struct {
	id          uint32
	first, last int
	leader      string // the node that reports itself as leader, agreed by all
}

// shardLeader finds the leader of a shard: a live node whose own API
// reports itself as its leader, with every live node agreeing.
func shardLeader(ctx context.Context, c *benchCluster, id uint32) (shardView, error) {
	var v shardView
	views := map[string]int{}
	self := ""
	for _, m := range c.alive() {
		res, err := newClients(m.api).cluster.ListShards(ctx, connect.NewRequest(&cepv1.ListShardsRequest{}))
		if err != nil {
			return v, fmt.Errorf("%s: %w", m.id, err)
		}
		for _, s := range res.Msg.Shards {
			if s.Id != id {
				continue
			}
			v.id = s.Id
			if s.KeyGroups != nil {
				v.first, v.last = int(s.KeyGroups.First), int(s.KeyGroups.Last)
			}
			views[s.LeaderNodeId]++
			if s.LeaderNodeId == m.id {
				self = m.id
			}
		}
	}
	if self == "" || views[self] != len(c.alive()) {
		return v, fmt.Errorf("no agreed leader for shard %d: %v", id, views)
	}
	v.leader = self
	return v, nil
}

// metrics is the cluster-wide sum of a node's shard metrics, each shard
// counted once: from the replica that leads it (or, while it has none, the
// replica that applied most).
type metrics struct {
	events, matches, timeouts, outbox, dead float64
	shards                                  int
}

var metricNames = map[string]bool{
	"cep_events_total": true, "cep_matches_total": true, "cep_timeouts_total": true,
	"cep_outbox_records": true, "cep_shard_leader": true, "cep_events_dead_lettered_total": true,
}

// scrape reads a node's /metrics: name -> shard -> value.
func scrape(ctx context.Context, addr string) (map[string]map[string]float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("/metrics: %s", res.Status)
	}
	body, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, err
	}
	return parseMetrics(body), nil
}

func parseMetrics(body []byte) map[string]map[string]float64 {
	out := map[string]map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		end := strings.IndexAny(line, "{ ")
		if end < 0 || !metricNames[line[:end]] {
			continue
		}
		name, rest, shard := line[:end], line[end:], ""
		if rest[0] == '{' {
			rb := strings.IndexByte(rest, '}')
			if rb < 0 {
				continue
			}
			for _, l := range strings.Split(rest[1:rb], ",") {
				if k, v, ok := strings.Cut(l, "="); ok && k == "shard" {
					shard = strings.Trim(v, `"`)
				}
			}
			rest = rest[rb+1:]
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			continue
		}
		if out[name] == nil {
			out[name] = map[string]float64{}
		}
		out[name][shard] = v
	}
	return out
}

// collect scrapes every live node and sums per shard.
func collect(ctx context.Context, c *benchCluster) (metrics, error) {
	type pick struct {
		vals   map[string]float64
		leader bool
	}
	best := map[string]pick{}
	for _, m := range c.alive() {
		ms, err := scrape(ctx, m.api)
		if err != nil {
			continue // a node being killed or restarted
		}
		for shard, ev := range ms["cep_events_total"] {
			vals := map[string]float64{}
			for name := range metricNames {
				vals[name] = ms[name][shard]
			}
			lead := ms["cep_shard_leader"][shard] == 1
			cur, ok := best[shard]
			switch {
			case !ok, lead && !cur.leader, !cur.leader && ev > cur.vals["cep_events_total"]:
				best[shard] = pick{vals, lead}
			}
		}
	}
	var out metrics
	if len(best) == 0 {
		return out, fmt.Errorf("no node answered /metrics")
	}
	for _, p := range best {
		out.events += p.vals["cep_events_total"]
		out.matches += p.vals["cep_matches_total"]
		out.timeouts += p.vals["cep_timeouts_total"]
		out.outbox += p.vals["cep_outbox_records"]
		out.dead += p.vals["cep_events_dead_lettered_total"]
	}
	out.shards = len(best)
	return out, nil
}

// waitApplied polls the metrics until the cluster has applied want events
// (and, with drained, has published its whole outbox). It fails when the
// count does not move for stall, after timeout, or when check fails. It returns the metrics
// of the poll that saw it done and when that poll started.
func waitApplied(ctx context.Context, c *benchCluster, want float64, drained bool, every, stall, timeout time.Duration, check func() error, progress func(metrics)) (metrics, time.Time, error) {
	deadline := time.Now().Add(timeout)
	lastMove := time.Now()
	var last metrics
	lastReport := time.Now()
	for {
		at := time.Now()
		m, err := collect(ctx, c)
		if err == nil {
			if m.events >= want && (!drained || m.outbox == 0) {
				return m, at, nil
			}
			if m.events != last.events || m.outbox != last.outbox {
				lastMove = at
			}
			last = m
		}
		if err := c.checkProcesses(); err != nil {
			return last, at, err
		}
		if check != nil {
			if err := check(); err != nil {
				return last, at, err
			}
		}
		if progress != nil && time.Since(lastReport) >= 5*time.Second {
			progress(last)
			lastReport = time.Now()
		}
		switch {
		case time.Since(lastMove) > stall:
			return last, at, fmt.Errorf("no progress for %s: %.0f of %.0f events applied, %.0f records in the outbox", stall, last.events, want, last.outbox)
		case time.Now().After(deadline):
			return last, at, fmt.Errorf("timeout after %s: %.0f of %.0f events applied, %.0f records in the outbox", timeout, last.events, want, last.outbox)
		}
		select {
		case <-ctx.Done():
			return last, at, ctx.Err()
		case <-time.After(every):
		}
	}
}

// outRecord is the part of an output record the benchmark reads.
type outRecord struct {
	Type string `json:"type"`
	Key  string `json:"key"`
	End  int64  `json:"end"`
}

// watchOutputs follows a pattern's output subject from now on with an
// ordered consumer and calls fn for every record with its arrival time.
// stop ends it and waits for the callback goroutine.
func watchOutputs(ctx context.Context, js jetstream.JetStream, pattern string, fn func(r *outRecord, at time.Time)) (stop func(), err error) {
	cons, err := js.OrderedConsumer(ctx, cluster.OutputStream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{keygroup.OutputSubjectRoot + pattern},
		DeliverPolicy:  jetstream.DeliverNewPolicy,
	})
	if err != nil {
		return nil, err
	}
	it, err := cons.Messages()
	if err != nil {
		return nil, err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			msg, err := it.Next()
			if err != nil {
				return
			}
			at := time.Now()
			var r outRecord
			if json.Unmarshal(msg.Data(), &r) == nil {
				fn(&r, at)
			}
		}
	}()
	return func() {
		it.Stop()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
		}
	}, nil
}
