package cluster

import (
	"context"
	"errors"
	"testing"

	"github.com/nats-io/nats.go"
)

// A JetStream call nobody answers (the embedded server reloading its
// accounts) is made again; any other outcome is returned at once.
func TestJSAgain(t *testing.T) {
	calls := 0
	err := jsAgain(context.Background(), func() error {
		if calls++; calls < 3 {
			return nats.ErrNoResponders
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Fatalf("no responders twice, then done: %v after %d calls", err, calls)
	}
	other := errors.New("stream not found")
	calls = 0
	if err := jsAgain(context.Background(), func() error { calls++; return other }); err != other || calls != 1 {
		t.Fatalf("another error: %v after %d calls, want it at once", err, calls)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	calls = 0
	if err := jsAgain(ctx, func() error { calls++; return nats.ErrNoResponders }); !errors.Is(err, nats.ErrNoResponders) || calls != 1 {
		t.Fatalf("with its context ended: %v after %d calls", err, calls)
	}
}
