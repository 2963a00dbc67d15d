package cluster

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cepcluster/cep/api"
	"github.com/cepcluster/cep/cluster/meta"
)

// A dir:// path is taken inside the savepoint directory and refused once
// it resolves outside it, lexically or through a symbolic link.
func TestSavepointPathStaysInside(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "sp")
	other := filepath.Join(base, "other")
	for _, d := range []string{root, other, filepath.Join(root, "real")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(other, filepath.Join(root, "out")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(root, "real"), filepath.Join(root, "in")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(base, "nothing"), filepath.Join(root, "dangling")); err != nil {
		t.Fatal(err)
	}
	realRoot, _ := filepath.EvalSymlinks(root)
	for _, tc := range []struct {
		path, want string // want "" : refused
	}{
		{"nightly", filepath.Join(realRoot, "nightly")},
		{"a/b/../c", filepath.Join(realRoot, "a/c")},
		{root, realRoot},
		{filepath.Join(root, "x"), filepath.Join(realRoot, "x")},
		{"in/new", filepath.Join(realRoot, "real/new")},
		{"../other", ""},
		{"a/../../other", ""},
		{other, ""},
		{"/etc", ""},
		{base, ""},
		{root + "x", ""}, // a sibling sharing the prefix
		{"out", ""},
		{"out/deeper/still", ""},
		{"dangling/x", ""},
	} {
		got, err := savepointPath(root, tc.path)
		if tc.want == "" {
			if err == nil || !strings.Contains(err.Error(), "savepoint directory "+root) && !strings.Contains(err.Error(), "symbolic link") {
				t.Errorf("%s: %q, %v; want refused naming %s", tc.path, got, err, root)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: %q, %v; want %s", tc.path, got, err, tc.want)
		}
	}
	if _, err := savepointPath("", "x"); err == nil {
		t.Error("no savepoint directory: allowed")
	}
}

// The checks a deploy and a restore share refuse what a deploy refuses
// and take what it makes.
func TestPatternAndSourceChecks(t *testing.T) {
	spec := "name: p\nsource: bank\nstages:\n  - name: a\n    where: e.x == 1\n"
	ok := meta.Pattern{Name: "p", Version: 1, Spec: spec, Format: "spec", Sources: []string{"bank"}, OutputSubject: "cep.out.p"}
	if err := checkPattern(&ok); err != nil {
		t.Fatalf("a deployable pattern: %v", err)
	}
	for name, edit := range map[string]func(p *meta.Pattern){
		"name ../x":           func(p *meta.Pattern) { p.Name = "../x" },
		"name and spec ../x":  func(p *meta.Pattern) { p.Name = "../x"; p.Spec = strings.Replace(spec, "name: p", "name: ../x", 1) },
		"subject $JS.API":     func(p *meta.Pattern) { p.OutputSubject = "$JS.API.INFO" },
		"subject wildcard":    func(p *meta.Pattern) { p.OutputSubject = "cep.out.>" },
		"subject empty token": func(p *meta.Pattern) { p.OutputSubject = "cep.out..p" },
		"sources differ":      func(p *meta.Pattern) { p.Sources = []string{"other"} },
		"reads another":       func(p *meta.Pattern) { p.Reads = []string{"other"} },
		"bad bound":           func(p *meta.Pattern) { p.MaxPartialMatches = -5 },
		"bad record type":     func(p *meta.Pattern) { p.Records = []string{"all"} },
		"bad policy":          func(p *meta.Pattern) { p.Policy = 9 },
		"bad format":          func(p *meta.Pattern) { p.Format = "lua" },
		"spec does not parse": func(p *meta.Pattern) { p.Spec = "name: p\nstages: [" },
	} {
		p := ok
		edit(&p)
		err := checkPattern(&p)
		if !errors.Is(err, api.ErrInvalidArgument) {
			t.Errorf("%s: %v, want invalid argument", name, err)
		}
	}
	src := meta.Source{Name: "bank", Stream: "CEP_SRC_BANK", Subjects: []string{"bank.*"}, Key: "e.account", Managed: true}
	if err := checkSource(&src); err != nil {
		t.Fatalf("a created source: %v", err)
	}
	derived := meta.Source{Name: "bank.k0a1b2c3d", Stream: "CEP_SRC_BANK_K0A1B2C3D", Subjects: []string{"bank.k0a1b2c3d.*"}, Key: "e.card", Origin: "bank"}
	if err := checkSource(&derived); err != nil {
		t.Fatalf("a derived source: %v", err)
	}
	for name, edit := range map[string]func(s *meta.Source){
		"name ../x":          func(s *meta.Source) { s.Name = "../x" },
		"subject $JS.API.>":  func(s *meta.Source) { s.Subjects = []string{"$JS.API.>"} },
		"subject >":          func(s *meta.Source) { s.Subjects = []string{">"} },
		"subject _INBOX":     func(s *meta.Source) { s.Subjects = []string{"_INBOX.>"} },
		"filter $SYS":        func(s *meta.Source) { s.Filter = []string{"$SYS.>"} },
		"stream with a dot":  func(s *meta.Source) { s.Stream = "A.B" },
		"stream with $":      func(s *meta.Source) { s.Stream = "$X" },
		"key does not parse": func(s *meta.Source) { s.Key = "e.(" },
		"derived, other":     func(s *meta.Source) { s.Origin = "bank"; s.Name = "evil" },
	} {
		s := src
		edit(&s)
		if err := checkSource(&s); !errors.Is(err, api.ErrInvalidArgument) {
			t.Errorf("%s: %v, want invalid argument", name, err)
		}
	}
}

// A savepoint's id says when it was taken, in UTC to the millisecond,
// and ids sort as their times do.
func TestSavepointIDReadsAsItsTime(t *testing.T) {
	at := time.Date(2026, 12, 2, 11, 0, 26, 123_000_000, time.FixedZone("CET", 3600))
	if got := savepointID(at); got != "sp-20261202-100026.123" {
		t.Errorf("savepointID(%v) = %s", at, got)
	}
	a, b := savepointID(at), savepointID(at.Add(time.Millisecond))
	c := savepointID(at.Add(10 * 24 * time.Hour))
	if !(a < b && b < c) {
		t.Errorf("ids out of their times' order: %s %s %s", a, b, c)
	}
}
