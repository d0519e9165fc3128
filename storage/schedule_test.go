package storage_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/blueline-app/blueline/storage"
)

// enqueueText puts a text to chat in the outbox.
func enqueueText(t *testing.T, db *storage.DB, line storage.Line, chatID string, sendAt int64, guard *storage.GuardLimits) (storage.OutboxItem, error) {
	t.Helper()
	text := "hello"
	item, _, err := db.Enqueue(ctx, storage.EnqueueRequest{Guard: guard, Item: storage.OutboxItem{
		ID: storage.NewID("obx_"), LineID: line.ID, Kind: storage.KindMessage, MaxAttempts: 3, ChatID: chatID, Text: &text, SendAt: sendAt,
	}})
	return item, err
}

func TestScheduledItemWaitsUntilSendAt(t *testing.T) {
	db, line := openDB(t)
	chat := inbound(t, db, line, "+15551110001", 1).Chat
	now := time.Now().UnixMilli()
	at := now + time.Hour.Milliseconds()
	later, err := enqueueText(t, db, line, chat.ID, at, nil)
	if err != nil || later.Status != storage.StatusPending || later.SendAt != at || later.NextAttemptAt != at {
		t.Fatalf("enqueue: %+v %v", later, err)
	}
	soon, _ := enqueueText(t, db, line, chat.ID, 0, nil)

	claimed, next, err := db.ClaimDue(ctx, now+1000, 10)
	if err != nil || len(claimed) != 1 || claimed[0].ID != soon.ID || next != at {
		t.Fatalf("claim before send_at: %+v next %d (want %d) %v", claimed, next, at, err)
	}
	claimed, _, _ = db.ClaimDue(ctx, at, 10)
	if len(claimed) != 1 || claimed[0].ID != later.ID || claimed[0].Attempts != 1 {
		t.Fatalf("claim at send_at: %+v", claimed)
	}
}

func TestCancelOutbox(t *testing.T) {
	db, line := openDB(t)
	chat := inbound(t, db, line, "+15551110001", 1).Chat
	scheduled, _ := enqueueText(t, db, line, chat.ID, time.Now().Add(time.Hour).UnixMilli(), nil)
	due, _ := enqueueText(t, db, line, chat.ID, 0, nil)

	got, err := db.CancelOutbox(ctx, scheduled.ID)
	if err != nil || got.Status != storage.StatusFailed || got.Error != "canceled" || got.CompletedAt == 0 {
		t.Fatalf("cancel: %+v %v", got, err)
	}
	if again, err := db.CancelOutbox(ctx, scheduled.ID); !errors.Is(err, storage.ErrNotPending) || again.Error != "canceled" {
		t.Fatalf("cancel twice: %+v %v", again, err)
	}
	// The cancelled item is gone from the queue: never claimed, not even
	// when it would have been due.
	claimed, next, _ := db.ClaimDue(ctx, 1<<62, 10)
	if len(claimed) != 1 || claimed[0].ID != due.ID || next != 0 {
		t.Fatalf("claim: %+v next %d", claimed, next)
	}
	if _, err := db.CancelOutbox(ctx, due.ID); !errors.Is(err, storage.ErrNotPending) {
		t.Fatalf("cancel a claimed item: %v", err)
	}
	// Waiting for a retry is pending: cancellable.
	if err := db.MarkRetry(ctx, due.ID, "busy", 1<<61); err != nil {
		t.Fatal(err)
	}
	if got, err := db.CancelOutbox(ctx, due.ID); err != nil || got.Error != "canceled" || got.Attempts != 1 {
		t.Fatalf("cancel a retry: %+v %v", got, err)
	}
	if claimed, next, _ := db.ClaimDue(ctx, 1<<62, 10); len(claimed) != 0 || next != 0 {
		t.Fatalf("queue not empty: %+v %d", claimed, next)
	}
	if _, err := db.CancelOutbox(ctx, "obx_nothing"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("cancel an unknown item: %v", err)
	}
}

