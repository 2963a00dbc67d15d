package leader

import (
	"math"
	"testing"
	"time"
)

// Retries of quick failures wait about 100 ms, then about twice as long
// each time up to about 5 s, each delay within ±50 % of that; an attempt
// that lasted longer than 10 s starts over at about 100 ms.
func TestRetryDelay(t *testing.T) {
	nominal := []time.Duration{100, 200, 400, 800, 1600, 3200, 5000, 5000}
	within := func(d, n time.Duration) bool { return d >= n/2 && d <= n*3/2+1 }
	b := newRetryDelay()
	var got []time.Duration
	for range nominal {
		b.started()
		got = append(got, b.next())
	}
	for i, n := range nominal {
		if !within(got[i], n*time.Millisecond) {
			t.Fatalf("delays %v, want each within 50%% of %v ms", got, nominal)
		}
	}
	b.began = time.Now().Add(-11 * time.Second) // the last attempt ran 11 s
	if d := b.next(); !within(d, 100*time.Millisecond) {
		t.Fatalf("after a long attempt: %v, want about 100ms", d)
	}
}

// The leaders of many shards failing together do not retry in step: their
// delays spread over the jitter range (without it they would all be
// equal), around the nominal delay.
func TestRetryDelaysSpread(t *testing.T) {
	const leaders = 200
	var sum, sq float64
	lo, hi := time.Duration(math.MaxInt64), time.Duration(0)
	for range leaders {
		b := newRetryDelay()
		b.started()
		b.next()
		b.next()
		d := b.next() // nominal 400 ms
		lo, hi = min(lo, d), max(hi, d)
		sum += float64(d)
		sq += float64(d) * float64(d)
	}
	mean := sum / leaders
	sd := math.Sqrt(sq/leaders - mean*mean)
	// uniform over [200, 600] ms: mean 400, standard deviation 115
	if math.Abs(mean-float64(400*time.Millisecond)) > float64(40*time.Millisecond) || sd < float64(80*time.Millisecond) {
		t.Fatalf("third delays of %d leaders: mean %v, sd %v (range %v-%v); want about 400ms and 115ms", leaders, time.Duration(mean), time.Duration(sd), lo, hi)
	}
	if hi-lo < 300*time.Millisecond {
		t.Fatalf("third delays span %v-%v only", lo, hi)
	}
}
