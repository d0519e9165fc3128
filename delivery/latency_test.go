package delivery_test

import (
	"context"
	"testing"
	"time"

	"github.com/blueline-app/blueline/bridge"
	"github.com/blueline-app/blueline/bridge/sim"
	"github.com/blueline-app/blueline/delivery"
	"github.com/blueline-app/blueline/metrics"
	"github.com/blueline-app/blueline/storage"
	"github.com/blueline-app/blueline/testkit"
)

// A message is timed from when it falls due (its send_at when scheduled)
// to the network reporting it sent, by the worker's clock; a typing change
// is not a message and is not timed. A delivered receipt is timed from the
// message's sent date to the receipt's date, once.
func TestLatencyOfSendsAndReceipts(t *testing.T) {
	e := newEnv(t)
	net := sim.New(0)
	m := metrics.New(e.db, quiet)
	e.recv.Latency = m
	chat := e.inbound(mainLine, alice, "hi").Chat
	start := time.Now().Add(time.Second).Truncate(time.Millisecond) // every item below is accepted before it
	clock := newFakeClock(start)

	typing := e.enqueue(storage.OutboxItem{ChatID: chat.ID, Kind: storage.KindTyping, TypingOn: true})
	sendAt := start.Add(time.Minute)
	text := "later"
	later := e.enqueue(storage.OutboxItem{ChatID: chat.ID, Text: &text, SendAt: sendAt.UnixMilli()})
	e.run(net, delivery.Options{Metrics: m, Clock: clock})

	e.wait(typing.ID, completed)
	testkit.Eventually(t, 10*time.Second, func() bool { return clock.waitingUntil(sendAt) })
	clock.Advance(time.Minute + 3*time.Second) // sent 3 s after it fell due
	if item := e.wait(later.ID, completed); item.Status != storage.StatusSent {
		t.Fatalf("scheduled item: %+v", item)
	}
	var q metrics.Quantiles
	testkit.Eventually(t, 10*time.Second, func() bool { // timed just after it is recorded
		q = m.LineLatency(e.line.ID).Stages[metrics.AcceptToSent]
		return q.Count > 0
	})
	if q.Count != 1 || q.P50 != 3*time.Second || q.P99 != 3*time.Second {
		t.Fatalf("accept to sent: %+v, want one of 3s", q)
	}

	// Delivered 2.5 s after it was sent; the same receipt again, and a
	// read receipt, time nothing more.
	sent := e.fromMe(chat.ID)[0]
	u := bridge.MessageUpdate{Line: mainLine, GUID: sent.GUID, DeliveredAt: time.UnixMilli(sent.SentAt + 2500)}
	for range 2 {
		if _, _, err := e.recv.RecordUpdate(context.Background(), u); err != nil {
			t.Fatal(err)
		}
	}
	u.ReadAt = time.UnixMilli(sent.SentAt + 9000)
	if _, _, err := e.recv.RecordUpdate(context.Background(), u); err != nil {
		t.Fatal(err)
	}
	q = m.LineLatency(e.line.ID).Stages[metrics.SentToDelivered]
	if q.Count != 1 || q.P50 != 2500*time.Millisecond || q.P99 != 2500*time.Millisecond {
		t.Fatalf("sent to delivered: %+v, want one of 2.5s", q)
	}
	if q := m.LineLatency(e.line.ID).Stages[metrics.RowToWebhook]; q.Count != 0 {
		t.Errorf("row to webhook without webhooks: %+v", q)
	}
}