// TestCancelRacesClaim cancels items while the worker claims them: each
// item is either cancelled (and never claimed) or claimed (and its cancel
// refused), never both, never neither.
func TestCancelRacesClaim(t *testing.T) {
	db, line := openDB(t)
	chat := inbound(t, db, line, "+15551110001", 1).Chat
	for round := range 20 {
		const n = 16
		ids := make([]string, n)
		for i := range ids {
			item, err := enqueueText(t, db, line, chat.ID, 0, nil)
			if err != nil {
				t.Fatal(err)
			}
			ids[i] = item.ID
		}
		var claimed sync.Map
		cancelled := make([]bool, n)
		var wg sync.WaitGroup
		wg.Go(func() {
			for range n {
				items, _, err := db.ClaimDue(ctx, 1<<62, 1)
				if err != nil {
					t.Error(err)
				}
				for _, it := range items {
					claimed.Store(it.ID, true)
				}
			}
		})
		for i, id := range ids {
			wg.Go(func() {
				_, err := db.CancelOutbox(ctx, id)
				switch {
				case err == nil:
					cancelled[i] = true
				case !errors.Is(err, storage.ErrNotPending):
					t.Error(err)
				}
			})
		}
		wg.Wait()
		// Whatever is left is claimed now.
		items, _, _ := db.ClaimDue(ctx, 1<<62, n)
		for _, it := range items {
			claimed.Store(it.ID, true)
		}
		for i, id := range ids {
			_, wasClaimed := claimed.Load(id)
			if wasClaimed == cancelled[i] {
				t.Fatalf("round %d: item %s claimed %v, cancelled %v", round, id, wasClaimed, cancelled[i])
			}
			item, _ := db.OutboxItemByID(ctx, id)
			if want := map[bool]string{true: storage.StatusFailed, false: storage.StatusClaimed}[cancelled[i]]; item.Status != want {
				t.Fatalf("round %d: item %s is %s, want %s", round, id, item.Status, want)
			}
		}
	}
}

// holdLine is a storage.Pace that holds one line's items until a time.
type holdLine struct {
	line   string
	until  int64
	starts int
}

func (h *holdLine) Start(now int64) { h.starts++ }
func (h *holdLine) Hold(item storage.OutboxItem) int64 {
	if item.LineID == h.line {
		return h.until
	}
	return 0
}

