package storage_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/blueline-app/blueline/storage"
)

var ctx = context.Background()

func openDB(t *testing.T) (*storage.DB, storage.Line) {
	t.Helper()
	db, err := storage.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	lines, err := db.SyncLines(ctx, []storage.Line{{Handle: "+15550000001", Service: "imessage", Bridge: "sim"}})
	if err != nil {
		t.Fatal(err)
	}
	return db, lines[0]
}

func inbound(t *testing.T, db *storage.DB, line storage.Line, from string, sentAt int64) storage.InboundResult {
	t.Helper()
	text := fmt.Sprint("at ", sentAt)
	res, err := db.RecordInbound(ctx, storage.Inbound{
		Chat:    storage.Chat{ID: storage.NewID("cht_"), LineID: line.ID, GUID: "iMessage;-;" + from, Identifier: from, Service: "imessage"},
		Message: storage.Message{ID: storage.NewID("msg_"), GUID: storage.NewID("guid_"), Sender: from, Text: &text, SentAt: sentAt},
	})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestOpenTwiceIsRefused(t *testing.T) {
	dir := t.TempDir()
	db, err := storage.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := storage.Open(dir); err == nil {
		t.Fatal("a second Open of a held database succeeded")
	}
}

// Messages with equal or out-of-order sent_at page by sent_at then arrival,
// and pages of every size cover the chat exactly once.
func TestListMessagesPaging(t *testing.T) {
	db, line := openDB(t)
	times := []int64{5, 3, 3, 9, 1, 9, 7}
	var chatID string
	for _, at := range times {
		chatID = inbound(t, db, line, "+15551110001", at).Chat.ID
	}
	want := []string{"at 9", "at 9", "at 7", "at 5", "at 3", "at 3", "at 1"}
	for limit := 1; limit <= len(times)+1; limit++ {
		var got []string
		var after []byte
		for pages := 0; ; pages++ {
			msgs, next, err := db.ListMessages(ctx, chatID, after, limit)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range msgs {
				got = append(got, *m.Text)
			}
			if next == nil {
				break
			}
			if len(msgs) != limit || pages > len(times) {
				t.Fatalf("limit %d: page of %d with a cursor", limit, len(msgs))
			}
			after = next
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("limit %d: %v, want %v", limit, got, want)
		}
	}
	if _, _, err := db.ListMessages(ctx, chatID, []byte("short"), 10); !errors.Is(err, storage.ErrBadCursor) {
		t.Fatalf("bad cursor: %v", err)
	}
	// A chat ID that is a prefix-neighbour sees nothing of this chat.
	if msgs, _, err := db.ListMessages(ctx, storage.NewID("cht_"), nil, 10); err != nil || len(msgs) != 0 {
		t.Fatalf("other chat: %v %v", msgs, err)
	}
}

func TestRecordInboundDeduplicatesGUID(t *testing.T) {
	db, line := openDB(t)
	text := "once"
	in := storage.Inbound{
		Chat:    storage.Chat{ID: storage.NewID("cht_"), LineID: line.ID, GUID: "iMessage;-;+15551110001", Identifier: "+15551110001"},
		Message: storage.Message{ID: storage.NewID("msg_"), GUID: "SAME-GUID", Sender: "+15551110001", Text: &text, SentAt: 1},
	}
	first, err := db.RecordInbound(ctx, in)
	if err != nil || first.Duplicate {
		t.Fatal(first, err)
	}
	in.Message.ID = storage.NewID("msg_")
	second, err := db.RecordInbound(ctx, in)
	if err != nil || !second.Duplicate || second.Message.ID != first.Message.ID {
		t.Fatalf("second record: %+v %v", second, err)
	}
	msgs, _, _ := db.ListMessages(ctx, first.Chat.ID, nil, 10)
	if len(msgs) != 1 {
		t.Fatalf("%d messages stored", len(msgs))
	}
}

func TestOutboxLifecycle(t *testing.T) {
	db, line := openDB(t)
	chat := inbound(t, db, line, "+15551110001", 1).Chat
	text := "hello"
	enqueue := func() storage.OutboxItem {
		item, replayed, err := db.Enqueue(ctx, storage.EnqueueRequest{Item: storage.OutboxItem{
			ID: storage.NewID("obx_"), LineID: line.ID, Kind: storage.KindMessage, MaxAttempts: 3, ChatID: chat.ID, Text: &text,
		}})
		if err != nil || replayed || item.Status != storage.StatusPending {
			t.Fatal(item, replayed, err)
		}
		return item
	}
	a, b := enqueue(), enqueue()

	claimed, _, err := db.ClaimDue(ctx, 1<<62, 1)
	if err != nil || len(claimed) != 1 || claimed[0].ID != a.ID || claimed[0].Attempts != 1 || claimed[0].Status != storage.StatusClaimed {
		t.Fatalf("claim: %+v %v", claimed, err)
	}
	// Retry a later: b is now first in line.
	if err := db.MarkRetry(ctx, a.ID, "busy", 1<<61); err != nil {
		t.Fatal(err)
	}
	claimed, next, err := db.ClaimDue(ctx, 1<<60, 10)
	if err != nil || len(claimed) != 1 || claimed[0].ID != b.ID || next != 1<<61 {
		t.Fatalf("claim before a's retry is due: %+v next %d %v", claimed, next, err)
	}
	msg := storage.Message{ID: storage.NewID("msg_"), GUID: "G", Sender: line.Handle, Text: &text, IsFromMe: true, SentAt: 2}
	if err := db.MarkSent(ctx, storage.Sent{OutboxID: b.ID, Message: msg}); err != nil {
		t.Fatal(err)
	}
	item, err := db.OutboxItemByID(ctx, b.ID)
	stored, _ := db.MessageByGUID(ctx, "G")
	if err != nil || item.Status != storage.StatusSent || item.CompletedAt == 0 || item.MessageID != msg.ID ||
		stored.OutboxID != b.ID || stored.ChatID != chat.ID {
		t.Fatalf("sent: %+v %+v %v", item, stored, err)
	}
	if err := db.MarkSent(ctx, storage.Sent{OutboxID: b.ID, Message: msg}); err == nil {
		t.Fatal("an item was marked sent twice")
	}
	// a is claimed again and the daemon "dies": recovery makes it due.
	claimed, _, _ = db.ClaimDue(ctx, 1<<62, 10)
	if len(claimed) != 1 || claimed[0].Attempts != 2 {
		t.Fatalf("second claim of a: %+v", claimed)
	}
	if n, err := db.RecoverClaimed(ctx); n != 1 || err != nil {
		t.Fatalf("recover: %d %v", n, err)
	}
	claimed, _, _ = db.ClaimDue(ctx, 1<<62, 10)
	if len(claimed) != 1 || claimed[0].ID != a.ID || claimed[0].Attempts != 3 {
		t.Fatalf("claim after recovery: %+v", claimed)
	}
	failed, err := db.MarkFailed(ctx, a.ID, "gave up")
	if err != nil || failed.Status != storage.StatusFailed || failed.Error != "gave up" || failed.CompletedAt == 0 {
		t.Fatalf("failed: %+v %v", failed, err)
	}
	if claimed, next, _ := db.ClaimDue(ctx, 1<<62, 10); len(claimed) != 0 || next != 0 {
		t.Fatalf("queue not empty: %+v %d", claimed, next)
	}
}

func openSandboxDB(t *testing.T) (*storage.DB, storage.Line) {
	t.Helper()
	db, err := storage.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	lines, err := db.SyncLines(ctx, []storage.Line{{Handle: "+15550000000", IsSandbox: true, Service: "imessage", Bridge: "sim"}})
	if err != nil {
		t.Fatal(err)
	}
	return db, lines[0]
}

func TestSandboxQuotaAndIdempotency(t *testing.T) {
	db, sandbox := openSandboxDB(t)
	req := func(idem, hash, owner string) storage.EnqueueRequest {
		return storage.EnqueueRequest{
			Item:           storage.OutboxItem{ID: storage.NewID("obx_"), LineID: sandbox.ID, MaxAttempts: 1},
			IdempotencyKey: idem, RequestHash: []byte(hash), SandboxDay: "2026-11-21", SandboxQuota: 2, SandboxOwner: owner,
		}
	}
	first, _, err := db.Enqueue(ctx, req("k", "h1", "a"))
	if err != nil {
		t.Fatal(err)
	}
	again, replayed, err := db.Enqueue(ctx, req("k", "h1", "a"))
	if err != nil || !replayed || again.ID != first.ID {
		t.Fatalf("replay: %v %v %v", again.ID, replayed, err)
	}
	if _, _, err := db.Enqueue(ctx, req("k", "h2", "a")); !errors.Is(err, storage.ErrIdempotencyMismatch) {
		t.Fatalf("mismatch: %v", err)
	}
	if _, _, err := db.Enqueue(ctx, req("", "", "a")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := db.Enqueue(ctx, req("", "", "a")); !errors.Is(err, storage.ErrSandboxQuota) {
		t.Fatalf("third send of a quota of 2: %v", err)
	}
	// Each owner has its own quota.
	if _, _, err := db.Enqueue(ctx, req("", "", "b")); err != nil {
		t.Fatalf("owner b's first send: %v", err)
	}
	if n, _ := db.SandboxSends(ctx, "a", "2026-11-21"); n != 2 {
		t.Fatalf("counted %d sends of a", n)
	}
	if n, _ := db.SandboxSends(ctx, "b", "2026-11-21"); n != 1 {
		t.Fatalf("counted %d sends of b", n)
	}
	// A new day starts from zero and forgets the old days; an owner's
	// first send of the day leaves the others' counts of that day alone.
	for _, owner := range []string{"b", "a"} {
		r := req("", "", owner)
		r.SandboxDay = "2026-11-22"
		if _, _, err := db.Enqueue(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if n, _ := db.SandboxSends(ctx, "a", "2026-11-21"); n != 0 {
		t.Fatalf("old day kept %d", n)
	}
	if a, b := sends(t, db, "a", "2026-11-22"), sends(t, db, "b", "2026-11-22"); a != 1 || b != 1 {
		t.Fatalf("today: a %d, b %d; want 1 each", a, b)
	}
}

func sends(t *testing.T, db *storage.DB, owner, day string) int {
	t.Helper()
	n, err := db.SandboxSends(ctx, owner, day)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// Each owner activates with its own code and pairs with its own phone; a
// phone pairs once, with one owner.
func TestSandboxOwners(t *testing.T) {
	db, sandbox := openSandboxDB(t)
	if _, _, err := db.StartSandbox(ctx, ""); !errors.Is(err, storage.ErrNoOwner) {
		t.Fatalf("a sandbox without owner: %v", err)
	}
	a, created, err := db.StartSandbox(ctx, "a")
	if err != nil || !created {
		t.Fatal(created, err)
	}
	if again, created, _ := db.StartSandbox(ctx, "a"); again.ActivationCode != a.ActivationCode || created {
		t.Fatalf("starting again changed the code %s to %s (created %v)", a.ActivationCode, again.ActivationCode, created)
	}
	b, _, err := db.StartSandbox(ctx, "b")
	if err != nil || b.ActivationCode == a.ActivationCode {
		t.Fatalf("b's code %s (a's %s): %v", b.ActivationCode, a.ActivationCode, err)
	}
	text := func(from, body string) storage.InboundResult {
		t.Helper()
		res, err := db.RecordInbound(ctx, storage.Inbound{
			Chat:    storage.Chat{ID: storage.NewID("cht_"), LineID: sandbox.ID, GUID: "SMS;-;" + from, Identifier: from, Service: "sms"},
			Message: storage.Message{ID: storage.NewID("msg_"), GUID: storage.NewID("guid_"), Sender: from, Text: &body, SentAt: 1},
		})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := text("+15551110001", "code "+strings.ToLower(a.ActivationCode)); !res.SandboxActivated {
		t.Fatal("a's code did not activate")
	}
	// The same phone cannot take b's code too.
	if res := text("+15551110001", b.ActivationCode); res.SandboxActivated {
		t.Fatal("a paired phone paired again")
	}
	if res := text("+15551110002", b.ActivationCode); !res.SandboxActivated {
		t.Fatal("b's code did not activate")
	}
	// A used code pairs nobody else.
	if res := text("+15551110003", a.ActivationCode); res.SandboxActivated {
		t.Fatal("a used code activated again")
	}
	for phone, want := range map[string]string{"+15551110001": "a", "+15551110002": "b", "+15551110003": ""} {
		if got, err := db.SandboxOwner(ctx, phone); err != nil || got != want {
			t.Fatalf("owner of %s: %q, %v; want %q", phone, got, err, want)
		}
	}
	st, ok, err := db.Sandbox(ctx, "b")
	if err != nil || !ok || !st.Activated || st.PairedHandle != "+15551110002" {
		t.Fatalf("b's sandbox: %+v %v %v", st, ok, err)
	}
	if _, ok, _ := db.Sandbox(ctx, "c"); ok {
		t.Fatal("an owner that never started has a sandbox")
	}
	all, err := db.SandboxStates(ctx)
	if err != nil || len(all) != 2 || all[0].Owner != "a" || all[1].Owner != "b" {
		t.Fatalf("all sandboxes: %+v %v", all, err)
	}
}

func TestIDsSortByCreation(t *testing.T) {
	prev := storage.NewID("obx_")
	for range 1000 {
		id := storage.NewID("obx_")
		if !storage.ValidID(id, "obx_") || len(id) != len("obx_")+storage.IDLen {
			t.Fatalf("malformed %q", id)
		}
		if id[:12] < prev[:12] { // the time part never goes back
			t.Fatalf("%s sorts before the earlier %s", id, prev)
		}
		prev = id
	}
	if storage.NewID("x_") == storage.NewID("x_") {
		t.Fatal("two IDs in the same millisecond are equal")
	}
}
