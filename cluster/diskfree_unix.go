//go:build unix

package cluster

import "golang.org/x/sys/unix"

// diskFree is the space an unprivileged writer may still use on the
// filesystem holding dir.
func diskFree(dir string) (uint64, bool) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, false
	}
	return uint64(st.Bavail) * uint64(st.Bsize), true
}
