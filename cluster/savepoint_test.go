package cluster

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
