package raftlog

import (
	"testing"

	"go.uber.org/goleak"
)

// A wait a shutdown interrupts leaves its goroutine only until the future
// resolves: none may be left when the package's tests end.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
