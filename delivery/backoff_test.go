package delivery

import (
	"testing"
	"time"
)

// The delay after attempt n is RetryBase doubled n-1 times, capped at
// RetryMax, with equal jitter: between half and all of it.
func TestBackoff(t *testing.T) {
	w := &Worker{opts: Options{RetryBase: time.Second, RetryMax: 10 * time.Second}}
	for attempt, full := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 4: 8 * time.Second, 5: 10 * time.Second, 30: 10 * time.Second} {
		lo, hi := time.Duration(1<<62), time.Duration(0)
		for range 2000 {
			d := w.backoff(attempt)
			lo, hi = min(lo, d), max(hi, d)
		}
		if lo < full/2 || hi > full {
			t.Errorf("attempt %d: delays in [%v, %v], want within [%v, %v]", attempt, lo, hi, full/2, full)
		}
		// Jitter spreads the delays over most of the range.
		if hi-lo < full/4 {
			t.Errorf("attempt %d: delays in [%v, %v] are not spread", attempt, lo, hi)
		}
	}
}
