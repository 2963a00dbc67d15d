package leader

import (
	"testing"

	"go.uber.org/goleak"
)

// Every goroutine of a leader stops with it (leader.go lists them): the
// tests stop their leaders, shards and NATS, and nothing may be left.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
