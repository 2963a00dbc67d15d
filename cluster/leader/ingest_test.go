package leader

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// fakeIter hands out what is sent on next until it is stopped, or fails
// once next is closed.
type fakeIter struct {
	next    chan jetstream.Msg
	stopped chan struct{}
	once    sync.Once
}

func newFakeIter() *fakeIter {
	return &fakeIter{next: make(chan jetstream.Msg), stopped: make(chan struct{})}
}

func (f *fakeIter) Next(...jetstream.NextOpt) (jetstream.Msg, error) {
	select {
	case m, ok := <-f.next:
		if !ok {
			return nil, jetstream.ErrMsgIteratorClosed
		}
		return m, nil
	case <-f.stopped:
		return nil, jetstream.ErrMsgIteratorClosed
	}
}

func (f *fakeIter) Stop() { f.once.Do(func() { close(f.stopped) }) }

// within fails the test unless do returns within a few seconds.
func within(t *testing.T, what string, do func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); do() }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: still waiting", what)
	}
}

// The reader stops when read returns, though the caller's context goes on:
// waiting in Next, or holding a message nobody takes.
func TestReadMessagesStopsWithoutTheCaller(t *testing.T) {
	ctx := context.Background() // never ends
	it := newFakeIter()
	msgs, stop := readMessages(ctx, it, 1)
	it.next <- nil
	<-msgs
	within(t, "stop while the reader waits in Next", stop)
	select {
	case <-it.stopped:
	default:
		t.Fatal("the iterator is not stopped")
	}

	it = newFakeIter()
	_, stop = readMessages(ctx, it, 1)
	it.next <- nil // buffered
	it.next <- nil // held: nobody reads msgs
	within(t, "stop while the reader holds a message", stop)
}

// msgs is closed once Next fails, and once the caller's context ends.
func TestReadMessagesEnds(t *testing.T) {
	it := newFakeIter()
	msgs, stop := readMessages(context.Background(), it, 1)
	close(it.next)
	within(t, "msgs closed after Next failed", func() {
		for range msgs {
		}
	})
	stop()

	ctx, cancel := context.WithCancel(context.Background())
	it = newFakeIter()
	msgs, stop = readMessages(ctx, it, 1)
	cancel()
	within(t, "msgs closed after the context ended", func() {
		for range msgs {
		}
	})
	<-it.stopped
	stop()
}
