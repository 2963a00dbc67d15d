package nfa

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"sort"

	"github.com/cepcluster/cep/internal/varint"
	"github.com/cepcluster/cep/nfa/expr"
	"github.com/cepcluster/cep/watermark"
)

// State encoding.
//
// A Matcher's state encodes to bytes that depend only on the state (keys in
// sorted order, events and nodes by event order, queues in their array
// order), so two matchers that saw the same input encode identically, and a
// decoded matcher continues exactly as the original would. The layout is:
//
//	"CEPM" version(1) automaton-fingerprint(uvarint32) watermark(varint)
//	flags(1: draining) arrivals drainFrom procNow [aligner sourceGenerators...]
//	generator(len-prefixed) keys(uvarint) key*
//
// and each key is:
//
//	key(string) nextOrder(uvarint) preDrain(uvarint) events nodes partial completed queue
//
// where an event is order, time, source position and its JSON bytes.
//
// Reference counts are not stored: they are recomputed from the structure.

// stateVersion 2: edges carry their lock counts. 3: a node is referred to
// by its place in the key's list of nodes (1-based, 0 for none) instead of
// its event and stage, which several nodes share in a pattern whose nodes
// are made per partial match (Pattern.ownPaths). Version 2 is still read.
const stateVersion = 3

// stateVersionSharedNodes is the last version that refers to nodes by
// event and stage.
const stateVersionSharedNodes = 2

// readable reports whether state of encoding version v can be decoded.
func readable(v byte) bool { return v == stateVersion || v == stateVersionSharedNodes }

// StateVersion is the version of the encoding MarshalBinary, AppendHeader
// and AppendKey write (a header's fifth byte). Keys carry none of their
// own: whoever stores keys apart from their header stores it with them
// and restores them with RestoreKeyVersion.
const StateVersion = stateVersion

var stateMagic = []byte("CEPM")

// ErrBadState is returned for state bytes that cannot be decoded.
var ErrBadState = errors.New("nfa: bad state encoding")

// Fingerprint identifies the compiled automaton; state can only be restored
// into a pattern with the same fingerprint.
func (p *Pattern) Fingerprint() uint32 { return crc32.ChecksumIEEE([]byte(p.Describe())) }

// MarshalBinary encodes the matcher's whole state.
func (m *Matcher) MarshalBinary() ([]byte, error) {
	b := m.AppendHeader(nil)
	keys := m.SortedKeys()
	b = binary.AppendUvarint(b, uint64(len(keys)))
	for _, k := range keys {
		b = m.AppendKey(b, k)
	}
	return b, nil
}

