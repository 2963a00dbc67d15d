package cluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// dataDirLock is the exclusive lock a node holds on its data directory
// from start to Close, so that a second node on the same directory fails
// at once instead of waiting for ever on the Raft logs' file locks. The
// kernel drops the lock when the process dies (kill -9 included): a LOCK
// file left behind does not block the next start.
type dataDirLock struct{ f *os.File }

// lockFileName is the lock file in the data directory; it holds the pid
// of the process that has the lock.
const lockFileName = "LOCK"

// lockDataDir takes the lock on dir without waiting.
func lockDataDir(dir string) (*dataDirLock, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("data directory %s: %w", dir, err)
	}
	path := filepath.Join(dir, lockFileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("data directory %s: lock: %w", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		b, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			holder := "another process"
			if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); perr == nil && pid > 0 {
				holder = fmt.Sprintf("process %d", pid)
			}
			return nil, fmt.Errorf("data directory %s is in use by %s, which holds the lock on %s: stop it or give another --data", dir, holder, path)
		}
		return nil, fmt.Errorf("data directory %s: lock %s: %w", dir, path, err)
	}
	err = f.Truncate(0)
	if err == nil {
		_, err = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("data directory %s: write %s: %w", dir, path, err)
	}
	return &dataDirLock{f: f}, nil
}

// release gives the lock up; the file stays (removing it would let a
// starting node lock a new file while another still holds the old one).
func (l *dataDirLock) release() {
	if l == nil || l.f == nil {
		return
	}
	syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	l.f.Close()
	l.f = nil
}
