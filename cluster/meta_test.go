package cluster

import (
	"bytes"
	"errors"
	"testing"
)

func TestMetaPatternsLifecycle(t *testing.T) {
	m := NewMeta()
	m.Apply(1, &Command{Kind: CmdInit, ClusterID: "c", KeyGroups: 256, Shards: []ShardInfo{{ID: 1, First: 0, Last: 255, Replicas: []string{"n1"}}}})
	if _, err := m.Apply(2, &Command{Kind: CmdPutPattern, Create: true, Pattern: &PatternM{Name: "p", Sources: []string{"bank"}}}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("pattern on a missing source: %v", err)
	}
	if _, err := m.Apply(3, &Command{Kind: CmdPutSource, Source: &SourceM{Name: "bank", Stream: "BANK"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Apply(4, &Command{Kind: CmdPutSource, Source: &SourceM{Name: "bank"}}); !errors.Is(err, ErrExists) {
		t.Fatalf("duplicate source: %v", err)
	}
	res, err := m.Apply(5, &Command{Kind: CmdPutPattern, Create: true, Pattern: &PatternM{Name: "p", Sources: []string{"bank"}}})
	if err != nil || res.(*PatternM).Version != 1 || res.(*PatternM).CreatedIndex != 5 {
		t.Fatalf("deploy: %+v %v", res, err)
	}
	if _, err := m.Apply(6, &Command{Kind: CmdPutPattern, Create: true, Pattern: &PatternM{Name: "p", Sources: []string{"bank"}}}); !errors.Is(err, ErrExists) {
		t.Fatalf("second deploy with the same name: %v", err)
	}
	if _, err := m.Apply(7, &Command{Kind: CmdPutPattern, Expect: 9, Pattern: &PatternM{Name: "p", Sources: []string{"bank"}}}); !errors.Is(err, ErrConflict) {
		t.Fatalf("update from a stale version: %v", err)
	}
	res, err = m.Apply(8, &Command{Kind: CmdPutPattern, Expect: 1, Pattern: &PatternM{Name: "p", Sources: []string{"bank"}}})
	if err != nil || res.(*PatternM).Version != 2 || res.(*PatternM).CreatedIndex != 5 || res.(*PatternM).UpdatedIndex != 8 {
		t.Fatalf("update: %+v %v", res, err)
	}
	if _, err := m.Apply(9, &Command{Kind: CmdDeletePattern, Name: "p"}); err != nil {
		t.Fatal(err)
	}
	if names := m.PatternNames(); len(names) != 0 {
		t.Fatalf("deleted pattern listed: %v", names)
	}
	// redeploying after a delete continues the version sequence, so shards
	// never confuse the new pattern with the old one
	res, err = m.Apply(10, &Command{Kind: CmdPutPattern, Create: true, Pattern: &PatternM{Name: "p", Sources: []string{"bank"}}})
	if err != nil || res.(*PatternM).Version != 4 {
		t.Fatalf("redeploy: %+v %v", res, err)
	}
	a, _ := m.Marshal()
	m2, err := UnmarshalMeta(a)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := m2.Marshal()
	if !bytes.Equal(a, b) {
		t.Fatal("metadata does not round-trip")
	}
}
