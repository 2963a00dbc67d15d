package shard

import (
	"testing"

	"go.uber.org/goleak"
)

// Every goroutine a test starts (Raft groups, their transports, leader
// waits) must be gone when the package's tests end.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
