package nfa

import "unsafe"

// UnreachableEvents counts the buffered events that no partial match can
// reach: the ones not on any path that extraction could follow from a
// partial match (edges whose version the walk is compatible with).
func UnreachableEvents(m *Matcher) int {
	n := 0
	for _, ks := range generalKeys(m) {
		reach := map[uint64]bool{}
		type st struct {
			n   *node
			ver dewey
		}
		seen := map[*node]map[string]bool{}
		var stack []st
		for _, q := range []*csQueue{&ks.partial, &ks.completed} {
			for _, e := range q.a {
				if c := e.cs; c.prev != nil {
					stack = append(stack, st{c.prev, c.ver})
				}
			}
		}
		for len(stack) > 0 {
			cur := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			k := fmtDewey(cur.ver)
			if seen[cur.n] == nil {
				seen[cur.n] = map[string]bool{}
			}
			if seen[cur.n][k] {
				continue
			}
			seen[cur.n][k] = true
			reach[cur.n.ev.order] = true
			for _, e := range cur.n.edges {
				if !e.removed && e.target != nil && cur.ver.compatible(e.ver) {
					stack = append(stack, st{e.target, e.ver})
				}
			}
		}
		for _, ev := range ks.bufferedEvents() {
			if !reach[ev.order] {
				n++
			}
		}
		if len(ks.bufferedEvents()) != ks.nEvents || len(ks.liveNodes()) != ks.nNodes {
			n += 1 << 20 // the count of buffered events or of nodes is off: a node is alive but unreachable
		}
	}
	return n
}

func fmtDewey(d dewey) string {
	b := make([]byte, 0, 4*len(d))
	for _, x := range d {
		b = append(b, byte(x>>24), byte(x>>16), byte(x>>8), byte(x))
	}
	return string(b)
}

// DisablePassBy makes m visit every partial match for every event, offer
// each to the next queue by itself and look at each for a timeout (the
// reference for the pass-by fast path, copied runs and the timed-out
// prefix).
func DisablePassBy(m *Matcher) { m.test.noPassBy = true }

// DisableFieldCache makes m evaluate every condition by itself (the
// reference for conditions sharing a field read).
func DisableFieldCache(m *Matcher) { m.test.noFieldCache = true }

// SetPassByFrom sets the number of partial matches from which m tries the
// pass-by fast path.
func SetPassByFrom(m *Matcher, n int) { m.test.passFrom = n }

// PassedBy counts the events m's pass-by fast path let by.
func PassedBy(m *Matcher) int { return m.test.passedBy }

// DisableEventsCache makes m walk a partial match's path whenever a
// condition calls events() (the reference for the per-partial-match cache).
func DisableEventsCache(m *Matcher) { m.test.noEvCache = true }

// EventsCacheHits counts the events() calls m answered from a cache.
func EventsCacheHits(m *Matcher) int { return m.test.evCacheHits }

// NumberDuplicates runs the matcher's numbering of identical records of one
// step over recs.
func NumberDuplicates(recs []Record) {
	m := &Matcher{sc: scratch{out: recs}}
	m.numberDuplicates(0)
}

// DisableBumpInPlace makes m lock a partial match's node under each new
// version and release it under the old one (the reference for
// bumpsInPlace).
func DisableBumpInPlace(m *Matcher) { m.test.noBump = true }

// DisableExtendInPlace makes every take copy its version (the reference
// for versions extended in place).
func DisableExtendInPlace(m *Matcher) { m.test.noExtend = true }

// DisableLazyRows makes a DEFINE condition read every row of the partial
// match before it is evaluated (the reference for reading back lazily).
func DisableLazyRows(m *Matcher) { m.test.noLazyRows = true }

// NodeMemoHits is the number of conditions answered for a partial match
// from another's evaluation at the same node.
func NodeMemoHits(m *Matcher) int { return m.test.nodeMemoHits }

// ExtendedInPlace is the number of versions extended in place.
func ExtendedInPlace(m *Matcher) int { return m.test.extended }

// BumpedInPlace counts the versions m increased in place, without locking
// and releasing.
func BumpedInPlace(m *Matcher) int { return m.test.bumped }

// SharedVersions counts the partial and completed matches whose version
// array is also another one's. A version may be increased in place
// (bumpsInPlace), which is only right while no other match reads it: the
// count must stay 0.
func SharedVersions(m *Matcher) int {
	n := 0
	for _, ks := range generalKeys(m) {
		owner := map[*int32]*compState{}
		for _, q := range []*csQueue{&ks.partial, &ks.completed} {
			for _, e := range q.a {
				c := e.cs
				if cap(c.ver) == 0 {
					continue
				}
				p := unsafe.SliceData(c.ver[:1])
				if o, ok := owner[p]; ok && o != c {
					n++
				}
				owner[p] = c
			}
		}
	}
	return n
}

