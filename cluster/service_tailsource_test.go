package cluster

import (
	"errors"
	"slices"
	"testing"

	"github.com/cepcluster/cep/api"
	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/cluster/meta"
)

// A tail of a source reads the source's stream: all of it, or the block
// of key groups a key falls in (keygroup's golden value: "acc-1" is key
// group 101 of 256, in block 101/8 = 12), or an unpartitioned source's
// subjects whatever the key; bad combinations are refused.
func TestTailTargetOfASource(t *testing.T) {
	m := &meta.Meta{KeyGroups: 256, Patterns: map[string]*meta.Pattern{"p": {Name: "p", OutputSubject: "cep.out.p"}}, Sources: map[string]*meta.Source{
		"bank": {Name: "bank", Stream: "CEP_SRC_BANK", Subjects: []string{"bank.*"}},
		"ext":  {Name: "ext", Stream: "EXT", Subjects: []string{"a.>"}, Unpartitioned: true, Filter: []string{"a.x", "a.y"}},
	}}
	for _, tc := range []struct {
		name    string
		req     *cepv1.TailRequest
		stream  string
		filters []string
		err     error
	}{
		{"a whole source", &cepv1.TailRequest{Source: "bank"}, "CEP_SRC_BANK", nil, nil},
		{"one key's block", &cepv1.TailRequest{Source: "bank", SourceKey: "acc-1"}, "CEP_SRC_BANK", []string{"bank.12"}, nil},
		{"an unpartitioned source", &cepv1.TailRequest{Source: "ext", SourceKey: "k"}, "EXT", []string{"a.x", "a.y"}, nil},
		{"a pattern's records", &cepv1.TailRequest{Pattern: "p"}, OutputStream, []string{"cep.out.p"}, nil},
		{"from a time", &cepv1.TailRequest{Source: "bank", Start: cepv1.TailStart_TAIL_START_TIME, StartTimeMs: 5}, "CEP_SRC_BANK", nil, nil},
		{"no time", &cepv1.TailRequest{Source: "bank", Start: cepv1.TailStart_TAIL_START_TIME}, "", nil, api.ErrInvalidArgument},
		{"an unknown source", &cepv1.TailRequest{Source: "nope"}, "", nil, api.ErrNotFound},
		{"a source and a pattern", &cepv1.TailRequest{Source: "bank", Pattern: "p"}, "", nil, api.ErrInvalidArgument},
		{"a source and dead letters", &cepv1.TailRequest{Source: "bank", DeadLetters: true}, "", nil, api.ErrInvalidArgument},
		{"a key without a source", &cepv1.TailRequest{Pattern: "p", SourceKey: "k"}, "", nil, api.ErrInvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stream, filters, _, err := tailTarget(m, tc.req)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("err %v, want %v", err, tc.err)
				}
				return
			}
			if err != nil || stream != tc.stream || !slices.Equal(filters, tc.filters) {
				t.Errorf("got %s %q %v, want %s %q", stream, filters, err, tc.stream, tc.filters)
			}
		})
	}
}
