package metrics

import (
	"math"
	"math/bits"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The stages of a line's traffic that are timed. Each is a histogram with
// a line label in /metrics (cumulative since the start) and, for GET
// /v1/lines and the console, p50 and p99 over the last day.
const (
	// AcceptToSent is an outbox message from when it was accepted (or fell
	// due, if scheduled) to when the line's network reported it sent.
	AcceptToSent = "accept_to_sent"
	// RowToWebhook is a contact's message from its time on the network
	// (the chat.db row's date; on the simulated network, its arrival) to a
	// webhook's 2xx answer to its message.received.
	RowToWebhook = "row_to_webhook"
	// SentToDelivered is a message of the line from when the network sent
	// it to its delivered receipt (both as the network dates them).
	SentToDelivered = "sent_to_delivered"
)

// Stages lists the timed stages in the order they are shown.
var Stages = []string{AcceptToSent, RowToWebhook, SentToDelivered}

// latencyBuckets are the histograms' upper bounds in seconds: from a fast
// loopback webhook to a phone switched off for hours.
var latencyBuckets = []float64{.05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 14400}

// Quantiles are one stage's figures over the last day.
type Quantiles struct {
	Count    int64
	P50, P99 time.Duration // 0 when Count is 0
}

// DayLatency is a line's figures over the last day, by stage.
type DayLatency struct {
	// Since is where the figures start: a day ago (to the 10 minutes), or
	// the daemon's start when later: they are kept in memory only.
	Since  time.Time
	Stages map[string]Quantiles
}

// latencies keeps each line's timings: histograms for /metrics, and the
// last day's counts for the quantiles.
type latencies struct {
	now     func() time.Time
	started time.Time
	vecs    map[string]*prometheus.HistogramVec // by stage
	handle  func(lineID string) (string, bool)

	mu    sync.RWMutex
	lines map[string]*lineLatency // by line ID
}

// lineLatency is one line's timings.
type lineLatency struct {
	observers [stageCount]prometheus.Observer
	mu        sync.Mutex
	days      [stageCount]day
}

// stageCount is len(Stages), whose order numbers the arrays of lineLatency.
const stageCount = 3

func newLatencies(now func() time.Time, handle func(lineID string) (string, bool)) *latencies {
	l := &latencies{now: now, started: now(), vecs: map[string]*prometheus.HistogramVec{}, handle: handle, lines: map[string]*lineLatency{}}
	for _, s := range Stages {
		l.vecs[s] = prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "blueline_latency_" + s + "_seconds",
			Help:    latencyHelp[s],
			Buckets: latencyBuckets,
		}, []string{"line"})
	}
	return l
}

var latencyHelp = map[string]string{
	AcceptToSent:    "Time from an outbox message's acceptance (or its scheduled time) to the network reporting it sent, by line.",
	RowToWebhook:    "Time from a contact's message on the network (its chat.db row's date; on the simulated network its arrival) to a webhook's 2xx answer to its message.received, by line.",
	SentToDelivered: "Time from a message of the line being sent to its delivered receipt, as the network dates both, by line.",
}

func (l *latencies) collectors() []prometheus.Collector {
	out := make([]prometheus.Collector, 0, len(Stages))
	for _, s := range Stages {
		out = append(out, l.vecs[s])
	}
	return out
}