// CompletedWaiting counts the completed matches m holds back until an
// earlier partial match ends (skip strategies).
func CompletedWaiting(m *Matcher) int {
	n := 0
	for _, ks := range generalKeys(m) {
		n += len(ks.completed.a)
	}
	return n
}

// ShareNodes makes m store an event a step takes at a stage in one node
// shared by the partial matches that take it, as Flink does, even for a
// pattern whose nodes are otherwise made per partial match (OwnPaths).
func ShareNodes(m *Matcher) { m.test.shareNodes = true }

// OwnPaths reports whether p's nodes are made per partial match.
func OwnPaths(p *Pattern) bool { return p.ownPaths }

// StartedPartial is the number of partial matches holding events that key
// keeps in its queue of partial matches (completed ones waiting for a skip
// strategy are not counted): what Matcher.MaxPartialMatches bounds.
func StartedPartial(m *Matcher, key string) int {
	ks := generalKeys(m)[key]
	if ks == nil {
		return 0
	}
	n := 0
	for i := range ks.partial.a {
		if ks.partial.a[i].started() {
			n++
		}
	}
	return n
}

// DisableSeq makes m run every key with the general step, also for a
// pattern of followedByAny stages (SeqPattern).
func DisableSeq(m *Matcher) { m.test.noSeq = true }

// SeqPattern reports whether p's keys run per start event (Pattern.seq).
func SeqPattern(p *Pattern) bool { return p.seq != nil }

// SeqKeys counts m's keys that run per start event.
func SeqKeys(m *Matcher) int {
	n := 0
	for _, ks := range m.keys {
		if ks.seq != nil {
			n++
		}
	}
	return n
}

// generalKeys returns m's keys as the general step holds them (a key
// under Pattern.seq converted, the matcher left as it is).
func generalKeys(m *Matcher) map[string]*keyState {
	out := make(map[string]*keyState, len(m.keys))
	for k, ks := range m.keys {
		if ks.seq != nil {
			ks = m.seqGeneral(ks)
		}
		out[k] = ks
	}
	return out
}

// SetMaxTreeID makes the keys of m under Pattern.seq number their trees
// again from 0 once they reach n (0: the engine's limit). Keys m holds
// already keep their limit: see UnmarshalMatcherWith.
func SetMaxTreeID(m *Matcher, n int32) { m.test.maxTreeID = n }

// UnmarshalMatcherWith is UnmarshalMatcher with knobs set on the matcher
// before it decodes data, so that the keys it decodes take them up.
func UnmarshalMatcherWith(p *Pattern, data []byte, knobs ...func(*Matcher)) (*Matcher, error) {
	m := NewMatcher(p)
	for _, k := range knobs {
		k(m)
	}
	if err := m.unmarshal(data); err != nil {
		return nil, err
	}
	return m, nil
}

// DisableSeqRunner makes every matcher of r run the general step (see
// DisableSeq).
func DisableSeqRunner(r *Runner) {
	for _, m := range r.matchers {
		m.test.noSeq = true
	}
}

// AutomatonSize returns the compiled automaton's states and transitions.
func AutomatonSize(p *Pattern) (states, transitions int) {
	for _, st := range p.states {
		transitions += len(st.trans)
	}
	return len(p.states), transitions
}

// CheckAutomaton applies the automaton limits to an automaton of that size.
func CheckAutomaton(states, transitions int) error {
	sts := make([]*cstate, states)
	for i := range sts {
		sts[i] = &cstate{}
	}
	if states > 0 {
		sts[0].trans = make([]*transition, transitions)
	}
	return checkAutomatonLimits(sts)
}

// RecountStateBytes counts what Matcher.StateBytes should be from the
// state itself: each event reachable from a key's partial or completed
// matches once per key, and each queued event.
func RecountStateBytes(m *Matcher) int64 {
	var n int64
	for _, ks := range generalKeys(m) {
		seen := map[*event]bool{}
		// each node once: partial matches share their history, so the
		// paths through it can be exponentially many (a walk of every
		// path ran for minutes on some random patterns)
		visited := map[*node]bool{}
		var walk func(*node)
		walk = func(nd *node) {
			if nd == nil || visited[nd] {
				return
			}
			visited[nd] = true
			if !seen[nd.ev] {
				seen[nd.ev] = true
				n += int64(len(nd.ev.raw))
			}
			for _, e := range nd.edges {
				if !e.removed {
					walk(e.target)
				}
			}
		}
		for _, q := range []*csQueue{&ks.partial, &ks.completed} {
			for _, e := range q.a {
				walk(e.cs.prev)
			}
		}
		ks.queue.Items(func(_ int64, q queued) { n += int64(len(q.raw)) })
	}
	return n
}
