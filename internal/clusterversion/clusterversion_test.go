package clusterversion_test

import (
	"strings"
	"testing"

	"github.com/cepcluster/cep/cluster/meta"
	"github.com/cepcluster/cep/internal/clusterversion"
	"github.com/cepcluster/cep/shard"
	"github.com/cepcluster/cep/snapshot"
)

// The highest version's formats are what the packages that write them
// write: the table cannot drift from the code.
func TestHighestIsWhatThePackagesWrite(t *testing.T) {
	f, ok := clusterversion.Highest.Formats()
	if !ok {
		t.Fatalf("Highest %v has no formats", clusterversion.Highest)
	}
	if f.Batch != shard.BatchVersion {
		t.Errorf("batch version %d, shard writes %d", f.Batch, shard.BatchVersion)
	}
	if f.Section != shard.SectionVersion {
		t.Errorf("section version %d, shard writes %d", f.Section, shard.SectionVersion)
	}
	if f.Savepoint != snapshot.Version {
		t.Errorf("savepoint version %d, snapshot writes %d", f.Savepoint, snapshot.Version)
	}
	if f.MetaSnapshot != meta.SnapshotVersion {
		t.Errorf("metadata snapshot version %d, meta writes %d", f.MetaSnapshot, meta.SnapshotVersion)
	}
}

// Every version up to Highest is known, and none of its formats goes
// below an earlier version's (a cluster version only moves formats up).
func TestVersionsAreContiguousAndMonotone(t *testing.T) {
	var prev clusterversion.Formats
	for v := clusterversion.Base; v <= clusterversion.Highest; v++ {
		f, ok := v.Formats()
		if !ok {
			t.Fatalf("%v below Highest is not known", v)
		}
		if f.Batch < prev.Batch || f.Section < prev.Section || f.MetaSnapshot < prev.MetaSnapshot || f.Savepoint < prev.Savepoint {
			t.Errorf("%v writes %+v, below %v's %+v", v, f, v-1, prev)
		}
		prev = f
	}
	if (clusterversion.Highest + 1).Known() || clusterversion.Version(0).Known() {
		t.Error("a version outside Base..Highest is known")
	}
}

// A member reporting nothing and metadata recording nothing are at Base;
// only an active version above Highest is unreadable, with one line.
func TestReportedNoneIsBase(t *testing.T) {
	if clusterversion.Reported(0) != clusterversion.Base || clusterversion.Active(0) != clusterversion.Base {
		t.Error("none is not Base")
	}
	if clusterversion.Reported(2) != 2 || clusterversion.Active(2) != 2 {
		t.Error("a reported version is not itself")
	}
	for v := clusterversion.Base; v <= clusterversion.Highest; v++ {
		if err := clusterversion.Unreadable(v); err != nil {
			t.Errorf("%v: %v", v, err)
		}
	}
	err := clusterversion.Unreadable(clusterversion.Highest + 1)
	if err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), (clusterversion.Highest+1).String()) {
		t.Errorf("above Highest: %v", err)
	}
}
