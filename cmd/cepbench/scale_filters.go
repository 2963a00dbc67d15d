package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cepcluster/cep/cluster"
	"github.com/cepcluster/cep/keygroup"
)

// filtersRow is one way of reading a source stream split among shards, as
// --scale filters measures it: the NATS server's and the readers' CPU (this
// process's) per event stored.
type filtersRow struct {
	Layout     string  `json:"layout"`
	Consumers  int     `json:"consumers"`
	Filters    int     `json:"filters"` // filter subjects over all consumers
	Delivered  int     `json:"delivered"`
	Seconds    float64 `json:"seconds"`
	CPUMicros  float64 `json:"cpu_micros_per_event"` // per event of the stream
	CPUCores   float64 `json:"cpu_cores"`
	LoadAvg    string  `json:"load_avg"`
	Subjects   int     `json:"stored_subjects"`
	Describing string  `json:"describing"`
}

// filterLayout is a stream's subjects and how shards read it.
type filterLayout struct {
	name, describing string
	dest             string     // the stream's subject transform destination
	readers          [][]string // one consumer per entry: its filter subjects (none: all)
	perEvent         int        // deliveries per stored event
	subjects         int
}

// filterLayouts are the layouts --scale filters compares for shards shards
// reading a source stream "src.*" of 32 blocks (the cluster's, 256 key
// groups) or another number of them.
func filterLayouts(shards int) []filterLayout {
	const k = keyGroups
	blocks := keygroup.Blocks(k)
	flat := keygroup.PartitionDestination("src", k)
	var multi, whole [][]string
	for s := range shards {
		first, last := keygroup.BlockRange(s, shards, k)
		multi = append(multi, keygroup.BlockFilters("src", first, last, k))
		whole = append(whole, nil)
	}
	var perBlock [][]string
	for b := range blocks {
		perBlock = append(perBlock, []string{"src." + strconv.Itoa(b)})
	}
	// fewer blocks: BlockFilters over b "key groups" gives one subject per block
	var fewer []filterLayout
	for _, b := range []int{4, 8, 16} {
		if b < shards { // (shards would share a block and skip each other's events)
			continue
		}
		var readers [][]string
		for s := range shards {
			first, last := keygroup.Range(s, shards, b)
			readers = append(readers, keygroup.BlockFilters("src", first, last, b))
		}
		fewer = append(fewer, filterLayout{name: fmt.Sprintf("%d blocks, block filters", b), describing: fmt.Sprintf("a stream of %d blocks, a consumer per shard filtering its blocks", b),
			dest: keygroup.PartitionDestination("src", b), readers: readers, perEvent: 1, subjects: b})
	}
	// a tree of tokens: src.<h mod 2>.<h mod 4>.<h mod 8>.<h mod 16>.<h mod 32>;
	// a shard's range of positions (a block's position is its number with
	// the bits reversed) is a few aligned intervals, each one prefix filter
	tree := "src"
	for m := 2; m <= blocks; m *= 2 {
		tree += ".{{partition(" + strconv.Itoa(m) + ",1)}}"
	}
	var dyadic [][]string
	for s := range shards {
		fb, lb := keygroup.Range(s, shards, blocks)
		for _, f := range dyadicFilters("src", fb, lb, blocks) {
			dyadic = append(dyadic, []string{f})
		}
	}
	out := []filterLayout{
		{name: "one reader", describing: "1 shard: one consumer, no filter", dest: flat, readers: [][]string{nil}, perEvent: 1, subjects: blocks},
		{name: "shards, block filters", describing: "today: a consumer per shard filtering its blocks", dest: flat, readers: multi, perEvent: 1, subjects: blocks},
		{name: "shards, whole stream", describing: "a consumer per shard, no filter, each skipping the others' events", dest: flat, readers: whole, perEvent: shards, subjects: blocks},
		{name: "a consumer per block", describing: "one literal filter per consumer", dest: flat, readers: perBlock, perEvent: 1, subjects: blocks},
		{name: "a tree of blocks", describing: "5 tokens, one prefix filter per consumer, a few consumers per shard", dest: tree, readers: dyadic, perEvent: 1, subjects: blocks},
	}
	return append(out, fewer...)
}

// dyadicFilters covers block positions [first, last] of blocks (a power of
// two) with aligned intervals, each the prefix filter of the tree layout:
// position p is block reverse(p), so the interval of 2^j positions from a
// multiple of 2^j is the blocks whose low bits are the reversed high bits
// of the interval's start, which the first tokens (h mod 2, h mod 4, ...)
// fix.
func dyadicFilters(prefix string, first, last, blocks int) []string {
	bits := 0
	for 1<<bits < blocks {
		bits++
	}
	var out []string
	for p := first; p <= last; {
		j := 0 // the largest aligned interval at p inside [p, last]
		for j < bits && p%(1<<(j+1)) == 0 && p+(1<<(j+1))-1 <= last {
			j++
		}
		fixed := bits - j // how many low bits of the block are fixed
		b := reverseBits(p, bits)
		var sb strings.Builder
		sb.WriteString(prefix)
		for m := 1; m <= fixed; m++ {
			sb.WriteString("." + strconv.Itoa(b%(1<<m)))
		}
		for m := fixed + 1; m <= bits; m++ {
			sb.WriteString(".*")
		}
		out = append(out, sb.String())
		p += 1 << j
	}
	return out
}

