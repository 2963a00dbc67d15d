package shard

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/cepcluster/cep/keygroup"
)

// bigEv is an event of about size bytes (a padding field).
func bigEv(pos uint64, k, t string, ts int64, size int) Event {
	return Event{Pos: pos, Block: keygroup.BlockOf(keygroup.OfKey(k, 16), 16),
		Data: fmt.Appendf(nil, `{"k":%q,"t":%q,"ts":%d,"pad":%q}`, k, t, ts, strings.Repeat("x", size))}
}

// A pattern's state is bounded in bytes, not only in keys: of 40 events
// of ~1 MB — on distinct keys, or on one key whose window is open — the
// state grows to the deployment's MaxStateBytes and no further, every
// event past it is dead-lettered naming the bound, and the count is
// reported. The bound survives a restore from a snapshot (the replicas
// agree byte for byte), and once the watermark frees the state, events
// are taken again.
func TestMaxStateBytesBound(t *testing.T) {
	const size, n = 1_000_000, 40
	const bound = 10 * size
	for _, oneKey := range []bool{false, true} {
		t.Run(fmt.Sprintf("oneKey=%v", oneKey), func(t *testing.T) {
			d := deployOp(abSpec, 1, PolicyReset)
			d.MaxStateBytes = bound
			a, b := NewState(0, 15, 16), NewState(0, 15, 16)
			a.Apply(&Batch{Ops: []Op{d}})
			b.Apply(&Batch{Ops: []Op{d}})
			var evSize int64
			for i := range n {
				k := fmt.Sprintf("k%02d", i)
				if oneKey {
					k = "kk"
				}
				e := bigEv(uint64(i+1), k, "A", int64(10+i), size)
				evSize = int64(len(e.Data))
				bt := &Batch{Ops: []Op{eventsOp(e)}}
				a.Apply(bt)
				b.Apply(bt)
				if got := a.Patterns()[0].StateBytes; got > bound {
					t.Fatalf("after event %d: %d bytes held, over the bound %d", i+1, got, bound)
				}
			}
			taken := bound / evSize
			info := a.Patterns()[0]
			if info.StateBytes != taken*evSize || info.MaxStateBytes != bound || info.StateBytesRefused != uint64(n-taken) {
				t.Fatalf("after %d events of %d bytes: %+v; want %d taken", n, evSize, info, taken)
			}
			reasons := deadLetterReasons(a)
			if int64(len(reasons)) != n-taken || !strings.Contains(reasons[0], fmt.Sprintf("maxStateBytes = %d", bound)) || !strings.Contains(reasons[0], "docs/limits.md") {
				t.Fatalf("%d dead letters, want %d: %.300q", len(reasons), n-taken, reasons)
			}
			sa := snap(t, a, "s")
			if !bytes.Equal(sa, snap(t, b, "s")) {
				t.Fatal("replicas' snapshots differ")
			}
			r := restore(t, 0, 15, sa)
			if got := r.Patterns()[0]; got.StateBytes != info.StateBytes || got.MaxStateBytes != bound {
				t.Fatalf("restored: %d bytes held, bound %d; want %d, %d", got.StateBytes, got.MaxStateBytes, info.StateBytes, bound)
			}
			// one more is refused on the restored replica too; past the
			// window every partial match times out, the state is freed and
			// an event is taken again
			more := []*Batch{
				{Ops: []Op{eventsOp(bigEv(n+1, "zz", "A", 60, size))}},
				{Ops: []Op{WatermarkOp{Pattern: "ab", Time: 500}}},
				{Ops: []Op{eventsOp(bigEv(n+2, "zz", "A", 600, size))}},
			}
			for _, bt := range more {
				a.Apply(bt)
				r.Apply(bt)
			}
			for _, s := range []*State{a, r} {
				if got := s.Patterns()[0]; got.StateBytes != int64(len(more[2].Ops[0].(EventsOp).Events[0].Data)) {
					t.Fatalf("after the watermark freed the state: %d bytes held, want the last event's %d", got.StateBytes, len(more[2].Ops[0].(EventsOp).Events[0].Data))
				}
			}
			if !bytes.Equal(snap(t, a, "t"), snap(t, r, "t")) {
				t.Fatal("the restored replica's state differs")
			}
			if got := len(deadLetterReasons(r)); int64(got) != n-taken+1 {
				t.Fatalf("restored replica: %d dead letters, want %d", got, n-taken+1)
			}
		})
	}
}

// Without MaxStateBytes a deployment gets DefaultMaxStateBytes; negative
// sets none; the bound travels in the deployment's log entry.
func TestMaxStateBytesDefault(t *testing.T) {
	for _, c := range []struct{ set, want int64 }{{0, DefaultMaxStateBytes}, {-1, 0}, {7, 7}} {
		d := deployOp(abSpec, 1, PolicyReset)
		d.MaxStateBytes = c.set
		bt := (&Batch{Ops: []Op{d}}).Encode(nil)
		dec, err := DecodeBatch(bt)
		if err != nil {
			t.Fatal(err)
		}
		s := NewState(0, 15, 16)
		s.Apply(dec)
		if got := s.Patterns()[0].MaxStateBytes; got != c.want {
			t.Errorf("MaxStateBytes %d: bound %d, want %d", c.set, got, c.want)
		}
	}
}
