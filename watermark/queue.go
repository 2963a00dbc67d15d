package watermark

type queueItem[T any] struct {
	ts int64
	v  T
}

// Queue holds the events of one key that wait for the watermark, ordered by
// timestamp; items with equal timestamps keep their arrival order.
//
// It is a sorted slice with a moving head: a push at or after the current
// last timestamp (the common case) appends in O(1) amortised time; an
// out-of-order push binary-searches its place and shifts the items after it,
// which is cheap when the disorder is small (bounded out-of-orderness).
// Popping from the front is O(1) per item.
//
// The zero value is an empty queue ready for use. A Queue is not safe for
// concurrent use.
type Queue[T any] struct {
	items []queueItem[T] // items[head:] are live, sorted by (ts, arrival)
	head  int
	busy  bool // inside a PopUpTo or Items callback
}

func (q *Queue[T]) enter(op string) {
	if q.busy {
		panic("watermark: Queue." + op + " called from within a PopUpTo or Items callback")
	}
	q.busy = true
}

func (q *Queue[T]) leave() { q.busy = false }

// makeRoom makes sure one more item can be appended without reallocating
// while more than half of the backing array is dead space in front of head.
// The copy costs at most as much as the pops that created the dead space, so
// it is O(1) amortised.
func (q *Queue[T]) makeRoom() {
	if len(q.items) < cap(q.items) || q.head == 0 || q.head < len(q.items)/2 {
		return
	}
	n := copy(q.items, q.items[q.head:])
	clear(q.items[n:])
	q.items = q.items[:n]
	q.head = 0
}

// Push adds an item with timestamp ts. It must not be called from within a
// PopUpTo or Items callback (it panics if it is).
func (q *Queue[T]) Push(ts int64, v T) {
	if q.busy {
		panic("watermark: Queue.Push called from within a PopUpTo or Items callback")
	}
	q.makeRoom()
	n := len(q.items)
	if n == q.head || q.items[n-1].ts <= ts {
		q.items = append(q.items, queueItem[T]{ts, v})
		return
	}
	// Out of order: insert after every item with timestamp <= ts (upper
	// bound), which keeps ties in arrival order. items[n-1].ts > ts, so the
	// position is below n.
	lo, hi := q.head, n-1
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if q.items[m].ts <= ts {
			lo = m + 1
		} else {
			hi = m
		}
	}
	q.items = append(q.items, queueItem[T]{})
	copy(q.items[lo+1:], q.items[lo:n])
	q.items[lo] = queueItem[T]{ts, v}
}

// Len returns the number of queued items.
func (q *Queue[T]) Len() int { return len(q.items) - q.head }

// MinTime returns the smallest queued timestamp, and false if the queue is
// empty.
func (q *Queue[T]) MinTime() (int64, bool) {
	if q.head == len(q.items) {
		return 0, false
	}
	return q.items[q.head].ts, true
}

// PopUpTo removes every item with timestamp <= wm and calls fn for each, in
// (timestamp, arrival) order. Each item is removed before fn sees it. fn may
// be nil to discard the items. fn must not call Push, PopUpTo or Items on
// the same queue (it panics if it does); collect new items and push them
// after PopUpTo returns.
func (q *Queue[T]) PopUpTo(wm int64, fn func(ts int64, v T)) {
	q.enter("PopUpTo")
	defer q.leave()
	for q.head < len(q.items) && q.items[q.head].ts <= wm {
		it := q.items[q.head]
		q.items[q.head] = queueItem[T]{} // drop references for the GC
		q.head++
		if fn != nil {
			fn(it.ts, it.v)
		}
	}
	if q.head == len(q.items) {
		q.items = q.items[:0]
		q.head = 0
	}
}

// Items calls fn for every queued item in (timestamp, arrival) order without
// removing anything, e.g. to encode the queue into a snapshot; pushing the
// items into an empty queue in this order restores an identical queue. fn
// must not call Push, PopUpTo or Items on the same queue (it panics if it
// does).
func (q *Queue[T]) Items(fn func(ts int64, v T)) {
	q.enter("Items")
	defer q.leave()
	for i := q.head; i < len(q.items); i++ {
		fn(q.items[i].ts, q.items[i].v)
	}
}
