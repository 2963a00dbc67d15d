package snapshot_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/cepcluster/cep/snapshot"
)

// A source's stream identity survives writing and reading, and a file
// written before identities were recorded reads back as "not known".
func TestStreamIdentityRoundTrip(t *testing.T) {
	h := testHeader()
	h.Sources[0].StreamCreated = 1_764_000_000_123_456_789
	r := open(t, build(t, h, roundTripSections()))
	if got := r.Header().Sources[0].StreamCreated; got != h.Sources[0].StreamCreated {
		t.Fatalf("streamCreated read back as %d, written %d", got, h.Sources[0].StreamCreated)
	}

	// the bytes of an older writer: the same header without the field
	old := testHeader()
	data := build(t, old, roundTripSections())
	if bytes.Contains(data, []byte("streamCreated")) {
		t.Fatal("a source without a creation time writes the field")
	}
	if got := open(t, data).Header().Sources[0].StreamCreated; got != 0 {
		t.Fatalf("a file without the field reads streamCreated %d, want 0 (not known)", got)
	}
}

func TestStreamIdentityNegativeRefused(t *testing.T) {
	h := testHeader()
	h.Sources[0].StreamCreated = -1
	_, err := snapshot.NewWriter(&bytes.Buffer{}, h)
	var he *snapshot.HeaderError
	if !errors.As(err, &he) || !strings.Contains(he.Field, "streamCreated") {
		t.Fatalf("NewWriter error %v, want a *HeaderError on streamCreated", err)
	}
}

// SameStream against a naive reading of the rule: another name is
// another stream; with both creation times, equal times are the same
// stream; with one missing, only the names are known to agree.
func TestSameStream(t *testing.T) {
	names := []string{"A", "B"}
	times := []int64{0, 1, 2}
	for _, sn := range names {
		for _, st := range times {
			for _, cn := range names {
				for _, ct := range times {
					same, known := snapshot.SameStream(sn, st, cn, ct)
					wantKnown := sn != cn || (st != 0 && ct != 0)
					wantSame := sn == cn && (st == 0 || ct == 0 || st == ct)
					if same != wantSame || known != wantKnown {
						t.Errorf("SameStream(%s,%d,%s,%d) = %v,%v; want %v,%v", sn, st, cn, ct, same, known, wantSame, wantKnown)
					}
				}
			}
		}
	}
	if got := snapshot.StreamIdentity("BANK", 0); !strings.Contains(got, "not recorded") {
		t.Errorf("StreamIdentity without a time = %q", got)
	}
	if got := snapshot.StreamIdentity("BANK", 1_764_000_000_000_000_000); got != "BANK created 2025-11-24T16:00:00Z" {
		t.Errorf("StreamIdentity = %q", got)
	}
}
