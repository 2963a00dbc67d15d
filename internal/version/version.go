// Package version says which build of the project is running: the
// release set at build time, else what the Go toolchain recorded.
package version

import (
	"runtime/debug"
	"strings"
)

// Version is set at build time:
//
//	go build -ldflags "-X github.com/cepcluster/cep/internal/version.Version=v1.2.3"
//
// Left empty, Get falls back to the module version and VCS revision the
// toolchain embedded, so a plain `go build` still says what it is.
var Version string

// Info is what a build reports about itself.
type Info struct {
	Version   string // release, or "devel"
	Revision  string // VCS commit, "" when not known
	Modified  bool   // built from a tree with uncommitted changes
	GoVersion string
}

// Get returns this binary's build information.
func Get() Info {
	info := Info{Version: Version}
	bi, ok := debug.ReadBuildInfo()
	if ok {
		info.GoVersion = bi.GoVersion
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				info.Revision = s.Value
			case "vcs.modified":
				info.Modified = s.Value == "true"
			}
		}
		if info.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			info.Version = bi.Main.Version
		}
	}
	if info.Version == "" {
		info.Version = "devel"
	}
	return info
}

// String is the one line `--version` prints, e.g.
// "v1.2.3 (rev 0123abcd, go1.23.4)".
func (i Info) String() string {
	var extra []string
	if i.Revision != "" {
		rev := i.Revision
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if i.Modified {
			rev += "+dirty"
		}
		extra = append(extra, "rev "+rev)
	}
	if i.GoVersion != "" {
		extra = append(extra, i.GoVersion)
	}
	if len(extra) == 0 {
		return i.Version
	}
	return i.Version + " (" + strings.Join(extra, ", ") + ")"
}
