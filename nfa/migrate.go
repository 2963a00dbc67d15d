package nfa

import "slices"

// Migrate moves a matcher's state to a new version of its pattern: partial
// matches are kept where they still fit — their automaton state exists in the
// new version under the same name, and every stage they hold events for still
// exists — and dropped otherwise. Kept partial matches continue under the new
// version's conditions and windows. Events waiting for the watermark and the
// watermark itself carry over. It returns the new matcher and the number of
// partial matches dropped. The old matcher is not modified.
func Migrate(old *Matcher, p *Pattern) (*Matcher, int) {
	cfg := DefaultConfig()
	cfg.AutoWatermark, cfg.Clocked = old.cfg.AutoWatermark, old.cfg.Clocked
	nm := NewMatcherWith(p, cfg)
	nm.wm = old.wm
	nm.arrivals, nm.noStarts, nm.drainFrom, nm.procNow = old.arrivals, old.noStarts, old.drainFrom, old.procNow
	if old.aligner != nil && nm.aligner != nil && len(old.srcGen) == len(nm.srcGen) {
		if a, err := old.aligner.MarshalBinary(); err == nil {
			_ = nm.aligner.UnmarshalBinary(a)
		}
		for s, g := range old.srcGen {
			if ng := nm.srcGen[s]; ng != nil {
				if b, err := g.MarshalBinary(); err == nil {
					_ = ng.UnmarshalBinary(b)
				}
			}
		}
	}
	if g, err := old.gen.MarshalBinary(); err == nil {
		_ = nm.gen.UnmarshalBinary(g)
	}
	stateIdx := map[string]int32{}
	for _, s := range p.states {
		stateIdx[s.name] = int32(s.id)
	}
	stateMap := make([]int32, len(old.p.states))
	for i, s := range old.p.states {
		stateMap[i] = -1
		if j, ok := stateIdx[s.name]; ok && p.states[j].typ == s.typ && p.states[j].start == s.start {
			stateMap[i] = j
		}
	}
	stageIdx := map[string]int32{}
	for i, n := range p.stageNames {
		stageIdx[n] = int32(i)
	}
	stageMap := make([]int32, len(old.p.stageNames))
	for i, n := range old.p.stageNames {
		stageMap[i] = -1
		if j, ok := stageIdx[n]; ok {
			stageMap[i] = j
		}
	}
	dropped := 0
	for _, key := range old.SortedKeys() {
		oks := old.keys[key]
		if oks.seq != nil {
			oks = old.seqGeneral(oks)
		}
		ks := &keyState{key: key, nextOrder: oks.nextOrder, preDrain: oks.preDrain, hidx: -1}
		// a node is usable when its stage and all its predecessors' are
		usable := map[*node]bool{}
		var ok func(n *node) bool
		ok = func(n *node) bool {
			if n == nil {
				return true
			}
			if v, seen := usable[n]; seen {
				return v
			}
			usable[n] = false // cycles cannot occur; guards recursion
			v := stageMap[n.key.stage] >= 0
			for _, e := range n.edges {
				v = v && (e.removed || ok(e.target))
			}
			usable[n] = v
			return v
		}
		clones := map[*node]*node{}
		events := map[uint64]*event{}
		var clone func(n *node) *node
		clone = func(n *node) *node {
			if n == nil {
				return nil
			}
			if c := clones[n]; c != nil {
				return c
			}
			ev := events[n.ev.order]
			if ev == nil {
				e := *n.ev
				e.refs = 0
				ev = &e
				events[ev.order] = ev
			}
			c := ks.newNode(nodeKey{order: n.key.order, stage: stageMap[n.key.stage]}, ev)
			clones[n] = c
			for _, e := range n.edges {
				if e.removed {
					continue
				}
				c.addEdge(edge{target: clone(e.target), ver: e.ver})
				c.unlocked = true
			}
			return c
		}
		migrateQueue := func(src *csQueue, dst *csQueue) {
			for _, e := range src.a {
				c := e.cs
				st := stateMap[c.state]
				if st < 0 || !ok(c.prev) {
					if c.started {
						dropped++
					}
					continue
				}
				nc := *c
				nc.state = st
				nc.walked, nc.evs = false, nil // cached by the old pattern's stage numbers
				nc.ver = slices.Clone(c.ver)   // processing may change it in place
				nc.prev = clone(c.prev)
				dst.a = append(dst.a, entOf(&nc))
			}
			for k := (len(dst.a) >> 1) - 1; k >= 0; k-- {
				dst.siftDown(k, dst.a[k])
			}
			dst.checkSorted()
		}
		migrateQueue(&oks.partial, &ks.partial)
		migrateQueue(&oks.completed, &ks.completed)
		hasStart := false
		for _, c := range ks.partial.a {
			if p.states[c.state].start {
				hasStart = true
			}
		}
		if !hasStart && !nm.noStarts {
			for _, c := range p.freshStarts {
				ks.partial.offer(c)
			}
		}
		oks.queue.Items(func(ts int64, q queued) { ks.queue.Push(ts, q) })
		ks.deriveLocks()
		nm.adopt(ks)
		nm.recomputeDeadline(ks)
		nm.reschedule(ks)
	}
	return nm, dropped
}
