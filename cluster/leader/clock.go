package leader

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cepcluster/cep/cluster/meta"
	"github.com/cepcluster/cep/cluster/plan"
	"github.com/cepcluster/cep/shard"
	"github.com/cepcluster/cep/watermark"
)

// DefaultIdleTimeout is a pattern's idleTimeout when its document sets
// none: a shard that has had no event of a source for this long stops
// holding the source's clock back (Flink's withIdleness). A second keeps
// a quiet key's matches (the README's quick start) about a second behind
// the last event, and is long against the gaps of a busy source.
const DefaultIdleTimeout = time.Second

// ClockSubjectRoot prefixes the subjects shard leaders report their
// sources' event time on (ClockSubjectRoot + source read). Only the
// node's NATS user may publish there (publisherPermissions).
const ClockSubjectRoot = "cep.clock."

// clockReport is what a shard leader publishes every ClockEvery for one
// source it reads: per pattern, the watermark its events give and whether
// it is idle.
type clockReport struct {
	Shard  uint64       `json:"shard"`
	Clocks []clockEntry `json:"clocks"`
}

type clockEntry struct {
	Pattern   string `json:"pattern"`
	Source    string `json:"source"`
	Watermark int64  `json:"wm"`
	Idle      bool   `json:"idle"`
	// Version is the pattern's deployed version on the reporting shard (0
	// from a release that did not send it: taken as before)
	Version uint64 `json:"version,omitempty"`
}

// maxClockEntries bounds the entries of a report taken from the network.
const maxClockEntries = 10_000

// clockKey names one clock: a pattern's source.
type clockKey struct{ pattern, source string }

// clockTable is what a leader has heard of the other shards' partitions,
// by clock then shard. The NATS callback fills it, the clock loop reads it.
type clockTable struct {
	mu    sync.Mutex
	parts map[clockKey]map[uint64]watermark.Part
	// settled[k][shard] is the shard's watermark with its history
	// (watermark.Settled): what an idle shard is left out against, and
	// when the shard was last heard of
	settled map[clockKey]map[uint64]*watermark.Settled
	// version[k] is this shard's deployment of k's pattern, partVersion
	// the deployment each part taken is of: a pattern deleted and deployed
	// again starts its clock anew, so the reports of the deployment before
	// (ahead of the new one, and never lower than what was taken of it)
	// are dropped, not combined (deployed)
	version     map[clockKey]uint64
	partVersion map[clockKey]map[uint64]uint64
	now         func() time.Time // time.Now; tests control it
}

// deployed records this shard's deployment of k's pattern: the parts
// taken of another deployment are forgotten, and with them every
// shard's history of k when the deployment changed.
func (t *clockTable) deployed(k clockKey, v uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.version == nil {
		t.version = map[clockKey]uint64{}
	}
	old, known := t.version[k]
	if known && old == v {
		return
	}
	t.version[k] = v
	for id, pv := range t.partVersion[k] {
		if pv != 0 && pv != v {
			delete(t.parts[k], id)
			delete(t.partVersion[k], id)
			delete(t.settled[k], id)
		}
	}
	if known {
		delete(t.settled, k)
	}
}

func (t *clockTable) clock() time.Time {
	if t.now != nil {
		return t.now()
	}
	return time.Now()
}

// take records a report. A shard's watermark only moves forward: a
// report lower than one taken (from a former leader, delivered late) is
// not taken.
func (t *clockTable) take(rep *clockReport) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, e := range rep.Clocks {
		k := clockKey{e.Pattern, e.Source}
		m := t.parts[k]
		if m == nil {
			m = map[uint64]watermark.Part{}
			t.parts[k] = m
		}
		if v := t.version[k]; e.Version != 0 && v != 0 && e.Version != v {
			continue // another deployment of the pattern (deployed)
		}
		if t.partVersion == nil {
			t.partVersion = map[clockKey]map[uint64]uint64{}
		}
		pv := t.partVersion[k]
		if pv == nil {
			pv = map[uint64]uint64{}
			t.partVersion[k] = pv
		}
		if old, ok := m[rep.Shard]; ok && old.Watermark > e.Watermark && pv[rep.Shard] == e.Version {
			continue
		}
		if pv[rep.Shard] != e.Version {
			delete(t.settled[k], rep.Shard) // its history is of another deployment
		}
		m[rep.Shard] = watermark.Part{Watermark: e.Watermark, Idle: e.Idle}
		pv[rep.Shard] = e.Version
		t.settle(k, rep.Shard, e.Watermark, t.clock())
	}
}

// settle records a partition's watermark in its history.
func (t *clockTable) settle(k clockKey, shardID uint64, wm int64, now time.Time) {
	if t.settled == nil {
		t.settled = map[clockKey]map[uint64]*watermark.Settled{}
	}
	m := t.settled[k]
	if m == nil {
		m = map[uint64]*watermark.Settled{}
		t.settled[k] = m
	}
	if c := m[shardID]; c != nil {
		c.Observe(wm, now, clockSettle)
	} else {
		m[shardID] = watermark.NewSettled(wm, now)
	}
}

// clockSettle is how long a shard's watermark must have stood before an
// idle shard is left out against it: a source that resumes with a burst
// reaches every shard within it (a report's round trip and the reading),
// so a shard still reported idle, whose part of the burst is on its way,
// is not overtaken by the first shard to read it.
const clockSettle = 250 * time.Millisecond

// clockStale is how long without a report a shard's last one stands
// as it was: past it, the shard holds the clock back even if it said it
// was idle (a shard without a leader is not known to be idle).
const clockStale = 500 * time.Millisecond

