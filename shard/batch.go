package shard

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cepcluster/cep/internal/varint"
)

// A Batch is the payload of one Raft log entry: everything the shard leader
// proposes (events read from the sources with their positions, events
// forwarded into derived sources, the sources' clocks, processing-time
// ticks, pattern changes, outbox truncations, splits) in the order the
// state machine must apply it. A batch carries many events, never
// just one: one entry per event would cap throughput at the Raft commit rate.
type Batch struct {
	Ops []Op
}

// OpKind tells what an Op does: its first byte in the log.
type OpKind uint8

// Op kinds, each the Kind of one op type (ops_*.go). Values are part of
// the log format: never renumber.
const (
	OpEvents    OpKind = 1  // EventsOp
	OpWatermark OpKind = 2  // WatermarkOp
	OpTick      OpKind = 3  // TickOp
	OpDeploy    OpKind = 4  // *Deploy
	OpDelete    OpKind = 5  // DeleteOp
	OpAck       OpKind = 6  // AckOp
	OpForward   OpKind = 7  // ForwardOp (batch version 3 on)
	OpSkip      OpKind = 8  // SkipOp (batch version 3 on)
	OpSplit     OpKind = 9  // Split
	OpClock     OpKind = 10 // ClockOp (batch version 6 on)
	OpClockMode OpKind = 11 // ClockModeOp (batch version 6 on)
)

// batchVersion 9: deployments carry the bound on bytes held (8, still
// read: entries of events carry their ingest time; 7, still
// read: entries of events carry the position their reader read after; 6,
// still read: OpClock and OpClockMode exist and deployments say whether
// they run on the clock; 5, still read: deployments carry the
// bound on keys; 4, still read: deployments carry the bound on partial
// matches and the record types published; 3, still read: deployments
// carry the sources read, events their origin position, OpForward and
// OpSkip exist; 2: events carry their block; 1 carried a key group).
const batchVersion = 9

// ErrBadBatch is returned for a log entry that cannot be decoded.
var ErrBadBatch = errors.New("shard: bad batch encoding")

// Encode appends the batch's binary form to b: the newest batch
// version, then each op's kind and fields.
func (bt *Batch) Encode(b []byte) []byte {
	b = append(b, batchVersion)
	b = binary.AppendUvarint(b, uint64(len(bt.Ops)))
	for _, op := range bt.Ops {
		b = append(b, byte(op.Kind()))
		b = opTypeOf(op).encode(b, op)
	}
	return b
}

// DecodeBatch decodes a log entry of any batch version from 3 on; each
// op's type reads the fields its entry's version carries.
func DecodeBatch(data []byte) (*Batch, error) {
	d := &dec{b: data}
	version := d.byte()
	if version < 3 || version > batchVersion {
		return nil, fmt.Errorf("%w: version %d", ErrBadBatch, version)
	}
	n := d.count()
	bt := &Batch{Ops: make([]Op, 0, n)}
	for i := 0; i < n && d.err == nil; i++ {
		kind := OpKind(d.byte())
		t, ok := opTypes[kind]
		if !ok {
			if d.err == nil {
				d.err = fmt.Errorf("%w: unknown op %d", ErrBadBatch, kind)
			}
			break
		}
		bt.Ops = append(bt.Ops, t.decode(d, version))
	}
	if d.err == nil && len(d.b) > 0 {
		d.err = fmt.Errorf("%w: %d trailing bytes", ErrBadBatch, len(d.b))
	}
	if d.err != nil {
		return nil, d.err
	}
	return bt, nil
}

func boolByte(v bool) byte {
	if v {
		return 1
	}
	return 0
}

func appendBytes(b, v []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

type dec struct {
	b   []byte
	err error
}

func (d *dec) fail() {
	if d.err == nil {
		d.err = fmt.Errorf("%w: truncated", ErrBadBatch)
	}
}

func (d *dec) byte() byte {
	if d.err != nil || len(d.b) == 0 {
		d.fail()
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *dec) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := varint.Uvarint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *dec) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := varint.Varint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *dec) count() int {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.fail()
		return 0
	}
	return int(n)
}

func (d *dec) bytes() []byte {
	n := d.count()
	if d.err != nil {
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *dec) string() string { return string(d.bytes()) }

// clockFlag reads a flag byte: 0 or 1, anything else is an error.
func (d *dec) clockFlag() bool {
	switch d.byte() {
	case 0:
	case 1:
		return true
	default:
		if d.err == nil {
			d.err = fmt.Errorf("%w: bad clock flag", ErrBadBatch)
		}
	}
	return false
}
