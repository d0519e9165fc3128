package delivery

import (
	"context"
	"sync"
	"time"

	"github.com/blueline-app/blueline/storage"
)

// Clock is the worker's time. Tests give it one they move by hand.
type Clock interface {
	Now() time.Time
	// After delivers the time once d has passed on this clock.
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Pacer spaces the messages of a paced line (the Apple ID guard's pace):
// at most one is handed to the network per pace. It holds the others back
// twice over: they are not claimed before their turn (so they stay pending,
// can be cancelled, and take no worker's place from other lines), and a
// send waits for the line's turn (so that a claimed message delayed behind
// others still keeps its distance from the next).
type Pacer struct {
	clock Clock
	pace  map[string]time.Duration // by line ID; absent or 0: not paced

	mu        sync.Mutex
	nextClaim map[string]int64 // line ID → when its next message may be claimed (Unix ms)
	nextSend  map[string]time.Time
	seen      map[string]int64 // the current claim's held or claimed items, per line
	now       int64            // the current claim's time
}

// NewPacer paces each line of pace (by line ID) on clock; nil clock is
// the real one.
func NewPacer(clock Clock, pace map[string]time.Duration) *Pacer {
	if clock == nil {
		clock = realClock{}
	}
	return &Pacer{clock: clock, pace: pace, nextClaim: map[string]int64{}, nextSend: map[string]time.Time{}, seen: map[string]int64{}}
}

func (p *Pacer) paced(item storage.OutboxItem) time.Duration {
	// What hands Messages a message is paced: a message, and a new
	// group's first message.
	if item.Kind != storage.KindMessage && item.Kind != storage.KindGroupCreate {
		return 0
	}
	return p.pace[item.LineID]
}

// Start begins a claim at now (storage.Pace).
func (p *Pacer) Start(now int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.now = now
	clear(p.seen)
}

// Hold is when a due item may be claimed, 0 for now (storage.Pace): the
// line's next turn for its first message of the claim, one pace later for
// each further one, so that a backlog is spread out rather than looked at
// again at every turn.
func (p *Pacer) Hold(item storage.OutboxItem) int64 {
	pace := p.paced(item)
	if pace == 0 {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	n := p.seen[item.LineID]
	p.seen[item.LineID]++
	at := max(p.nextClaim[item.LineID], p.now) + n*pace.Milliseconds()
	if at <= p.now {
		return 0
	}
	return at
}

// Claimed records the claimed items: each paced line's next turn is one
// pace after now.
func (p *Pacer) Claimed(items []storage.OutboxItem, now int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, item := range items {
		if pace := p.paced(item); pace > 0 {
			p.nextClaim[item.LineID] = now + pace.Milliseconds()
		}
	}
}

// Wait waits for the line's turn to send item, and takes it. Other lines
// never wait.
func (p *Pacer) Wait(ctx context.Context, item storage.OutboxItem) error {
	pace := p.paced(item)
	if pace == 0 {
		return nil
	}
	p.mu.Lock()
	now := p.clock.Now()
	at := now
	if next := p.nextSend[item.LineID]; next.After(now) {
		at = next
	}
	p.nextSend[item.LineID] = at.Add(pace)
	p.mu.Unlock()
	if !at.After(now) {
		return nil
	}
	select {
	case <-p.clock.After(at.Sub(now)):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
