package shard

import (
	"encoding/binary"
	"sort"
)

// AckOp: the outbox records up to Seq are published, and leave the
// outbox.
type AckOp struct {
	Seq uint64 // an outbox record's Seq (OutRecord.Seq)
}

// SkipOp: the events of Source up to stream position Seq are not read —
// published before a pattern that starts reading the source was deployed
// (Seq 0: none is, the pattern reads the stream from its start). Batch
// version 3 on. State.skip says how positions move.
type SkipOp struct {
	// Source is the source whose events are skipped.
	Source string
	// Target, when set, is a derived source of Source: Seq is then the
	// position up to which Source counts as forwarded into Target, and the
	// shard's own positions do not move. Empty: every key group's position
	// of Source becomes Seq.
	Target string
	Seq    uint64
}

// Split (an op of kind OpSplit): the shard hands key groups [At, last] to
// a new shard (State.split): every replica makes the new shard's first
// state from its own at this point of the log (State.TakeSplitOff).
type Split struct {
	// At is the first key group handed over; outside (first, last] the
	// op changes nothing.
	At int
	// Shard is the new shard's id.
	Shard uint64
	// Members are the members the new shard starts with: this shard's
	// voters when it was proposed, as "id=raftaddr", sorted.
	Members []string
}

func (AckOp) Kind() OpKind  { return OpAck }
func (SkipOp) Kind() OpKind { return OpSkip }
func (Split) Kind() OpKind  { return OpSplit }

func (op AckOp) appendTo(b []byte) []byte { return binary.AppendUvarint(b, op.Seq) }

func decodeAckOp(d *dec, _ byte) AckOp { return AckOp{Seq: d.uvarint()} }

func (op SkipOp) appendTo(b []byte) []byte {
	b = appendString(b, op.Source)
	b = appendString(b, op.Target)
	return binary.AppendUvarint(b, op.Seq)
}

func decodeSkipOp(d *dec, _ byte) SkipOp {
	return SkipOp{Source: d.string(), Target: d.string(), Seq: d.uvarint()}
}

func (sp Split) appendTo(b []byte) []byte {
	b = binary.AppendUvarint(b, uint64(sp.At))
	b = binary.AppendUvarint(b, sp.Shard)
	b = binary.AppendUvarint(b, uint64(len(sp.Members)))
	for _, m := range sp.Members {
		b = appendString(b, m)
	}
	return b
}

func decodeSplit(d *dec, _ byte) Split {
	sp := Split{At: int(d.uvarint()), Shard: d.uvarint()}
	n := d.count()
	for j := 0; j < n && d.err == nil; j++ {
		sp.Members = append(sp.Members, d.string())
	}
	return sp
}

func (s *State) applyAckOp(op AckOp) error {
	n := sort.Search(len(s.outbox), func(i int) bool { return s.outbox[i].Seq > op.Seq })
	s.outbox = append(s.outbox[:0], s.outbox[n:]...)
	return nil
}

func (s *State) applySkipOp(op SkipOp) error {
	s.skip(op.Source, op.Target, op.Seq)
	return nil
}

func (s *State) applySplit(sp Split) error {
	s.split(sp)
	return nil
}
