//go:build !unix

package cluster

// diskFree is not known here.
func diskFree(string) (uint64, bool) { return 0, false }
