package nfa

import "slices"

// csQueue is a binary min-heap of computation states ordered by their start
// event. It keeps the exact array layout of java.util.PriorityQueue (siftUp on
// offer, siftDown on poll, compaction plus heapify on bulk removal), because
// Flink iterates its partial matches in that array order and polls completed
// matches from it: the order of equal elements decides which of two matches
// starting at the same event is emitted first and therefore which one a skip
// strategy prunes. Reproducing the layout makes our output order Flink's.
type csQueue struct {
	a []qent
	// unsorted: the array may not be in nondecreasing order. Flink's
	// queues mostly are (a partial match's successors share its start
	// event, a new one starts at the latest event, a start state sorts
	// last), and a sorted array is a heap that offering its elements in
	// order rebuilds as it is: appendRun copies runs of it in one go.
	unsorted bool
}

// qent is a queue entry: the partial match with the fields the queue and
// the per-event loop read, inline, so that ordering the queue and passing
// by a partial match in an idle state do not load the partial match itself
// (at hundreds of partial matches per key, each load was a cache miss).
type qent struct {
	ts    int64  // start event's time; maxInt64 for a partial match without events
	order uint64 // start event's order (event.order); max for one without events
	state int32
	cs    *compState
}

func entOf(c *compState) qent {
	ts, order := startKey(c)
	return qent{ts: ts, order: order, state: c.state, cs: c}
}

// started reports whether the partial match holds events.
func (e *qent) started() bool { return e.order != ^uint64(0) || e.ts != maxInt64 }

func cmpEnt(x, y *qent) int {
	switch {
	case x.ts < y.ts:
		return -1
	case x.ts > y.ts:
		return 1
	case x.order < y.order:
		return -1
	case x.order > y.order:
		return 1
	}
	return 0
}

func cmpCS(x, y *compState) int {
	a, b := entOf(x), entOf(y)
	return cmpEnt(&a, &b)
}

const maxInt64 = int64(^uint64(0) >> 1)
const minInt32 = -1 << 31

func startKey(c *compState) (int64, uint64) {
	if !c.started {
		return maxInt64, ^uint64(0)
	}
	return c.startTs, c.startOrder
}

func (q *csQueue) len() int { return len(q.a) }

func (q *csQueue) peek() *compState {
	if len(q.a) == 0 {
		return nil
	}
	return q.a[0].cs
}

func (q *csQueue) offer(c *compState) { q.offerEnt(entOf(c)) }

func (q *csQueue) offerEnt(x qent) {
	if n := len(q.a); n > 0 && !q.unsorted && cmpEnt(&x, &q.a[n-1]) < 0 {
		q.unsorted = true
	}
	q.a = append(q.a, x)
	k := len(q.a) - 1
	for k > 0 {
		parent := (k - 1) >> 1
		e := q.a[parent]
		if cmpEnt(&x, &e) >= 0 {
			break
		}
		q.a[k] = e
		k = parent
	}
	q.a[k] = x
}

func (q *csQueue) poll() *compState {
	if len(q.a) == 0 {
		return nil
	}
	res := q.a[0].cs
	n := len(q.a) - 1
	x := q.a[n]
	q.a[n] = qent{}
	q.a = q.a[:n]
	if n > 0 {
		q.siftDown(0, x)
	}
	q.unsorted = q.unsorted || n > 1 // the last element moved to the top
	return res
}

func (q *csQueue) siftDown(k int, x qent) {
	n := len(q.a)
	half := n >> 1
	for k < half {
		child := 2*k + 1
		c := q.a[child]
		right := child + 1
		if right < n && cmpEnt(&c, &q.a[right]) > 0 {
			child = right
			c = q.a[child]
		}
		if cmpEnt(&x, &c) <= 0 {
			break
		}
		q.a[k] = c
		k = child
	}
	q.a[k] = x
}

// appendRun offers run's entries in order; runSorted says that they are in
// nondecreasing order. When the queue is sorted too and run starts at or
// after its last element, every offer would stay where it is appended,
// so run is appended as it is.
func (q *csQueue) appendRun(run []qent, runSorted bool) {
	if len(run) == 0 {
		return
	}
	if runSorted && !q.unsorted && (len(q.a) == 0 || cmpEnt(&q.a[len(q.a)-1], &run[0]) <= 0) {
		q.a = append(q.a, run...)
		return
	}
	for i := range run {
		q.offerEnt(run[i])
	}
}

// checkSorted sets unsorted from the array, after it was written other
// than by the queue's methods.
func (q *csQueue) checkSorted() {
	q.unsorted = !slices.IsSortedFunc(q.a, func(x, y qent) int { return cmpEnt(&x, &y) })
}

// removeIf removes every element for which drop returns true, keeping the
// survivors in array order and re-heapifying, as PriorityQueue.removeAll does.
// (A sorted array stays as it is: it is a heap already.) drop is called once
// for each element, in array order: capPartial's counts on it.
func (q *csQueue) removeIf(drop func(*compState) bool) {
	i := 0
	for i < len(q.a) && !drop(q.a[i].cs) {
		i++
	}
	if i >= len(q.a) {
		return
	}
	w := i
	for j := i + 1; j < len(q.a); j++ {
		if !drop(q.a[j].cs) {
			q.a[w] = q.a[j]
			w++
		}
	}
	clear(q.a[w:])
	q.a = q.a[:w]
	for k := (w >> 1) - 1; k >= 0; k-- {
		q.siftDown(k, q.a[k])
	}
}
