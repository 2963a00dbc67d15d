package testutil

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// While a test holds a machine lock, another holder (here, another open
// file, as another process would have) cannot take it; once the test
// ends, it can.
func TestMachineLock(t *testing.T) {
	name := "machinelock-test"
	try := func() error {
		f, err := os.OpenFile(filepath.Join(os.TempDir(), "cep-test-"+name+".lock"), os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		}
		return err
	}
	t.Run("held", func(t *testing.T) {
		MachineLock(t, name)
		if err := try(); err == nil {
			t.Error("a second holder took the lock")
		}
	})
	if err := try(); err != nil {
		t.Errorf("after the test: %v", err)
	}
}
