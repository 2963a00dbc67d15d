package testutil

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// MachineLock holds, until the test ends, a lock of this name shared by
// every process on the machine: a test that must use fixed ports (a
// README block run as written) waits for another run of it — a second
// `go test ./...` at the same time — instead of failing on a port in
// use.
func MachineLock(t testing.TB, name string) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "cep-test-"+name+".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatalf("machine lock %s: %v", name, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		t.Fatalf("machine lock %s: %v", name, err)
	}
	t.Cleanup(func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	})
}
