package testutil

import (
	"errors"
	"testing"
	"time"
)

func TestEventuallyWaitsForTheCondition(t *testing.T) {
	calls := 0
	Eventually(t, 5*time.Second, func() error {
		if calls++; calls < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if calls != 3 {
		t.Fatalf("%d calls, want 3", calls)
	}
}

func TestStartNATSServesJetStream(t *testing.T) {
	s := StartNATS(t, NATSOptions{})
	nc, js := JetStream(t, s)
	if _, err := js.AccountInfo(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !nc.IsConnected() {
		t.Fatal("not connected")
	}
}
