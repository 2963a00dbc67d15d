package nfa

// csQueue is a binary min-heap of computation states ordered by their start
// event. It keeps the exact array layout of java.util.PriorityQueue (siftUp on
// offer, siftDown on poll, compaction plus heapify on bulk removal), because
// Flink iterates its partial matches in that array order and polls completed
// matches from it: the order of equal elements decides which of two matches
// starting at the same event is emitted first and therefore which one a skip
// strategy prunes. Reproducing the layout makes our output order Flink's.
type csQueue struct {
	a []*compState
}

func cmpCS(x, y *compState) int {
	xt, xs := startKey(x)
	yt, ys := startKey(y)
	switch {
	case xt < yt:
		return -1
	case xt > yt:
		return 1
	case xs < ys:
		return -1
	case xs > ys:
		return 1
	}
	return 0
}

const maxInt64 = int64(^uint64(0) >> 1)
const minInt64 = -maxInt64 - 1

func startKey(c *compState) (int64, uint64) {
	if !c.started {
		return maxInt64, ^uint64(0)
	}
	return c.startTs, c.startSeq
}

func (q *csQueue) len() int { return len(q.a) }

func (q *csQueue) peek() *compState {
	if len(q.a) == 0 {
		return nil
	}
	return q.a[0]
}

func (q *csQueue) offer(x *compState) {
	q.a = append(q.a, x)
	k := len(q.a) - 1
	for k > 0 {
		parent := (k - 1) >> 1
		e := q.a[parent]
		if cmpCS(x, e) >= 0 {
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
	res := q.a[0]
	n := len(q.a) - 1
	x := q.a[n]
	q.a[n] = nil
	q.a = q.a[:n]
	if n > 0 {
		q.siftDown(0, x)
	}
	return res
}

func (q *csQueue) siftDown(k int, x *compState) {
	n := len(q.a)
	half := n >> 1
	for k < half {
		child := 2*k + 1
		c := q.a[child]
		right := child + 1
		if right < n && cmpCS(c, q.a[right]) > 0 {
			child = right
			c = q.a[child]
		}
		if cmpCS(x, c) <= 0 {
			break
		}
		q.a[k] = c
		k = child
	}
	q.a[k] = x
}

// removeIf removes every element for which drop returns true, keeping the
// survivors in array order and re-heapifying, as PriorityQueue.removeAll does.
func (q *csQueue) removeIf(drop func(*compState) bool) {
	i := 0
	for i < len(q.a) && !drop(q.a[i]) {
		i++
	}
	if i >= len(q.a) {
		return
	}
	w := i
	for j := i + 1; j < len(q.a); j++ {
		if !drop(q.a[j]) {
			q.a[w] = q.a[j]
			w++
		}
	}
	for j := w; j < len(q.a); j++ {
		q.a[j] = nil
	}
	q.a = q.a[:w]
	for k := (w >> 1) - 1; k >= 0; k-- {
		q.siftDown(k, q.a[k])
	}
}
