package cluster

import (
	"errors"
	"strings"
	"testing"

	"github.com/cepcluster/cep/api"
	cepv1 "github.com/cepcluster/cep/api/gen/cep/v1"
	"github.com/cepcluster/cep/cluster/meta"
	"github.com/cepcluster/cep/keygroup"
)

// Names and subjects from a request that would make a subject longer than
// NATS takes are refused as InvalidArgument naming the field and the
// bound, before any NATS call; ones at the bound are taken.
func TestRequestSubjectsBounded(t *testing.T) {
	long := "cep.out." + strings.Repeat("s", 5000)
	tok := strings.Repeat("t", keygroup.MaxTokenBytes)
	for _, tc := range []struct {
		what string
		err  error
		want string // "" for none
	}{
		{"output subject of 5,000 bytes", checkOutputSubject(long), "field output_subject: "},
		{"output subject with a long token", checkOutputSubject("cep.out." + tok + "x"), "MaxTokenBytes = 255"},
		{"output subject at the bound", checkOutputSubject("cep.out." + tok + "." + tok), ""},
		{"source subject of 5,000 bytes", checkSource(&meta.Source{Name: "s", Subjects: []string{"orders." + strings.Repeat("o", 5000)}}), "field subjects: "},
		{"source filter with a long token", checkSource(&meta.Source{Name: "s", Stream: "S", Subjects: []string{"a.>"}, Filter: []string{"a." + tok + "x"}}), "MaxTokenBytes = 255"},
		{"source name of 5,000 bytes", checkSource(&meta.Source{Name: strings.Repeat("n", 5000)}), "at most 64"},
		{"dead-letter source of 5,000 bytes", tailErr(&cepv1.TailRequest{DeadLetters: true, DeadLetterSource: strings.Repeat("d", 5000)}), "field dead_letter_source: "},
		{"dead-letter source at the bound", tailErr(&cepv1.TailRequest{DeadLetters: true, DeadLetterSource: "output." + tok}), ""},
	} {
		switch {
		case tc.want == "" && tc.err != nil:
			t.Errorf("%s: refused: %v", tc.what, tc.err)
		case tc.want != "" && (!errors.Is(tc.err, api.ErrInvalidArgument) || !strings.Contains(tc.err.Error(), tc.want)):
			t.Errorf("%s: err = %v, want InvalidArgument naming %q", tc.what, tc.err, tc.want)
		case tc.want != "" && !strings.Contains(tc.err.Error(), "at most 64") && !strings.Contains(tc.err.Error(), "see docs/limits.md"):
			t.Errorf("%s: the error names no bound: %v", tc.what, tc.err)
		case tc.err != nil && len(tc.err.Error()) > 400:
			t.Errorf("%s: an error of %d bytes repeats the input", tc.what, len(tc.err.Error()))
		}
	}
}

func tailErr(r *cepv1.TailRequest) error {
	_, _, err := tailSubject(meta.New(), r)
	return err
}

// A source whose subjects overlap the node's own (the inboxes its
// JetStream answers come on, the cluster's output, dead-letter and clock
// subjects, the server's $ subjects) is refused, whether it names them or
// its default subjects "<name>.*" fall there.
func TestSourceSubjectsOffTheNodesOwn(t *testing.T) {
	for _, s := range []*meta.Source{
		{Name: "s", Subjects: []string{"_CEP_NODE_INBOX.>"}},
		{Name: "s", Subjects: []string{"_CEP_NODE_INBOX.*.*"}},
		{Name: "s", Subjects: []string{"_INBOX.x.*"}},
		{Name: "s", Subjects: []string{"cep.clock.>"}},
		{Name: "s", Subjects: []string{"cep.*.x"}},
		{Name: "s", Subjects: []string{"cep.deadletter.orders"}},
		{Name: "s", Subjects: []string{"$JS.API.>"}},
		{Name: "s", Subjects: []string{"*.orders"}},
		{Name: "s", Subjects: []string{">"}},
		{Name: "_INBOX"},
		{Name: "_CEP_NODE_INBOX"},
		{Name: "cep"},
	} {
		if err := checkSource(s); !errors.Is(err, api.ErrInvalidArgument) {
			t.Errorf("source %q on %v: err = %v, want InvalidArgument", s.Name, s.Subjects, err)
		}
	}
	for _, s := range []*meta.Source{
		{Name: "orders"},
		{Name: "s", Subjects: []string{"shop.orders.eu.>"}},
		{Name: "s", Subjects: []string{"cepx.>", "inbox.>", "_INBOXES.a"}},
		{Name: "s", Subjects: []string{"cep"}},
	} {
		if err := checkSource(s); err != nil {
			t.Errorf("source %q on %v refused: %v", s.Name, s.Subjects, err)
		}
	}
}

func TestSubjectsOverlap(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"a.b", "a.b", true},
		{"a.b", "a.c", false},
		{"a.*", "a.>", true},
		{"a", "a.>", false},
		{"a.b.c", "a.>", true},
		{"*.b", "a.*", true},
		{"a.*.c", "a.b", false},
		{">", "x.y", true},
		{"a.b.>", "a.*.c", true},
		{"a.b.c.d", "a.*.c", false},
	} {
		if got := subjectsOverlap(tc.a, tc.b); got != tc.want {
			t.Errorf("subjectsOverlap(%q, %q) = %v", tc.a, tc.b, got)
		}
		if got := subjectsOverlap(tc.b, tc.a); got != tc.want {
			t.Errorf("subjectsOverlap(%q, %q) = %v", tc.b, tc.a, got)
		}
	}
}
