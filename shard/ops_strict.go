package shard

import (
	"encoding/binary"
	"fmt"
	"sort"

	"github.com/cepcluster/cep/internal/schema"
	"github.com/cepcluster/cep/snapshot"
)

// OpStrict is StrictOp's kind: 13, as the golden log holds an entry of
// kind 12 for the one every release refused. (A release before it cannot
// decode an entry that holds one: it is logged only for a source created
// strict.)
const OpStrict OpKind = 13

// StrictOp says which fields the events of Source (as patterns name it)
// must fit: an event read from it directly, or re-keyed from it into a
// derived source, that does not fit Fields is dead-lettered with the
// reason, and no pattern sees it. Empty Fields: the source is not strict
// (any more). The shard leader logs one before each deployment reading a
// strict source, so the check depends only on the log.
type StrictOp struct {
	Source string
	Fields schema.Schema
}

func (StrictOp) Kind() OpKind { return OpStrict }

func init() { register(StrictOp.appendTo, decodeStrictOp, (*State).applyStrictOp) }

func (op StrictOp) appendTo(b []byte) []byte {
	b = appendString(b, op.Source)
	return appendFields(b, op.Fields)
}

func appendFields(b []byte, fs schema.Schema) []byte {
	b = binary.AppendUvarint(b, uint64(len(fs)))
	for _, f := range fs {
		b = appendString(b, f.Path)
		b = appendString(b, f.Type)
		b = append(b, boolByte(f.Optional))
	}
	return b
}

func decodeFields(d *dec) schema.Schema {
	var fs schema.Schema
	n := d.count()
	for i := 0; i < n && d.err == nil; i++ {
		fs = append(fs, schema.Field{Path: d.string(), Type: d.string(), Optional: d.byte() != 0})
	}
	return fs
}

func decodeStrictOp(d *dec, _ byte) StrictOp {
	return StrictOp{Source: d.string(), Fields: decodeFields(d)}
}

func (s *State) applyStrictOp(op StrictOp) error {
	if len(op.Fields) == 0 {
		delete(s.strict, op.Source)
		return nil
	}
	if s.strict == nil {
		s.strict = map[string]schema.Schema{}
	}
	s.strict[op.Source] = op.Fields
	return nil
}

// Strict returns the fields the events of source must fit, nil when it is
// not strict here.
func (s *State) Strict(source string) schema.Schema { return s.strict[source] }

// strictReason is the reason of the dead letter of an event of a strict
// source that does not fit its fields.
func strictReason(source string, err error) string {
	return "source " + source + " is strict: " + err.Error()
}

// strictSection is the named snapshot section of the strict sources,
// written only when there are any, so a shard without them writes the
// snapshots it wrote before.
const (
	strictSection        = "strict-sources"
	strictSectionVersion = 1
)

func (s *State) writeStrict(sw *snapshot.Writer) error {
	if len(s.strict) == 0 {
		return nil
	}
	names := make([]string, 0, len(s.strict))
	for name := range s.strict {
		names = append(names, name)
	}
	sort.Strings(names)
	b := []byte{strictSectionVersion}
	b = binary.AppendUvarint(b, uint64(len(names)))
	for _, name := range names {
		b = appendString(b, name)
		b = appendFields(b, s.strict[name])
	}
	return sw.Named(strictSection, b)
}

// restoreStrict reads the strict sources of a snapshot, if it has them.
func (s *State) restoreStrict(r *snapshot.Reader) error {
	sec, err := r.Named(strictSection)
	if err != nil || sec == nil {
		return err
	}
	d := &dec{b: sec}
	if v := d.byte(); d.err == nil && v != strictSectionVersion {
		return fmt.Errorf("%w: %s section version %d", ErrBadBatch, strictSection, v)
	}
	n := d.count()
	for i := 0; i < n && d.err == nil; i++ {
		name, fs := d.string(), decodeFields(d)
		if d.err == nil {
			s.applyStrictOp(StrictOp{Source: name, Fields: fs})
		}
	}
	return d.err
}
