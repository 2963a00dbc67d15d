package cluster

import (
	"testing"
	"time"
)

// spawn counts the goroutines it starts until they end (Close waits for
// them), and starts none once Close has begun.
func TestSpawnCountsUntilClosing(t *testing.T) {
	n := &Node{}
	waited := func() bool {
		done := make(chan struct{})
		go func() {
			n.wg.Wait()
			close(done)
		}()
		select {
		case <-done:
			return true
		case <-time.After(10 * time.Second):
			return false
		}
	}
	release := make(chan struct{})
	if !n.spawn(func() { <-release }) {
		t.Fatal("spawn refused before closing")
	}
	wait := make(chan bool)
	go func() { wait <- waited() }()
	select {
	case <-wait:
		t.Fatal("Wait returned while a spawned goroutine ran")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	if !<-wait {
		t.Fatal("Wait did not return once the spawned goroutine ended")
	}
	n.closing = true
	if n.spawn(func() { t.Error("a goroutine ran after Close began") }) {
		t.Fatal("spawn started a goroutine after Close began")
	}
	if !waited() {
		t.Fatal("Wait did not return")
	}
}
