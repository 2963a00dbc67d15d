package secret

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestParseRoundTrip(t *testing.T) {
	s := Generate()
	if s.IsZero() {
		t.Fatal("generated a zero secret")
	}
	p, err := Parse(" " + s.String() + "\n")
	if err != nil || p != s {
		t.Fatalf("Parse(String()) = %v, %v", p, err)
	}
	for _, bad := range []string{"", "abc", s.String()[:62], s.String() + "00", "zz" + s.String()[2:]} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
}

func TestDerivedKeysDifferByPurposeAndSecret(t *testing.T) {
	a, b := Generate(), Generate()
	seen := map[string]string{}
	for _, s := range []Secret{a, b} {
		for _, p := range []string{Gossip, Raft, RaftStream, Member, Node, NATSNode, NATSPublic, Savepoint} {
			k := string(s.Derive(p, 32))
			if prev, ok := seen[k]; ok {
				t.Fatalf("key of %s equals key of %s", p, prev)
			}
			seen[k] = p
		}
	}
	if !bytes.Equal(a.Derive(Gossip, 32), a.Derive(Gossip, 32)) {
		t.Fatal("Derive is not deterministic")
	}
	// length-prefixed parts: moving a byte between parts changes the MAC
	if bytes.Equal(a.MAC(Raft, []byte("ab"), []byte("c")), a.MAC(Raft, []byte("a"), []byte("bc"))) {
		t.Fatal("MAC of different part lists collide")
	}
}

func TestKeep(t *testing.T) {
	dir := t.TempDir()
	if _, ok, err := Load(dir); ok || err != nil {
		t.Fatalf("Load of an empty dir: %v %v", ok, err)
	}
	s := Generate()
	if err := Keep(dir, s); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, File))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("secret file: %v %v", fi, err)
	}
	if err := Keep(dir, s); err != nil {
		t.Fatalf("Keep of the same secret: %v", err)
	}
	if err := Keep(dir, Generate()); !errors.Is(err, ErrOtherCluster) {
		t.Fatalf("Keep of another secret: %v", err)
	}
	if got, ok, err := Load(dir); !ok || err != nil || got != s {
		t.Fatalf("Load: %v %v", ok, err)
	}
	if err := os.WriteFile(filepath.Join(dir, File), []byte("damaged"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Load(dir); err == nil {
		t.Fatal("a damaged secret file was accepted")
	}
}
