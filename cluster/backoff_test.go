package cluster

import (
	"testing"
	"time"
)

// Retries of quick failures wait 100 ms, then twice as long each time up
// to 5 s; an attempt that lasted longer than 10 s starts over at 100 ms.
func TestBackoff(t *testing.T) {
	var b backoff
	var got []time.Duration
	for range 8 {
		b.started()
		got = append(got, b.next())
	}
	want := []time.Duration{100, 200, 400, 800, 1600, 3200, 5000, 5000}
	for i := range want {
		if got[i] != want[i]*time.Millisecond {
			t.Fatalf("delays %v, want %v ms", got, want)
		}
	}
	b.began = time.Now().Add(-11 * time.Second) // the last attempt ran 11 s
	if d := b.next(); d != 100*time.Millisecond {
		t.Fatalf("after a long attempt: %v, want 100ms", d)
	}
}
