package metrics

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// Every duration falls in a bucket whose bounds hold it, the buckets are
// in order, and none spans more than an eighth of its lower bound.
func TestBuckets(t *testing.T) {
	prev := -1
	for ms := int64(0); ms < 1<<22; ms++ {
		b := bucketOf(ms)
		if b < prev || b > prev+1 {
			t.Fatalf("%d ms in bucket %d after bucket %d", ms, b, prev)
		}
		prev = b
		low, width := bucketBounds(b)
		if ms < low || ms >= low+width {
			t.Fatalf("%d ms in bucket %d, [%d, %d)", ms, b, low, low+width)
		}
		if low >= subCount && width*subCount > low {
			t.Fatalf("bucket %d [%d, %d) is wider than an eighth", b, low, low+width)
		}
	}
	if b := bucketOf(1<<maxExp - 1); b != buckets-1 {
		t.Errorf("the longest duration counted apart is in bucket %d of %d", b, buckets)
	}
	if b := bucketOf(1 << 40); b != buckets-1 {
		t.Errorf("a duration past the last bound is in bucket %d of %d", b, buckets)
	}
	if b := bucketOf(-5); b != 0 {
		t.Errorf("a negative duration is in bucket %d", b)
	}
}

// quantilesOf feeds durations in ms to one slot and reads p50 and p99.
func quantilesOf(ms ...int64) Quantiles {
	var d day
	for _, v := range ms {
		d.add(7, time.Duration(v)*time.Millisecond)
	}
	return d.quantiles(7)
}

func TestQuantiles(t *testing.T) {
	for _, tc := range []struct {
		name     string
		ms       []int64
		p50, p99 time.Duration
	}{
		{"none", nil, 0, 0},
		{"one of 0 ms", []int64{0}, 0, 0},
		{"one of 7 ms", []int64{7}, 7 * time.Millisecond, 7 * time.Millisecond},
		// 50 lies in [48, 52), 99 in [96, 104) with 96…100: the
		// rank's place is taken as spread across the bucket (101 ms),
		// and kept within what was recorded (100 ms).
		{"1 to 100 ms", seq(1, 100), 50 * time.Millisecond, 100 * time.Millisecond},
		{"all alike", repeat(3000, 40), 3 * time.Second, 3 * time.Second},
		// 99 of 100 are 2 ms: the 99th is too.
		{"one slow of 100", append(repeat(2, 99), 60_000), 2 * time.Millisecond, 2 * time.Millisecond},
		// 2 of 100 are slow: the 99th is one of them, in [57344, 61440),
		// the first of the two there.
		{"two slow of 100", append(repeat(2, 98), 60_000, 60_000), 2 * time.Millisecond, 58368 * time.Millisecond},
	} {
		q := quantilesOf(tc.ms...)
		if q.Count != int64(len(tc.ms)) || q.P50 != tc.p50 || q.P99 != tc.p99 {
			t.Errorf("%s: %+v, want count %d, p50 %s, p99 %s", tc.name, q, len(tc.ms), tc.p50, tc.p99)
		}
	}

	// Any spread: each quantile is in the bucket of the exact one (nearest
	// rank), so within an eighth of it.
	r := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		ms := make([]int64, 1+r.IntN(2000))
		for i := range ms {
			ms[i] = int64(r.ExpFloat64() * float64([]int64{30, 800, 40_000, 3_600_000}[r.IntN(4)]))
		}
		q := quantilesOf(ms...)
		slices.Sort(ms)
		for _, c := range []struct {
			q   float64
			got time.Duration
		}{{0.50, q.P50}, {0.99, q.P99}} {
			exact := ms[int(float64(len(ms))*c.q+0.999999)-1]
			low, width := bucketBounds(bucketOf(exact))
			if got := c.got.Milliseconds(); got < low || got >= low+width {
				t.Fatalf("p%v of %d durations: %d ms, exact %d ms, bucket [%d, %d)", c.q*100, len(ms), got, exact, low, low+width)
			}
		}
	}
}

// near reports whether got is in the bucket of want.
func near(got, want time.Duration) bool {
	low, width := bucketBounds(bucketOf(want.Milliseconds()))
	return got.Milliseconds() >= low && got.Milliseconds() < low+width
}

func seq(from, to int64) []int64 {
	var out []int64
	for v := from; v <= to; v++ {
		out = append(out, v)
	}
	return out
}

func repeat(v int64, n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// The day moves with the clock: what was recorded more than a day ago
// leaves the figures, a slot reused a day later starts over, and the
// figures start no earlier than the recorder.
func TestLastDay(t *testing.T) {
	now := time.Date(2026, 11, 26, 9, 3, 0, 0, time.UTC)
	lines := map[string]string{"ln_1": "+15550000001"}
	l := newLatencies(func() time.Time { return now }, func(id string) (string, bool) { h, ok := lines[id]; return h, ok })
	started := now

	for range 10 {
		l.observe("ln_1", AcceptToSent, time.Second)
	}
	l.observe("ln_1", SentToDelivered, -time.Second) // a phone's clock ahead of ours
	l.observe("ln_2", AcceptToSent, time.Second)     // not a line served
	l.observe("ln_1", "no_such_stage", time.Second)
	now = now.Add(12 * time.Hour)
	for range 10 {
		l.observe("ln_1", AcceptToSent, 3*time.Second)
	}
	d := l.day("ln_1")
	if q := d.Stages[AcceptToSent]; q.Count != 20 || !near(q.P50, time.Second) || !near(q.P99, 3*time.Second) {
		t.Errorf("after 12 hours: %+v", q)
	}
	if q := d.Stages[SentToDelivered]; q.Count != 1 || q.P50 != 0 {
		t.Errorf("a delivery dated before its send: %+v", q)
	}
	if q := d.Stages[RowToWebhook]; q != (Quantiles{}) {
		t.Errorf("nothing recorded: %+v", q)
	}
	if !d.Since.Equal(started) {
		t.Errorf("since %s, want the start %s", d.Since, started)
	}
	if d := l.day("ln_2"); d.Stages[AcceptToSent].Count != 0 {
		t.Errorf("a line not served: %+v", d)
	}

	// 24 hours on, the slot of the first ten is past.
	now = started.Add(24 * time.Hour)
	d = l.day("ln_1")
	if q := d.Stages[AcceptToSent]; q.Count != 10 || !near(q.P50, 3*time.Second) {
		t.Errorf("a day after the first: %+v", q)
	}
	if want := time.Date(2026, 11, 26, 9, 10, 0, 0, time.UTC); !d.Since.Equal(want) {
		t.Errorf("since %s, want %s", d.Since, want)
	}
	// Recording there starts the slot over.
	l.observe("ln_1", AcceptToSent, 5*time.Second)
	if q := l.day("ln_1").Stages[AcceptToSent]; q.Count != 11 || !near(q.P99, 5*time.Second) {
		t.Errorf("after recording in a reused slot: %+v", q)
	}

	// A clock set back a day counts in the newer slot of its place,
	// never wiping it.
	now = now.Add(-24 * time.Hour)
	l.observe("ln_1", AcceptToSent, 5*time.Second)
	now = now.Add(24 * time.Hour)
	if q := l.day("ln_1").Stages[AcceptToSent]; q.Count != 12 {
		t.Errorf("after a clock set back: %+v", q)
	}

	now = now.Add(24 * time.Hour)
	if q := l.day("ln_1").Stages[AcceptToSent]; q != (Quantiles{}) {
		t.Errorf("two days on: %+v", q)
	}
}
