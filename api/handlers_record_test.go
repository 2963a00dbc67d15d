package api

import (
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
)

// Filling Record for reflection clients keeps every other field of the
// record, whatever fields it has: a copy field by field dropped
// stored_at_ms, added after it was written.
func TestWithRecordKeepsEveryField(t *testing.T) {
	r := &cepv1.Record{Json: []byte(`{"type":"match","n":1}`)}
	m := r.ProtoReflect()
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		switch fd.Kind() {
		case protoreflect.StringKind:
			m.Set(fd, protoreflect.ValueOfString("x-"+string(fd.Name())))
		case protoreflect.Int64Kind:
			m.Set(fd, protoreflect.ValueOfInt64(int64(100+i)))
		case protoreflect.Uint64Kind:
			m.Set(fd, protoreflect.ValueOfUint64(uint64(100+i)))
		case protoreflect.Int32Kind:
			m.Set(fd, protoreflect.ValueOfInt32(int32(100+i)))
		case protoreflect.Uint32Kind:
			m.Set(fd, protoreflect.ValueOfUint32(uint32(100+i)))
		case protoreflect.BoolKind:
			m.Set(fd, protoreflect.ValueOfBool(true))
		}
	}
	got := withRecord(r)
	if got.GetRecord() == nil || got.GetRecord().GetFields()["n"].GetNumberValue() != 1 {
		t.Fatalf("record not filled: %v", got)
	}
	got.Record = nil
	if !proto.Equal(got, r) {
		t.Errorf("withRecord changed the record:\n got %v\nwant %v", got, r)
	}
}