// SortedKeys lists the keys that hold state, sorted.
func (m *Matcher) SortedKeys() []string {
	keys := make([]string, 0, len(m.keys))
	for k := range m.keys {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// AppendHeader appends the key-independent part of the state.
func (m *Matcher) AppendHeader(b []byte) []byte {
	b = append(b, stateMagic...)
	b = append(b, stateVersion)
	b = binary.AppendUvarint(b, uint64(m.p.Fingerprint()))
	b = binary.AppendVarint(b, m.wm)
	flags := byte(0)
	if m.noStarts {
		flags |= 1
	}
	b = append(b, flags)
	b = binary.AppendUvarint(b, m.arrivals)
	b = binary.AppendUvarint(b, m.drainFrom)
	b = binary.AppendVarint(b, m.procNow)
	if m.aligner != nil {
		a, _ := m.aligner.MarshalBinary()
		b = appendBytes(b, a)
		for _, s := range m.p.spec.Source {
			g, _ := m.srcGen[s].MarshalBinary()
			b = appendBytes(b, g)
		}
	}
	g, _ := m.gen.MarshalBinary()
	b = appendBytes(b, g)
	return b
}

func appendBytes(b, v []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

func appendDewey(b []byte, d dewey) []byte {
	b = binary.AppendUvarint(b, uint64(len(d)))
	for _, x := range d {
		b = binary.AppendVarint(b, int64(x))
	}
	return b
}

// appendNodeRef appends a reference to n: 1 + its index in the key's
// nodes, 0 for none.
func appendNodeRef(b []byte, n *node, index map[*node]int) []byte {
	if n == nil {
		return append(b, 0)
	}
	return binary.AppendUvarint(b, uint64(index[n])+1)
}

func appendCS(b []byte, c *compState, index map[*node]int) []byte {
	b = binary.AppendUvarint(b, uint64(c.state))
	b = appendNodeRef(b, c.prev, index)
	b = appendDewey(b, c.ver)
	b = binary.AppendVarint(b, c.startTs)
	b = binary.AppendVarint(b, c.prevTs)
	if !c.started {
		return append(b, 0)
	}
	b = append(b, 1)
	return binary.AppendUvarint(b, c.startOrder)
}

// AppendKey appends one key's state (nothing is appended for a key without
// state other than an empty record).
func (m *Matcher) AppendKey(b []byte, key string) []byte {
	ks := m.keys[key]
	if ks == nil {
		ks = newKeyState(m.p, key)
	}
	if ks.seq != nil {
		// encoded as the general step holds it: the same bytes
		ks = m.seqGeneral(ks)
	}
	return m.appendKeyState(b, ks)
}

// appendKeyState appends a key's state held by the general step.
func (m *Matcher) appendKeyState(b []byte, ks *keyState) []byte {
	b = appendBytes(b, []byte(ks.key))
	b = binary.AppendUvarint(b, ks.nextOrder)
	b = binary.AppendUvarint(b, uint64(ks.preDrain))
	evs := ks.bufferedEvents()
	b = binary.AppendUvarint(b, uint64(len(evs)))
	for _, ev := range evs {
		b = binary.AppendUvarint(b, ev.order)
		b = binary.AppendVarint(b, ev.ts)
		b = binary.AppendUvarint(b, ev.pos)
		b = appendBytes(b, rawOf(ev))
	}
	nodes := ks.liveNodes()
	index := make(map[*node]int, len(nodes))
	b = binary.AppendUvarint(b, uint64(len(nodes)))
	for i, n := range nodes {
		index[n] = i
		b = binary.AppendUvarint(b, n.key.order)
		b = binary.AppendUvarint(b, uint64(n.key.stage))
		b = binary.AppendUvarint(b, uint64(len(n.edges)-int(n.removed)))
		for _, e := range n.edges {
			if e.removed {
				continue
			}
			b = appendNodeRef(b, e.target, index)
			b = appendDewey(b, e.ver)
			b = binary.AppendUvarint(b, uint64(max(e.refs, 0)))
		}
	}
	for _, q := range []*csQueue{&ks.partial, &ks.completed} {
		b = binary.AppendUvarint(b, uint64(len(q.a)))
		for i := range q.a {
			b = appendCS(b, q.a[i].cs, index)
		}
	}
	b = binary.AppendUvarint(b, uint64(ks.queue.Len()))
	ks.queue.Items(func(ts int64, q queued) {
		b = binary.AppendVarint(b, ts)
		b = binary.AppendUvarint(b, q.pos)
		b = binary.AppendUvarint(b, q.arr)
		raw := q.raw
		if len(raw) == 0 {
			raw = rawOf(&event{data: q.data})
		}
		b = appendBytes(b, raw)
	})
	return b
}

type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s", ErrBadState, fmt.Sprintf(format, args...))
	}
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := varint.Uvarint(d.b)
	if n <= 0 {
		d.failVarint(n)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := varint.Varint(d.b)
	if n <= 0 {
		d.failVarint(n)
		return 0
	}
	d.b = d.b[n:]
	return v
}

// failVarint reports what the n <= 0 of varint.Uvarint/Varint means.
func (d *decoder) failVarint(n int) {
	if n == 0 {
		d.fail("truncated")
	} else {
		d.fail("varint overflows or is longer than needed")
	}
}

func (d *decoder) byte() byte {
	if d.err != nil {
		return 0
	}
	if len(d.b) == 0 {
		d.fail("truncated")
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *decoder) count(limit int) int {
	n := d.uvarint()
	if n > uint64(limit) || n > uint64(len(d.b)) {
		d.fail("count %d too large", n)
		return 0
	}
	return int(n)
}

func (d *decoder) bytes() []byte {
	n := d.count(len(d.b))
	if d.err != nil {
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) dewey() dewey {
	n := d.count(1 << 16)
	if n == 0 {
		d.fail("empty version")
		return nil
	}
	v := make(dewey, n)
	for i := range v {
		v[i] = int32(d.varint())
	}
	return v
}

// UnmarshalMatcher restores a matcher for p from MarshalBinary's bytes.
func UnmarshalMatcher(p *Pattern, data []byte) (*Matcher, error) {
	m := NewMatcher(p)
	if err := m.unmarshal(data); err != nil {
		return nil, err
	}
	return m, nil
}

// unmarshal decodes data into m, a new matcher (apart from the tests'
// knobs, which the keys it decodes take up).
func (m *Matcher) unmarshal(data []byte) error {
	d := &decoder{b: data}
	if err := m.readHeader(d); err != nil {
		return err
	}
	n := d.count(len(d.b))
	for i := 0; i < n && d.err == nil; i++ {
		m.readKey(d, m.stateVer)
	}
	if d.err == nil && len(d.b) != 0 {
		d.fail("%d trailing bytes", len(d.b))
	}
	return d.err
}

func (m *Matcher) readHeader(d *decoder) error {
	if !bytes.HasPrefix(d.b, stateMagic) {
		return fmt.Errorf("%w: not matcher state", ErrBadState)
	}
	d.b = d.b[len(stateMagic):]
	v := d.byte()
	if !readable(v) && d.err == nil {
		return fmt.Errorf("%w: unknown version %d", ErrBadState, v)
	}
	m.stateVer = v
	if fp := d.uvarint(); d.err == nil && uint32(fp) != m.p.Fingerprint() {
		return fmt.Errorf("%w: state is for a different version of pattern %q", ErrBadState, m.p.Name())
	}
	m.wm = d.varint()
	flags := d.byte()
	if flags&^1 != 0 {
		return fmt.Errorf("%w: unknown flags %#x", ErrBadState, flags)
	}
	m.noStarts = flags&1 != 0
	m.arrivals = d.uvarint()
	m.drainFrom = d.uvarint()
	m.procNow = d.varint()
	if m.aligner != nil {
		if err := m.aligner.UnmarshalBinary(d.bytes()); err != nil && d.err == nil {
			return fmt.Errorf("%w: %v", ErrBadState, err)
		}
		for _, s := range m.p.spec.Source {
			if err := m.srcGen[s].UnmarshalBinary(d.bytes()); err != nil && d.err == nil {
				return fmt.Errorf("%w: %v", ErrBadState, err)
			}
		}
	}
	g := d.bytes()
	if d.err != nil {
		return d.err
	}
	gen := watermark.NewGenerator(m.p.ooo)
	if err := gen.UnmarshalBinary(g); err != nil {
		return fmt.Errorf("%w: %v", ErrBadState, err)
	}
	m.gen = gen
	return nil
}

// UnmarshalHeader returns a matcher for p with the key-independent state
// written by AppendHeader and no keys; RestoreKey adds keys to it.
func UnmarshalHeader(p *Pattern, data []byte) (*Matcher, error) {
	m := NewMatcher(p)
	d := &decoder{b: data}
	if err := m.readHeader(d); err != nil {
		return nil, err
	}
	if d.err == nil && len(d.b) != 0 {
		d.fail("%d trailing bytes", len(d.b))
	}
	if d.err != nil {
		return nil, d.err
	}
	return m, nil
}

// RestoreKey decodes one key's state (as written by AppendKey) into m,
// replacing any state the key had. It returns the bytes that follow it.
// The key is read in the encoding version of the header m was restored
// from (UnmarshalHeader), or the current one.
func (m *Matcher) RestoreKey(data []byte) ([]byte, error) {
	d := &decoder{b: data}
	m.readKey(d, m.stateVer)
	return d.b, d.err
}

// RestoreKeyVersion is RestoreKey for a key written in encoding version
// version (StateVersion, or an earlier one still read), whatever header m
// came from.
func (m *Matcher) RestoreKeyVersion(data []byte, version byte) ([]byte, error) {
	if !readable(version) {
		return data, fmt.Errorf("%w: unknown version %d", ErrBadState, version)
	}
	d := &decoder{b: data}
	m.readKey(d, version)
	return d.b, d.err
}

// readKey decodes one key's state written in encoding version (0: the
// current one).
func (m *Matcher) readKey(d *decoder, version byte) {
	key := string(d.bytes())
	ks := &keyState{key: key, hidx: -1}
	shared := version == stateVersionSharedNodes
	byKey := map[nodeKey]*node{} // shared: the nodes by event and stage
	var nodes []*node            // otherwise in order
	events := map[uint64]*event{}
	ks.nextOrder = d.uvarint()
	ks.preDrain = int(d.uvarint())
	nev := d.count(len(d.b))
	for i := 0; i < nev && d.err == nil; i++ {
		order := d.uvarint()
		ts := d.varint()
		pos := d.uvarint()
		raw := d.bytes()
		if d.err != nil {
			return
		}
		data, err := expr.DecodeEvent(raw)
		if err != nil {
			d.fail("event %d: %v", order, err)
			return
		}
		events[order] = &event{order: order, ts: ts, data: data, raw: append([]byte(nil), raw...), pos: pos}
	}
	ref := func() *node {
		if !shared {
			i := d.uvarint()
			switch {
			case d.err != nil || i == 0:
				return nil
			case i > uint64(len(nodes)):
				d.fail("reference to unknown node")
				return nil
			}
			return nodes[i-1]
		}
		switch d.byte() {
		case 0:
			return nil
		case 1:
		default:
			d.fail("bad node reference")
			return nil
		}
		k := nodeKey{order: d.uvarint(), stage: int32(d.uvarint())}
		if d.err != nil {
			return nil
		}
		n := byKey[k]
		if n == nil {
			d.fail("reference to unknown node")
		}
		return n
	}
	nn := d.count(len(d.b))
	// nodes are written in event order and edges point to earlier events,
	// so a single pass resolves every reference
	for i := 0; i < nn && d.err == nil; i++ {
		k := nodeKey{order: d.uvarint(), stage: int32(d.uvarint())}
		if d.err != nil {
			return
		}
		if int(k.stage) >= len(m.p.stageNames) || k.stage < 0 {
			d.fail("bad stage index")
			return
		}
		ev := events[k.order]
		if ev == nil {
			d.fail("node for unknown event %d", k.order)
			return
		}
		if shared && byKey[k] != nil {
			d.fail("node %d/%d written twice", k.order, k.stage)
			return
		}
		n := ks.newNode(k, ev)
		ne := d.count(len(d.b))
		for j := 0; j < ne && d.err == nil; j++ {
			t := ref()
			v := d.dewey()
			locks := d.uvarint()
			if locks > 1<<30 {
				d.fail("bad edge lock count")
			}
			n.addEdge(edge{target: t, ver: v, refs: int32(locks)})
			n.unlocked = n.unlocked || locks == 0
			if t != nil {
				t.refs++
			}
		}
		if shared {
			byKey[k] = n
		}
		nodes = append(nodes, n)
	}
	for _, q := range []*csQueue{&ks.partial, &ks.completed} {
		nc := d.count(len(d.b))
		for i := 0; i < nc && d.err == nil; i++ {
			c := &compState{}
			st := d.uvarint()
			if st >= uint64(len(m.p.states)) {
				d.fail("bad state index")
				return
			}
			c.state = int32(st)
			c.prev = ref()
			if c.prev != nil {
				c.prev.refs++
			}
			c.ver = d.dewey()
			c.startTs = d.varint()
			c.prevTs = d.varint()
			switch d.byte() {
			case 0:
			case 1:
				c.startOrder, c.started = d.uvarint(), true
			default:
				d.fail("bad start event")
			}
			q.a = append(q.a, entOf(c))
		}
		q.checkSorted()
	}
	nq := d.count(len(d.b))
	for i := 0; i < nq && d.err == nil; i++ {
		ts := d.varint()
		pos := d.uvarint()
		arr := d.uvarint()
		raw := d.bytes()
		if d.err != nil {
			return
		}
		data, err := expr.DecodeEvent(raw)
		if err != nil {
			d.fail("queued event: %v", err)
			return
		}
		ks.queue.Push(ts, queued{ts: ts, data: data, raw: append([]byte(nil), raw...), pos: pos, arr: arr})
	}
	if d.err != nil {
		return
	}
	for _, e := range events {
		if e.refs == 0 {
			d.fail("event %d is not referenced", e.order)
			return
		}
	}
	if live := len(ks.liveNodes()); live != ks.nNodes {
		d.fail("%d of %d nodes are not reachable from a partial match", ks.nNodes-live, ks.nNodes)
		return
	}
	m.adopt(ks)
	if m.seqOn() {
		m.seqFromGeneral(ks)
	}
	m.recomputeDeadline(ks)
	m.reschedule(ks)
}
