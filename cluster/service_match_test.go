package cluster

import (
	"errors"
	"strings"
	"testing"

	"github.com/cepcluster/cep/api"
	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
)

func TestTailBufferBounds(t *testing.T) {
	rec := func(n int) *cepv1.Record { return &cepv1.Record{Json: []byte(strings.Repeat("x", n))} }
	b := newTailBuffer(3, 100)
	if !b.put(rec(200)) {
		t.Fatal("a record larger than the buffer is refused while it is empty")
	}
	if b.put(rec(1)) {
		t.Fatal("a record past the byte bound is taken")
	}
	if r, _ := b.take(); len(r.Json) != 200 {
		t.Fatalf("took %d bytes", len(r.Json))
	}
	for i := range 3 {
		if !b.put(rec(10)) {
			t.Fatalf("record %d of 3 refused", i)
		}
	}
	if b.put(rec(10)) {
		t.Fatal("a record past the record bound is taken")
	}
	b.close(errors.New("end"))
	for i := range 3 {
		if r, err := b.take(); r == nil {
			t.Fatalf("record %d lost at close: %v", i, err)
		}
	}
	if r, err := b.take(); r != nil || err == nil || err.Error() != "end" {
		t.Fatalf("after the records: %v, %v", r, err)
	}
	// a slow consumer's records are dropped
	b = newTailBuffer(3, 100)
	b.put(rec(1))
	b.close(errSlowConsumer)
	if r, err := b.take(); r != nil || !errors.Is(err, errSlowConsumer) {
		t.Fatalf("slow consumer: %v, %v", r, err)
	}
}

func TestTailLimits(t *testing.T) {
	l := newTailLimits(3, 2)
	ra, err := l.acquire("a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.acquire("a"); err != nil {
		t.Fatal(err)
	}
	if _, err := l.acquire("a"); !errors.Is(err, api.ErrResourceExhausted) || !strings.Contains(err.Error(), "per caller") {
		t.Fatalf("third of a: %v", err)
	}
	if _, err := l.acquire("b"); err != nil {
		t.Fatal(err)
	}
	if _, err := l.acquire("c"); !errors.Is(err, api.ErrResourceExhausted) || !strings.Contains(err.Error(), "per node") {
		t.Fatalf("fourth on the node: %v", err)
	}
	ra()
	ra() // once only
	if _, err := l.acquire("c"); err != nil {
		t.Fatalf("after a release: %v", err)
	}
	if _, err := l.acquire("d"); err == nil {
		t.Fatal("a second release freed a second place")
	}
}
