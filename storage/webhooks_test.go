package storage_test

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/storage"
)

func createWebhook(t *testing.T, db *storage.DB, line storage.Line, events ...string) storage.Webhook {
	t.Helper()
	w := storage.Webhook{ID: storage.NewID("wh_"), LineIDs: []string{line.ID}, URL: "https://example.com/h", Events: events, Secret: "s", IsActive: true}
	if err := db.CreateWebhook(ctx, w); err != nil {
		t.Fatal(err)
	}
	return w
}

func due(t *testing.T, db *storage.DB, w storage.Webhook) []storage.DueDelivery {
	t.Helper()
	d, _, err := db.DueDeliveries(ctx, w.ID, time.Now().Add(time.Hour).UnixMilli(), 100, func(string) bool { return false })
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// Storing a message queues its event for exactly the webhooks of its line
// that subscribe to it, in the same call.
func TestEventsQueuedWithTheirMessage(t *testing.T) {
	db, line := openDB(t)
	others, err := db.SyncLines(ctx, []storage.Line{line, {Handle: "+15550000002", Service: "imessage", Bridge: "sim"}})
	if err != nil {
		t.Fatal(err)
	}
	all := createWebhook(t, db, line, api.WebhookEvents...)
	sentOnly := createWebhook(t, db, line, api.EventMessageSent)
	elsewhere := createWebhook(t, db, others[1], api.WebhookEvents...)

	res := inbound(t, db, line, "+15551110001", 10)
	d := due(t, db, all)
	if len(d) != 1 || d[0].Event != api.EventMessageReceived || d[0].Message == nil || d[0].Message.ID != res.Message.ID ||
		d[0].ChatID != res.Chat.ID || d[0].Status != storage.DeliveryPending {
		t.Fatalf("queued %+v", d)
	}
	if n := len(due(t, db, sentOnly)) + len(due(t, db, elsewhere)); n != 0 {
		t.Fatalf("%d deliveries for webhooks that did not ask", n)
	}
	// A duplicate GUID stores nothing and queues nothing.
	if _, err := db.RecordInbound(ctx, storage.Inbound{Chat: res.Chat, Message: res.Message}); err != nil {
		t.Fatal(err)
	}
	if n := len(due(t, db, all)); n != 1 {
		t.Fatalf("a duplicate queued another delivery (%d)", n)
	}
	// Reactions queue theirs only when they change something.
	r := storage.Reaction{MessageID: res.Message.ID, ChatID: res.Chat.ID, LineID: line.ID, Type: "love", Sender: "+15551110001", Added: true, SentAt: 20}
	for range 2 {
		if _, _, err := db.ApplyReaction(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	r.Added, r.SentAt = false, 30
	if _, _, err := db.ApplyReaction(ctx, r); err != nil {
		t.Fatal(err)
	}
	var events []string
	for _, dd := range due(t, db, all) {
		events = append(events, dd.Event)
	}
	if len(events) != 3 || events[1] != api.EventReactionAdded || events[2] != api.EventReactionRemoved {
		t.Fatalf("events %v", events)
	}
}

// A webhook of several lines gets the events of each, and leaves every
// line's list when deleted.
func TestWebhookOfSeveralLines(t *testing.T) {
	db, line := openDB(t)
	lines, err := db.SyncLines(ctx, []storage.Line{line, {Handle: "+15550000002", Service: "imessage", Bridge: "sim"},
		{Handle: "+15550000003", Service: "imessage", Bridge: "sim"}})
	if err != nil {
		t.Fatal(err)
	}
	w := storage.Webhook{ID: storage.NewID("wh_"), LineIDs: []string{lines[0].ID, lines[1].ID}, URL: "https://example.com/h",
		Events: []string{api.EventMessageReceived}, Secret: "s", IsActive: true}
	if err := db.CreateWebhook(ctx, w); err != nil {
		t.Fatal(err)
	}
	for _, l := range lines {
		inbound(t, db, l, "+15551110001", 10)
	}
	var got []string
	for _, d := range due(t, db, w) {
		got = append(got, d.LineID)
	}
	if want := []string{lines[0].ID, lines[1].ID}; !slices.Equal(got, want) {
		t.Fatalf("deliveries for lines %v, want %v", got, want)
	}
	for i, l := range lines {
		want := 1
		if i == 2 {
			want = 0
		}
		hooks, err := db.Webhooks(ctx, l.ID)
		if err != nil || len(hooks) != want {
			t.Errorf("line %d lists %+v (%v)", i, hooks, err)
		}
	}
	if err := db.DeleteWebhook(ctx, w.ID); err != nil {
		t.Fatal(err)
	}
	for _, l := range lines {
		if hooks, err := db.Webhooks(ctx, l.ID); err != nil || len(hooks) != 0 {
			t.Errorf("deleted, still listed: %+v (%v)", hooks, err)
		}
	}
}

// A webhook stored before webhooks had several lines reads as one of its
// one line.
func TestWebhookOfOneLineRecord(t *testing.T) {
	var w storage.Webhook
	if err := json.Unmarshal([]byte(`{"id":"wh_a","line_id":"ln_a","url":"https://example.com/h","events":["message.received"],"is_active":true}`), &w); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(w.LineIDs, []string{"ln_a"}) || w.ID != "wh_a" || !w.IsActive || len(w.Events) != 1 {
		t.Fatalf("read %+v", w)
	}
}

func TestRecordAttempts(t *testing.T) {
	db, line := openDB(t)
	w := createWebhook(t, db, line, api.EventMessageReceived)
	inbound(t, db, line, "+15551110001", 10)
	inbound(t, db, line, "+15551110002", 11)
	d := due(t, db, w)
	now := time.Now().UnixMilli()
	fail := storage.Attempt{At: now, StatusCode: 500, Error: "HTTP 500"}

	// A failure with a retry reschedules; a postponement reschedules without
	// counting an attempt.
	_, err := db.RecordAttempts(ctx, time.Hour.Milliseconds(),
		storage.AttemptResult{Delivery: d[0], Attempt: fail, RetryAt: now + 1000},
		storage.AttemptResult{Delivery: d[1], Postpone: true, RetryAt: now + 2000})
	if err != nil {
		t.Fatal(err)
	}
	next := due(t, db, w)
	if len(next) != 2 || next[0].ID != d[0].ID || next[0].Attempts != 1 || next[0].NextAttemptAt != now+1000 || next[0].LastStatus != 500 ||
		next[1].Attempts != 0 || next[1].NextAttemptAt != now+2000 {
		t.Fatalf("after a failure and a postponement: %+v", next)
	}
	if got, _ := db.WebhookByID(ctx, w.ID); got.FailingSince != now {
		t.Errorf("failing since %d, want %d", got.FailingSince, now)
	}
	// A result recorded twice (its key is gone) is dropped.
	if _, err := db.RecordAttempts(ctx, time.Hour.Milliseconds(), storage.AttemptResult{Delivery: d[0], Attempt: fail}); err != nil {
		t.Fatal(err)
	}
	if got, _ := db.DeliveryByID(ctx, d[0].ID); got.Attempts != 1 || got.Status != storage.DeliveryPending {
		t.Fatalf("a stale result was recorded: %+v", got)
	}
	// Success clears the failing run.
	ok := storage.Attempt{At: now + 1000, StatusCode: 200}
	if _, err := db.RecordAttempts(ctx, time.Hour.Milliseconds(), storage.AttemptResult{Delivery: next[0], Attempt: ok}); err != nil {
		t.Fatal(err)
	}
	got, _ := db.DeliveryByID(ctx, d[0].ID)
	hook, _ := db.WebhookByID(ctx, w.ID)
	if got.Status != storage.DeliverySucceeded || got.Attempts != 2 || got.CompletedAt == 0 || hook.FailingSince != 0 {
		t.Fatalf("after success: %+v, webhook %+v", got, hook)
	}
	attempts, err := db.Attempts(ctx, storage.AttemptFilter{DeliveryID: d[0].ID, Limit: 10})
	if err != nil || len(attempts) != 2 || attempts[0].N != 2 || attempts[1].N != 1 || attempts[1].StatusCode != 500 {
		t.Fatalf("attempts %+v %v", attempts, err)
	}

	// Redeliver a finished delivery: due again, attempts keep counting.
	if _, err := db.Redeliver(ctx, d[0].ID); err != nil {
		t.Fatal(err)
	}
	if n := len(due(t, db, w)); n != 2 {
		t.Fatalf("%d due after redeliver", n)
	}

	// Failing for longer than disableAfter disables the webhook and fails
	// what it still had pending.
	old := storage.Attempt{At: now - 10_000, Error: "no answer"}
	current := due(t, db, w)
	disabled, err := db.RecordAttempts(ctx, 5_000, storage.AttemptResult{Delivery: current[0], Attempt: old, RetryAt: now + 1000})
	if err != nil || len(disabled) != 1 || disabled[0] != w.ID {
		t.Fatalf("disabled %v, %v", disabled, err)
	}
	hook, _ = db.WebhookByID(ctx, w.ID)
	if hook.IsActive || hook.DisabledAt == 0 || len(due(t, db, w)) != 0 {
		t.Fatalf("webhook after failing too long: %+v", hook)
	}
	for _, dd := range current {
		if got, _ := db.DeliveryByID(ctx, dd.ID); got.Status != storage.DeliveryFailed {
			t.Errorf("delivery %s is %s", dd.ID, got.Status)
		}
	}
	if _, err := db.Redeliver(ctx, d[0].ID); !errors.Is(err, storage.ErrWebhookInactive) {
		t.Errorf("redeliver to an inactive webhook: %v", err)
	}
	// An inactive webhook queues nothing more.
	inbound(t, db, line, "+15551110003", 12)
	if n := len(due(t, db, w)); n != 0 {
		t.Errorf("an inactive webhook got %d deliveries", n)
	}

	// Purge forgets finished deliveries and attempts older than the cutoff.
	n, err := db.PurgeDeliveries(ctx, time.Now().Add(time.Minute).UnixMilli())
	if err != nil || n != 2 {
		t.Fatalf("purged %d, %v", n, err)
	}
	if _, err := db.DeliveryByID(ctx, d[0].ID); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("purged delivery still there: %v", err)
	}
	if a, _ := db.Attempts(ctx, storage.AttemptFilter{Limit: 10}); len(a) != 0 {
		t.Errorf("attempts after purge: %+v", a)
	}
}

func TestDeleteWebhookDropsPending(t *testing.T) {
	db, line := openDB(t)
	w := createWebhook(t, db, line, api.EventMessageReceived)
	inbound(t, db, line, "+15551110001", 10)
	d := due(t, db, w)
	if err := db.DeleteWebhook(ctx, w.ID); err != nil {
		t.Fatal(err)
	}
	if got, _ := db.DeliveryByID(ctx, d[0].ID); got.Status != storage.DeliveryFailed || got.LastError == "" {
		t.Fatalf("pending delivery of a deleted webhook: %+v", got)
	}
	if hooks, _ := db.Webhooks(ctx, line.ID); len(hooks) != 0 {
		t.Fatalf("still listed: %+v", hooks)
	}
	if err := db.DeleteWebhook(ctx, w.ID); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
	// The dispatcher may still report an attempt it had under way.
	if _, err := db.RecordAttempts(ctx, 1000, storage.AttemptResult{Delivery: d[0], Attempt: storage.Attempt{At: 1}}); err != nil {
		t.Fatalf("late result for a deleted webhook: %v", err)
	}
}