// line is lineID's timings, made on first use; nil for a line not served.
func (l *latencies) line(lineID string) *lineLatency {
	l.mu.RLock()
	ll := l.lines[lineID]
	l.mu.RUnlock()
	if ll != nil {
		return ll
	}
	handle, ok := l.handle(lineID)
	if !ok {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if ll = l.lines[lineID]; ll == nil {
		ll = &lineLatency{}
		for i, s := range Stages {
			ll.observers[i] = l.vecs[s].WithLabelValues(handle)
		}
		l.lines[lineID] = ll
	}
	return ll
}

func (l *latencies) observe(lineID, stage string, d time.Duration) {
	i := slices.Index(Stages, stage)
	if i < 0 {
		return
	}
	ll := l.line(lineID)
	if ll == nil {
		return
	}
	// A date from another clock (a phone's, Apple's) may be a little
	// ahead of ours.
	d = max(d, 0)
	ll.observers[i].Observe(d.Seconds())
	slot := slotOf(l.now())
	ll.mu.Lock()
	ll.days[i].add(slot, d)
	ll.mu.Unlock()
}

func (l *latencies) day(lineID string) DayLatency {
	now := l.now()
	cur := slotOf(now)
	since := time.Unix(0, (cur-daySlots+1)*int64(slotWidth))
	if l.started.After(since) {
		since = l.started
	}
	out := DayLatency{Since: since, Stages: make(map[string]Quantiles, len(Stages))}
	ll := l.line(lineID)
	for i, s := range Stages {
		var q Quantiles
		if ll != nil {
			ll.mu.Lock()
			q = ll.days[i].quantiles(cur)
			ll.mu.Unlock()
		}
		out.Stages[s] = q
	}
	return out
}

// The last day is kept as a ring of slots of slotWidth, each with a count
// per bucket: a day's figures cost the same whatever the traffic, and a
// quantile is read from at most daySlots × buckets counts.
const (
	slotWidth = 10 * time.Minute
	daySlots  = int64(24 * time.Hour / slotWidth)
)

// slotOf numbers the slot of t.
func slotOf(t time.Time) int64 { return t.UnixNano() / int64(slotWidth) }

// day is one stage's counts over the last day.
type day struct {
	slots [daySlots]*slot // slot n at n % daySlots; nil until used
}

type slot struct {
	n      int64 // the slot's number (slotOf)
	counts [buckets]uint32
	// minMs and maxMs are the slot's extremes: a quantile is kept within
	// them, so that one duration, or many alike, read back exactly.
	minMs, maxMs int64
}

func (d *day) add(n int64, v time.Duration) {
	ms := v.Milliseconds()
	s := d.slots[n%daySlots]
	switch {
	case s == nil:
		s = &slot{n: n, minMs: ms, maxMs: ms}
		d.slots[n%daySlots] = s
	case s.n < n:
		*s = slot{n: n, minMs: ms, maxMs: ms} // a day old: start it over
	}
	// s.n > n only if the clock was set back: counted in the newer slot.
	s.counts[bucketOf(ms)]++
	s.minMs, s.maxMs = min(s.minMs, ms), max(s.maxMs, ms)
}

// quantiles reads the slots of the day that ends with slot cur.
func (d *day) quantiles(cur int64) Quantiles {
	var sum [buckets]int64
	var total, lo, hi int64
	for _, s := range d.slots {
		if s == nil || s.n > cur || s.n <= cur-daySlots {
			continue
		}
		if total == 0 {
			lo, hi = s.minMs, s.maxMs
		}
		for b, c := range s.counts {
			sum[b] += int64(c)
			total += int64(c)
		}
		lo, hi = min(lo, s.minMs), max(hi, s.maxMs)
	}
	if total == 0 {
		return Quantiles{}
	}
	within := func(ms int64) time.Duration { return time.Duration(min(max(ms, lo), hi)) * time.Millisecond }
	return Quantiles{Count: total, P50: within(quantile(&sum, total, 0.50)), P99: within(quantile(&sum, total, 0.99))}
}

// Durations are counted in log-linear buckets of milliseconds: below 8 ms
// one per millisecond, above it 8 per power of two, so a bucket spans at
// most an eighth of its lower bound. Durations of 2^32 ms (49 days) or more
// share the last.
const (
	subBits  = 3
	subCount = 1 << subBits
	maxExp   = 32
	buckets  = subCount + (maxExp-subBits)*subCount
)

func bucketOf(ms int64) int {
	switch {
	case ms < subCount:
		return int(max(ms, 0))
	case ms >= 1<<maxExp:
		return buckets - 1
	}
	e := bits.Len64(uint64(ms)) - 1 // ≥ subBits
	sub := int(ms>>(e-subBits)) & (subCount - 1)
	return subCount + (e-subBits)*subCount + sub
}

// bucketBounds is bucket b's lowest duration in ms and its width.
func bucketBounds(b int) (low, width int64) {
	if b < subCount {
		return int64(b), 1
	}
	e := (b-subCount)/subCount + subBits
	sub := int64((b - subCount) % subCount)
	width = 1 << (e - subBits)
	return (subCount + sub) * width, width
}

// quantile is the q-quantile (nearest rank) of the counts in ms: the
// rank's place inside its bucket is taken as spread evenly across the
// bucket.
func quantile(counts *[buckets]int64, total int64, q float64) int64 {
	// The product is rounded first: 0.99 × 100 is 99.00000000000001.
	rank := int64(math.Ceil(math.Round(q*float64(total)*1e6) / 1e6))
	rank = min(max(rank, 1), total)
	var below int64
	for b, c := range counts {
		if c == 0 {
			continue
		}
		if below+c >= rank {
			low, width := bucketBounds(b)
			return low + int64((float64(rank-below)-0.5)/float64(c)*float64(width))
		}
		below += c
	}
	return 0 // not reached: the counts add up to total
}
