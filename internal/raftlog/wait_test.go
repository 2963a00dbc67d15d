package raftlog

import (
	"context"
	"errors"
	"testing"
	"time"
)

// stuckFuture is a Raft future that does not resolve while the test runs:
// what hashicorp/raft leaves a barrier or an entry with when it shuts down
// after handing them to its state machine goroutine. It resolves once
// release is closed (at the test's end), so that the goroutine Wait left
// waiting on it ends before the leak check.
type stuckFuture struct{ release <-chan struct{} }

func (f stuckFuture) Error() error {
	<-f.release
	return errors.New("never resolved while the test ran")
}

type doneFuture struct{ err error }

func (f doneFuture) Error() error { return f.err }

func TestWaitEndsWithItsContext(t *testing.T) {
	want := errors.New("applied with an error")
	if err := Wait(context.Background(), doneFuture{want}); err != want {
		t.Fatalf("Wait on a resolved future = %v, want %v", err, want)
	}
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Wait(ctx, stuckFuture{release}) }()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Wait on a future that never resolves = %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Wait did not return when its context ended")
	}
}
