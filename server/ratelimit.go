package server

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// limiter holds one token bucket per API key: perHour requests, refilled
// continuously. It lives in memory, so a restart starts every key afresh.
type limiter struct {
	perHour int
	mu      sync.Mutex
	buckets map[string]*rate.Limiter
}

func newLimiter(perHour int) *limiter {
	return &limiter{perHour: perHour, buckets: map[string]*rate.Limiter{}}
}

// allow takes one request from the key's budget; when it is spent it
// returns how long until the next request would be allowed.
func (l *limiter) allow(keyID string, now time.Time) (ok bool, retryAfter time.Duration) {
	if l.perHour <= 0 {
		return true, 0
	}
	l.mu.Lock()
	b := l.buckets[keyID]
	if b == nil {
		b = rate.NewLimiter(rate.Limit(float64(l.perHour)/3600), l.perHour)
		l.buckets[keyID] = b
	}
	l.mu.Unlock()
	return take(b, now)
}

// take takes one token from b; when there is none it takes nothing and
// returns how long until there is one.
func take(b *rate.Limiter, now time.Time) (ok bool, retryAfter time.Duration) {
	r := b.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}
