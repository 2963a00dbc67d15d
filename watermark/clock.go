package watermark

// Part is what one partition of a source (the key groups one shard reads)
// reports of its event time: the watermark its own events give (events of
// every key move it) and whether it is idle, with no event for the idle
// timeout.
type Part struct {
	Watermark int64
	Idle      bool
}

// Combine returns a source's watermark from its partitions, as a Flink
// operator after keyBy combines the watermarks of its input channels: the
// minimum over the partitions that are not idle, or, when every one is
// idle, the maximum of them (the source as a whole has gone quiet: time
// moves up to what its events showed, never beyond). ok is false when
// there is no partition. The result depends only on the set of parts, not
// their order.
func Combine(parts []Part) (wm int64, ok bool) {
	if len(parts) == 0 {
		return MinTime, false
	}
	lo, hi := MaxTime, MinTime
	active := false
	for _, p := range parts {
		if p.Idle {
			hi = max(hi, p.Watermark)
			continue
		}
		active = true
		lo = min(lo, p.Watermark)
	}
	if active {
		return lo, true
	}
	return hi, true
}

// Next returns the watermark to log after logged, given the combined value
// c: c when it is ahead, else nothing (ok false). What is logged never goes
// back: a combination that falls behind (a partition no longer idle, a
// new partition that has seen less) is ignored until it passes the logged
// value again.
func Next(logged, c int64) (wm int64, ok bool) {
	if c > logged {
		return c, true
	}
	return logged, false
}

// Activity decides a partition's idleness from processing time: it is
// idle once its watermark has not moved for the idle timeout. The owner
// feeds it the partition's watermark and the current processing time;
// timeout 0 (or less) never makes it idle.
type Activity struct {
	wm      int64
	since   int64 // processing time the watermark last moved (or the start)
	started bool
}

// Observe records the partition's watermark at processing time now and
// reports whether the partition is idle.
func (a *Activity) Observe(wm, now, timeout int64) (idle bool) {
	if !a.started || wm > a.wm {
		a.started, a.wm, a.since = true, wm, now
		return false
	}
	if timeout <= 0 || now < a.since {
		return false
	}
	return uint64(now)-uint64(a.since) >= uint64(timeout)
}
