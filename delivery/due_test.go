package delivery_test

import (
	"context"
	"testing"
	"time"

	"github.com/blueline-app/blueline/delivery"
	"github.com/blueline-app/blueline/storage"
	"github.com/blueline-app/blueline/testkit"
)

// An agent key's message scheduled into another key's lease is failed
// chat_leased when it falls due by the worker's clock, and never handed
// to the network; the same key's message due after the lease expired is
// sent.
func TestWorkerChecksAgentRulesWhenDue(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	chat := e.inbound(mainLine, alice, "hi").Chat
	start := time.Now().Add(time.Second).Truncate(time.Millisecond) // every item below is accepted before it
	clock := newFakeClock(start)
	leaseEnd := start.Add(time.Hour)
	schedule := func(text string, at time.Time) storage.OutboxItem {
		t.Helper()
		item, _, err := e.db.Enqueue(ctx, storage.EnqueueRequest{
			Item: storage.OutboxItem{ID: storage.NewID("obx_"), LineID: e.line.ID, Kind: storage.KindMessage, ChatID: chat.ID, Text: &text,
				SendAt: at.UnixMilli(), MaxAttempts: 3},
			Agent: &storage.AgentCheck{KeyID: "key_a", ChatID: chat.ID, Now: time.Now().UnixMilli()},
		})
		if err != nil {
			t.Fatal(err)
		}
		return item
	}
	inLease := schedule("while key_b holds the chat", start.Add(time.Minute))
	afterLease := schedule("once the lease is over", leaseEnd)
	// Taken once both were accepted.
	if _, err := e.db.AcquireLease(ctx, storage.Lease{ChatID: chat.ID, LineID: e.line.ID, KeyID: "key_b", ExpiresAt: leaseEnd.UnixMilli()},
		false, time.Now().UnixMilli()); err != nil {
		t.Fatal(err)
	}
	fb := &fakeBridge{}
	e.run(fb, delivery.Options{Clock: clock})

	testkit.Eventually(t, 10*time.Second, func() bool { return clock.waitingUntil(start.Add(time.Minute)) })
	clock.Advance(time.Minute)
	if item := e.wait(inLease.ID, completed); item.Status != storage.StatusFailed || item.Error != "chat_leased" || item.Attempts != 0 {
		t.Fatalf("the item due inside the lease: %+v; want failed chat_leased, never attempted", item)
	}
	testkit.Eventually(t, 10*time.Second, func() bool { return clock.waitingUntil(leaseEnd) })
	clock.Advance(leaseEnd.Sub(clock.Now()))
	if item := e.wait(afterLease.ID, completed); item.Status != storage.StatusSent {
		t.Fatalf("the item due after the lease: %+v; want sent", item)
	}
	if out := fb.handed(); len(out) != 1 || out[0].Text != "once the lease is over" {
		t.Fatalf("the bridge was handed %+v; want only the message due after the lease", out)
	}
}
