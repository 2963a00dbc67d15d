package snapshot_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/cepcluster/cep/internal/testutil"
	"github.com/cepcluster/cep/snapshot"
)

func TestObjectStore(t *testing.T) {
	_, js := testutil.JetStream(t, testutil.StartNATS(t, testutil.NATSOptions{}))
	s, err := snapshot.NewObjectStore(js, "savepoints")
	if err != nil {
		t.Fatal(err)
	}
	if s.Bucket() != "savepoints" {
		t.Errorf("Bucket() = %q", s.Bucket())
	}
	s.SpoolDir = t.TempDir()
	testStore(t, s)

	// A second store on the same bucket binds to it and sees the same files.
	s2, err := snapshot.OpenStore(context.Background(), "nats://savepoints", js)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := list(t, s2), list(t, s); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("second store lists %v, first %v", got, want)
	}
	// Spool files are removed when objects are closed.
	if ents, _ := readDirNames(s.SpoolDir); len(ents) != 0 {
		t.Errorf("spool files left: %v", ents)
	}
}