func TestClaimDuePacedHoldsItemsPending(t *testing.T) {
	db, err := storage.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	lines, err := db.SyncLines(ctx, []storage.Line{{Handle: "+15550000001", Service: "imessage", Bridge: "sim"},
		{Handle: "+15550000002", Service: "imessage", Bridge: "sim"}})
	if err != nil {
		t.Fatal(err)
	}
	paced, other := lines[0], lines[1]
	a, _ := enqueueText(t, db, paced, inbound(t, db, paced, "+15551110001", 1).Chat.ID, 0, nil)
	b, _ := enqueueText(t, db, other, inbound(t, db, other, "+15551110001", 1).Chat.ID, 0, nil)
	now := time.Now().Add(time.Minute).UnixMilli()
	h := &holdLine{line: paced.ID, until: now + 5000}
	claimed, next, err := db.ClaimDuePaced(ctx, now, 10, h)
	if err != nil || len(claimed) != 1 || claimed[0].ID != b.ID || next != now+5000 || h.starts == 0 {
		t.Fatalf("claim: %+v next %d %v", claimed, next, err)
	}
	held, _ := db.OutboxItemByID(ctx, a.ID)
	if held.Status != storage.StatusPending || held.Attempts != 0 || held.NextAttemptAt != now+5000 {
		t.Fatalf("held item: %+v", held)
	}
	// Held, it can still be cancelled; its place in the queue is gone.
	if _, err := db.CancelOutbox(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	if claimed, next, _ := db.ClaimDue(ctx, 1<<62, 10); len(claimed) != 0 || next != 0 {
		t.Fatalf("queue not empty: %+v %d", claimed, next)
	}
}

func TestGuardCaps(t *testing.T) {
	db, line := openDB(t)
	now := time.Now().UnixMilli()
	alice := inbound(t, db, line, "+15551110001", now).Chat
	limits := &storage.GuardLimits{Enforce: true, MaxUnanswered: 3, MaxRatio: 4, MaxColdContacts: 1}
	send := func(chatID string) error {
		t.Helper()
		_, err := enqueueText(t, db, line, chatID, 0, limits)
		return err
	}
	mustSend := func(chatID string, n int) {
		t.Helper()
		for range n {
			if err := send(chatID); err != nil {
				t.Fatal(err)
			}
		}
	}
	refusedBy := func(err error) string {
		var ge *storage.GuardError
		if errors.As(err, &ge) {
			return ge.Limit
		}
		return "no guard error: " + errStr(err)
	}
	today := func() storage.GuardDay {
		d, err := db.GuardToday(ctx, line.ID, time.Now().UnixMilli())
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	// Unanswered: three, then refused until alice writes.
	mustSend(alice.ID, 3)
	if got := refusedBy(send(alice.ID)); got != storage.GuardUnanswered {
		t.Fatalf("fourth unanswered: %s", got)
	}
	if n, _ := db.GuardUnanswered(ctx, alice.ID); n != 3 {
		t.Fatalf("unanswered %d, want 3", n)
	}
	inbound(t, db, line, "+15551110001", now+1)
	mustSend(alice.ID, 1)
	if d := today(); d != (storage.GuardDay{Sent: 4, Received: 2}) {
		t.Fatalf("today: %+v", d)
	}
	// Cold contacts: bob and carol last wrote two days ago; one a day, as
	// often as need be.
	bob := inbound(t, db, line, "+15551110002", now-48*time.Hour.Milliseconds()).Chat
	carol := inbound(t, db, line, "+15551110003", now-48*time.Hour.Milliseconds()).Chat
	mustSend(bob.ID, 2)
	if got := refusedBy(send(carol.ID)); got != storage.GuardColdContacts {
		t.Fatalf("second cold contact: %s", got)
	}
	// Ratio: 2 received today (the old ones do not count), so 8 sends.
	mustSend(alice.ID, 1)
	mustSend(bob.ID, 1)
	if got := refusedBy(send(alice.ID)); got != storage.GuardRatio {
		t.Fatalf("over the ratio: %s", got)
	}
	want := storage.GuardDay{Sent: 8, Received: 2, ColdContacts: 1}
	if d := today(); d != want {
		t.Fatalf("today: %+v, want %+v", d, want)
	}
	// A cancelled message gives its place back.
	last, err := enqueueText(t, db, line, alice.ID, 0, nil) // not enforced: counted all the same
	if err != nil || today().Sent != 9 {
		t.Fatalf("unenforced send: %v, %+v", err, today())
	}
	if _, err := db.CancelOutbox(ctx, last.ID); err != nil {
		t.Fatal(err)
	}
	if d := today(); d != want {
		t.Fatalf("after a cancel: %+v, want %+v", d, want)
	}
	if n, _ := db.GuardUnanswered(ctx, alice.ID); n != 2 {
		t.Fatalf("alice's unanswered after a cancel: %d, want 2", n)
	}
	// Not enforced, nothing is refused.
	if _, err := enqueueText(t, db, line, carol.ID, 0, &storage.GuardLimits{MaxColdContacts: 1}); err != nil {
		t.Fatalf("guard off: %v", err)
	}
}

func TestGuardLearnsOldChats(t *testing.T) {
	db, line := openDB(t)
	// History from before the guard (imported: no counts kept): the chat's
	// state is read from its latest messages.
	chat := storage.Chat{ID: storage.NewID("cht_"), LineID: line.ID, GUID: "iMessage;-;+15551110001", Identifier: "+15551110001", Service: "imessage"}
	msg := func(from string, at int64) storage.Inbound {
		text := "m"
		return storage.Inbound{Chat: chat, Message: storage.Message{ID: storage.NewID("msg_"), GUID: storage.NewID("guid_"),
			Sender: from, IsFromMe: from == line.Handle, Text: &text, SentAt: at}}
	}
	if _, err := db.ImportHistory(ctx, line.ID, []storage.Inbound{msg("+15551110001", 10), msg(line.Handle, 11),
		msg(line.Handle, 12), msg(line.Handle, 13)}); err != nil {
		t.Fatal(err)
	}
	stored, err := db.ChatByGUID(ctx, line.ID, chat.GUID)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := db.GuardUnanswered(ctx, stored.ID); n != 3 || err != nil {
		t.Fatalf("unanswered %d %v, want 3", n, err)
	}
}

func errStr(err error) string {
	if err == nil {
		return "nil"
	}
	return err.Error()
}
