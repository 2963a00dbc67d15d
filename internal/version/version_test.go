package version

import (
	"strings"
	"testing"
)

func TestSetVersionWins(t *testing.T) {
	old := Version
	defer func() { Version = old }()
	Version = "v9.8.7"
	if got := Get().Version; got != "v9.8.7" {
		t.Fatalf("Get().Version = %q, want the build-time value", got)
	}
	if s := Get().String(); !strings.HasPrefix(s, "v9.8.7") {
		t.Fatalf("String() = %q", s)
	}
}

func TestUnsetVersionIsNeverEmpty(t *testing.T) {
	old := Version
	defer func() { Version = old }()
	Version = ""
	i := Get()
	if i.Version == "" {
		t.Fatal("empty version")
	}
	if i.GoVersion == "" {
		t.Fatal("test binaries carry build info; GoVersion empty")
	}
}

func TestStringShortensRevision(t *testing.T) {
	i := Info{Version: "v1", Revision: "0123456789abcdef", Modified: true, GoVersion: "go1.x"}
	if got, want := i.String(), "v1 (rev 0123456789ab+dirty, go1.x)"; got != want {
		t.Fatalf("String() = %q, want %q", got, want)
	}
}