// withPrefix replaces the layouts' subject prefix "src" by prefix.
func withPrefix(subject, prefix string) string { return prefix + strings.TrimPrefix(subject, "src") }

func reverseBits(v, bits int) int {
	r := 0
	for range bits {
		r = r<<1 | v&1
		v >>= 1
	}
	return r
}

// measureFilters publishes the events to a stream of each layout and reads
// it with the layout's consumers, all at once, as the shards' leaders
// would (ordered consumers, the leader's batch size).
func measureFilters(ctx context.Context, o *options, url string, log *slog.Logger) ([]filtersRow, error) {
	nc, err := nats.Connect(url, nats.Name("cepbench-filters"))
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	pub, err := newPublisher(nc, o.inflight)
	if err != nil {
		return nil, err
	}
	shards := o.shards
	if shards <= 0 {
		shards = 3
	}
	evs := newGenerator(o.keys).gen(o.events)
	var rows []filtersRow
	type stored struct {
		st     jetstream.Stream
		prefix string
	}
	streams := map[string]stored{}
	for _, l := range filterLayouts(shards) {
		s, ok := streams[l.dest]
		if !ok {
			// streams may not share subjects: each layout's stream has its own prefix
			s.prefix = fmt.Sprintf("src%d", len(streams))
			name := "FILTERS_" + s.prefix
			_ = js.DeleteStream(ctx, name)
			s.st, err = js.CreateStream(ctx, jetstream.StreamConfig{
				Name: name, Subjects: []string{s.prefix + ".*"}, Storage: jetstream.FileStorage,
				SubjectTransform: &jetstream.SubjectTransformConfig{Source: s.prefix + ".*", Destination: withPrefix(l.dest, s.prefix)},
			})
			if err != nil {
				return nil, fmt.Errorf("stream for %s: %w", l.name, err)
			}
			defer func() { _ = js.DeleteStream(context.Background(), name) }()
			log.Info("filters: publishing", "stream", name, "events", evs.len(), "destination", l.dest)
			if _, err := pub.publishAll(ctx, evs, subjects(s.prefix, o.keys)); err != nil {
				return nil, err
			}
			streams[l.dest] = s
		}
		for i, f := range l.readers {
			l.readers[i] = nil
			for _, sub := range f {
				l.readers[i] = append(l.readers[i], withPrefix(sub, s.prefix))
			}
		}
		st := s.st
		row, err := readLayout(ctx, st, l, evs.len(), cluster.DefaultConfig().IngestBatch, log)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", l.name, err)
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// readLayout reads st with l's consumers at once and returns the CPU of
// this process (server and readers) per stored event.
func readLayout(ctx context.Context, st jetstream.Stream, l filterLayout, n, batch int, log *slog.Logger) (filtersRow, error) {
	row := filtersRow{Layout: l.name, Describing: l.describing, Consumers: len(l.readers), Subjects: l.subjects, LoadAvg: loadAvg()}
	for _, f := range l.readers {
		row.Filters += len(f)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	own := startOwn(nil)
	start := time.Now()
	var wg sync.WaitGroup
	counts := make([]int, len(l.readers))
	errs := make([]error, len(l.readers))
	for i, f := range l.readers {
		wg.Go(func() { counts[i], errs[i] = readAll(ctx, st, f, batch) })
	}
	wg.Wait()
	row.Seconds = time.Since(start).Seconds()
	if err := errors.Join(errs...); err != nil {
		return row, err
	}
	for _, c := range counts {
		row.Delivered += c
	}
	if row.Delivered != n*l.perEvent {
		return row, fmt.Errorf("delivered %d, want %d", row.Delivered, n*l.perEvent)
	}
	cpu, err := own.stop(n)
	if err != nil {
		return row, err
	}
	row.CPUMicros, row.CPUCores = cpu.MicrosPerEvent, cpu.Cores
	log.Info("filters: read", "layout", l.name, "consumers", row.Consumers, "seconds", row.Seconds, "cpu µs/event", row.CPUMicros)
	return row, nil
}

// readAll reads every stored message of filters with an ordered consumer
// and returns how many there were.
func readAll(ctx context.Context, st jetstream.Stream, filters []string, batch int) (int, error) {
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: filters, DeliverPolicy: jetstream.DeliverAllPolicy})
	if err != nil {
		return 0, err
	}
	info, err := cons.Info(ctx)
	if err != nil {
		return 0, err
	}
	want := int(info.NumPending)
	if want == 0 {
		return 0, nil
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(batch))
	if err != nil {
		return 0, err
	}
	defer it.Stop()
	got := 0
	for got < want {
		if _, err := it.Next(jetstream.NextContext(ctx)); err != nil {
			return got, err
		}
		got++
	}
	return got, nil
}
