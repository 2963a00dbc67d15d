package cluster

import (
	"testing"

	"go.uber.org/goleak"
)

// The leak check stays with the cluster tests now that the mux tests,
// where it was, live in package transport.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
