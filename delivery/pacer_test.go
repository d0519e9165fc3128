package delivery_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/blueline-app/blueline/bridge"
	"github.com/blueline-app/blueline/delivery"
	"github.com/blueline-app/blueline/storage"
	"github.com/blueline-app/blueline/testkit"
)

// fakeClock is a delivery.Clock that moves only when the test says.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []fakeWaiter
}

type fakeWaiter struct {
	at time.Time
	ch chan time.Time
}

func newFakeClock(start time.Time) *fakeClock { return &fakeClock{now: start} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- c.now
		return ch
	}
	c.waiters = append(c.waiters, fakeWaiter{at: c.now.Add(d), ch: ch})
	return ch
}

// Advance moves the clock on by d, firing the waits it reaches.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if w.at.After(c.now) {
			kept = append(kept, w)
			continue
		}
		w.ch <- c.now
	}
	c.waiters = kept
}

// waitingUntil reports whether something waits for the clock to reach at.
func (c *fakeClock) waitingUntil(at time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, w := range c.waiters {
		if w.at.Equal(at) {
			return true
		}
	}
	return false
}

func TestPacerWaitSpacesALinesSends(t *testing.T) {
	start := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	clock := newFakeClock(start)
	p := delivery.NewPacer(clock, map[string]time.Duration{"ln_paced": time.Second})
	paced := storage.OutboxItem{LineID: "ln_paced", Kind: storage.KindMessage}
	ctx := context.Background()
	if err := p.Wait(ctx, paced); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.Wait(ctx, paced) }()
	// The second send of the line waits for its turn, a second later …
	testkit.Eventually(t, 5*time.Second, func() bool { return clock.waitingUntil(start.Add(time.Second)) })
	select {
	case err := <-done:
		t.Fatalf("second send did not wait for its turn: %v", err)
	default:
	}
	// … while other lines, and other kinds of item, do not wait at all.
	for _, item := range []storage.OutboxItem{{LineID: "ln_other", Kind: storage.KindMessage}, {LineID: "ln_paced", Kind: storage.KindTyping}} {
		if err := p.Wait(ctx, item); err != nil {
			t.Fatal(err)
		}
	}
	clock.Advance(999 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("second send went 1ms early: %v", err)
	default:
	}
	clock.Advance(time.Millisecond)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// A new group's first message is paced like any message.
	go func() { done <- p.Wait(ctx, storage.OutboxItem{LineID: "ln_paced", Kind: storage.KindGroupCreate}) }()
	testkit.Eventually(t, 5*time.Second, func() bool { return clock.waitingUntil(start.Add(2 * time.Second)) })
	clock.Advance(time.Second)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// A wait is given up when the worker stops.
	stop, cancel := context.WithCancel(ctx)
	go func() { done <- p.Wait(stop, paced) }()
	testkit.Eventually(t, 5*time.Second, func() bool { return clock.waitingUntil(start.Add(3 * time.Second)) })
	cancel()
	if err := <-done; err != context.Canceled {
		t.Fatalf("wait after stop: %v", err)
	}
}

// TestWorkerPacesALine runs the worker on a clock the test moves: a
// guarded line hands the network one message per pace, the rest waiting
// pending in the queue, while another line sends at once.
func TestWorkerPacesALine(t *testing.T) {
	e := newEnv(t)
	// Ahead of the real clock, so that everything enqueued is due.
	start := time.Now().Add(time.Hour).Truncate(time.Second)
	clock := newFakeClock(start)
	var mu sync.Mutex
	sentAt := map[string][]time.Time{} // by line handle
	record := func(ctx context.Context, out bridge.Outgoing) error {
		mu.Lock()
		defer mu.Unlock()
		sentAt[out.Line] = append(sentAt[out.Line], clock.Now())
		return nil
	}
	fb := &fakeBridge{}
	for range 5 {
		fb.script = append(fb.script, record)
	}
	sends := func(line string) []time.Time {
		mu.Lock()
		defer mu.Unlock()
		return append([]time.Time(nil), sentAt[line]...)
	}

	toAlice, toBob := e.inbound(mainLine, alice, "hi").Chat, e.inbound(mainLine, bob, "hi").Chat
	elsewhere := e.inbound(otherLine, carol, "hi").Chat
	var paced []storage.OutboxItem
	for i, chat := range []storage.Chat{toAlice, toBob, toAlice} {
		paced = append(paced, e.sendText(chat, "paced "+string(rune('a'+i))))
	}
	text := "not paced"
	var other []storage.OutboxItem
	for range 2 {
		other = append(other, e.enqueue(storage.OutboxItem{LineID: e.other.ID, ChatID: elsewhere.ID, Text: &text}))
	}

	w := delivery.NewWorker(e.db, map[string]bridge.Bridge{e.line.ID: fb, e.other.ID: fb}, e.files, delivery.Options{
		RetryBase: time.Millisecond, RetryMax: 4 * time.Millisecond,
		Pace: map[string]time.Duration{e.line.ID: time.Second}, Clock: clock,
	}, quiet)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("worker Run: %v", err)
		}
	})

	// At start: the paced line's first message, and every other line's.
	for _, item := range append([]storage.OutboxItem{paced[0]}, other...) {
		e.wait(item.ID, completed)
	}
	// The paced line's others wait pending in the queue, one per turn:
	// never claimed before it, so not handed to the network either.
	for i, item := range paced[1:] {
		got, _ := e.db.OutboxItemByID(context.Background(), item.ID)
		want := start.Add(time.Duration(i+1) * time.Second).UnixMilli()
		if got.Status != storage.StatusPending || got.Attempts != 0 || got.NextAttemptAt != want {
			t.Fatalf("paced item %d: %s, attempts %d, due %d (want %d)", i+1, got.Status, got.Attempts, got.NextAttemptAt, want)
		}
	}
	if got := len(sends(mainLine)); got != 1 {
		t.Fatalf("%d sends on the paced line at start, want 1", got)
	}
	if got := sends(otherLine); len(got) != 2 || !got[1].Equal(start) {
		t.Fatalf("other line's sends at %v, want both at the start", got)
	}
	for i := range 2 {
		clock.Advance(time.Second)
		e.wait(paced[i+1].ID, completed)
	}
	got := sends(mainLine)
	if len(got) != 3 {
		t.Fatalf("%d sends on the paced line, want 3", len(got))
	}
	for i := 1; i < len(got); i++ {
		if gap := got[i].Sub(got[i-1]); gap < time.Second {
			t.Errorf("sends %d and %d of the paced line %s apart, want at least 1s", i-1, i, gap)
		}
	}
	for _, item := range paced {
		if got, _ := e.db.OutboxItemByID(context.Background(), item.ID); got.Status != storage.StatusSent {
			t.Errorf("item %s: %s %s", item.ID, got.Status, got.Error)
		}
	}
}
