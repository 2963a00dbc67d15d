package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A held data directory refuses a second lock at once, naming the
// directory and the holder's pid; released, it can be taken again, and a
// LOCK file left by a dead process does not stand in the way.
func TestDataDirLock(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// as a killed process leaves it: a pid, no lock held
	if err := os.WriteFile(filepath.Join(dir, lockFileName), []byte("999999\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := lockDataDir(dir)
	if err != nil {
		t.Fatalf("a stale LOCK file blocked the lock: %v", err)
	}
	_, err = lockDataDir(dir)
	if err == nil {
		t.Fatal("locked twice")
	}
	if want := fmt.Sprintf("process %d", os.Getpid()); !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), want) {
		t.Errorf("%q does not name %s and %s", err, dir, want)
	}
	l.release()
	l.release() // twice is harmless
	l2, err := lockDataDir(dir)
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	l2.release()
}