// combined is the clock of k over the shards: watermark.CombineHeard of
// each shard's partition, with own for this leader's shard; ok is false
// while some shard has not reported (it may hold the clock back).
func (t *clockTable) combined(k clockKey, shards []uint64, self uint64, own watermark.Part) (int64, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.clock()
	t.settle(k, self, own.Watermark, now)
	heard := make([]watermark.Heard, 0, len(shards))
	for _, id := range shards {
		h := watermark.Heard{Part: own, History: t.settled[k][id], Own: id == self}
		if !h.Own {
			p, ok := t.parts[k][id]
			if !ok {
				return watermark.MinTime, false
			}
			h.Part = p
		}
		heard = append(heard, h)
	}
	return watermark.CombineHeard(heard, now, clockSettle, clockStale)
}

// decodeClockReport checks a report read from NATS before it is taken.
func decodeClockReport(data []byte) (*clockReport, bool) {
	var rep clockReport
	if err := json.Unmarshal(data, &rep); err != nil || rep.Shard == 0 || len(rep.Clocks) > maxClockEntries {
		return nil, false
	}
	for _, e := range rep.Clocks {
		if e.Pattern == "" || e.Source == "" {
			return nil, false
		}
	}
	return &rep, true
}

// ClockStatus is one source clock of a shard as its leader sees it.
type ClockStatus struct {
	Pattern, Source string
	// Watermark is the logged clock, Progress what this shard's events
	// show and MaxTime the newest event time of the source here
	// (watermark.MinTime for none).
	Watermark, Progress, MaxTime int64
	// Idle: this shard has had no event of the source for the idle
	// timeout and no longer holds the clock back.
	Idle bool
}

// clock reports this shard's partitions of its sources to the other
// shard leaders and logs each source's clock across the shards
// (OpClock) as it moves: the minimum over the shards that are not idle,
// every one of them having reported. What is logged never goes back
// (watermark.Next; the state machine ignores a lower one too), and a new
// leader starts from the logged clocks, so a failover neither moves a
// watermark back nor loses one.
func (r *Leader) clock(ctx context.Context) error {
	self := r.sh.ID()
	table := &clockTable{parts: map[clockKey]map[uint64]watermark.Part{}, now: r.env.Config.Now}
	sub, err := r.env.NATS().Subscribe(ClockSubjectRoot+">", func(m *nats.Msg) {
		if rep, ok := decodeClockReport(m.Data); ok && rep.Shard != self {
			table.take(rep)
		}
	})
	if err != nil {
		return err
	}
	defer sub.Unsubscribe()
	defer r.env.Status.SetClock(self, nil)
	activity := map[clockKey]*watermark.Activity{}
	// the shard map, read again only when the metadata changed: a copy of
	// the whole metadata every 50 ms per shard leader was a tenth of an
	// idle node's CPU
	var m *meta.Meta
	var metaChanged <-chan struct{}
	t := time.NewTicker(r.env.Config.ClockEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		var clocks []shard.SourceClock
		var modes map[string]bool
		r.sh.FSM().View(func(s *shard.State, _ uint64) { clocks, modes = s.Clocks(), s.ClockModes() })
		now := r.env.Config.Now().UnixMilli() // idleness is the leader's: only its decisions are logged
		select {
		case <-metaChanged:
			m = nil
		default: // unchanged (or not read yet: a nil channel)
		}
		if m == nil {
			m, metaChanged = r.env.Meta.View()
		}
		// the same decision as reconcile's (plan.ClockOf)
		cp := plan.ClockOf(m.Shards, self, r.env.Quarantine.StoppedHere)
		shards := cp.Shards
		var ops []shard.Op
		for _, name := range plan.ClockModeChanges(modes, cp) {
			ops = append(ops, shard.ClockModeOp{Pattern: name, On: cp.On})
		}
		byRead := map[string][]clockEntry{}
		status := make([]ClockStatus, 0, len(clocks))
		seen := map[clockKey]bool{}
		for _, c := range clocks {
			k := clockKey{c.Pattern, c.Source}
			seen[k] = true
			a := activity[k]
			if a == nil {
				a = &watermark.Activity{}
				activity[k] = a
			}
			timeout := c.IdleTimeout
			if timeout == 0 {
				timeout = r.env.Config.IdleTimeout.Milliseconds()
			}
			// idle by the newest event time, which only events move (the
			// progress also takes the logged clock: a clock that moves must
			// not make the shard look busy)
			own := watermark.Part{Watermark: c.Progress, Idle: a.Observe(c.MaxTime, now, timeout)}
			byRead[c.Read] = append(byRead[c.Read], clockEntry{Pattern: c.Pattern, Source: c.Source, Watermark: own.Watermark, Idle: own.Idle, Version: c.Version})
			table.deployed(k, c.Version)
			wm := c.Clock
			if comb, ok := table.combined(k, shards, self, own); ok {
				if next, move := watermark.Next(c.Clock, comb); move {
					ops = append(ops, shard.ClockOp{Pattern: c.Pattern, Source: c.Source, Time: next})
					wm = next
				}
			}
			status = append(status, ClockStatus{Pattern: c.Pattern, Source: c.Source, Watermark: wm, Progress: c.Progress, MaxTime: c.MaxTime, Idle: own.Idle})
		}
		for k := range activity {
			if !seen[k] {
				delete(activity, k)
			}
		}
		for read, entries := range byRead {
			data, _ := json.Marshal(clockReport{Shard: self, Clocks: entries})
			// a report lost is sent again within ClockEvery
			_ = r.env.NATS().Publish(ClockSubjectRoot+read, data)
		}
		r.env.Status.SetClock(self, status)
		if len(ops) > 0 {
			if err := r.sh.Propose(ctx, &shard.Batch{Ops: ops}); err != nil {
				return err
			}
		}
	}
}
