package shard

import "fmt"

// Op is one operation of a batch: one of the op types of ops_*.go, each
// written, read and applied by its own row of the table below (the way
// cluster/meta's commands are), so that the three stay together per kind.
type Op interface {
	// Kind is the op's kind, its first byte in the log.
	Kind() OpKind
}

// opType is a kind's row of the table: how its ops are written (the
// newest batch version), read (by the batch version of their entry) and
// applied.
type opType struct {
	encode func(b []byte, op Op) []byte
	decode func(d *dec, version byte) Op
	apply  func(s *State, op Op) error
}

var opTypes = map[OpKind]opType{}

// The op table: the fields of each kind are written in the order its
// encode appends them, the order of the log format.
func init() {
	register(EventsOp.appendTo, decodeEventsOp, (*State).applyEventsOp)
	register(WatermarkOp.appendTo, decodeWatermarkOp, (*State).applyWatermarkOp)
	register(TickOp.appendTo, decodeTickOp, (*State).applyTickOp)
	register((*Deploy).appendTo, decodeDeploy, (*State).applyDeploy)
	register(DeleteOp.appendTo, decodeDeleteOp, (*State).applyDeleteOp)
	register(AckOp.appendTo, decodeAckOp, (*State).applyAckOp)
	register(ForwardOp.appendTo, decodeForwardOp, (*State).applyForwardOp)
	register(SkipOp.appendTo, decodeSkipOp, (*State).applySkipOp)
	register(Split.appendTo, decodeSplit, (*State).applySplit)
	register(ClockOp.appendTo, decodeClockOp, (*State).applyClockOp)
	register(ClockModeOp.appendTo, decodeClockModeOp, (*State).applyClockModeOp)
}

// register adds the op type O to the table under O's kind. decode reads
// an op of an entry of the given batch version (its version gates); apply
// returns an error only for an op it refuses (a GapError), which changes
// nothing.
func register[O Op](encode func(op O, b []byte) []byte, decode func(d *dec, version byte) O, apply func(s *State, op O) error) {
	var zero O
	kind := zero.Kind()
	if _, dup := opTypes[kind]; dup {
		panic(fmt.Sprintf("shard: op kind %d registered twice", kind))
	}
	opTypes[kind] = opType{
		encode: func(b []byte, op Op) []byte { return encode(opAs[O](op), b) },
		decode: func(d *dec, version byte) Op { return decode(d, version) },
		apply:  func(s *State, op Op) error { return apply(s, opAs[O](op)) },
	}
}

// opAs is op as the type its kind is registered with.
func opAs[O Op](op Op) O {
	o, ok := op.(O)
	if !ok {
		panic(fmt.Sprintf("shard: op %T of kind %d is not a %T", op, op.Kind(), o))
	}
	return o
}

// opTypeOf is the row of op's kind. Only the types of this package have
// one: another type is a programming error, not an entry to skip.
func opTypeOf(op Op) opType {
	t, ok := opTypes[op.Kind()]
	if !ok {
		panic(fmt.Sprintf("shard: op %T of unknown kind %d", op, op.Kind()))
	}
	return t
}
