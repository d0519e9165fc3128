package storage_test

import (
	"slices"
	"testing"
	"time"

	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/storage"
)

// scheduleAgent enqueues agent key keyID's message to chat c, due at
// sendAt, accepted as at sendAt.
func scheduleAgent(t *testing.T, db *storage.DB, line storage.Line, c storage.Chat, keyID string, sendAt int64) storage.OutboxItem {
	t.Helper()
	text := "agent reply, later"
	item, _, err := db.Enqueue(ctx, storage.EnqueueRequest{
		Item:  storage.OutboxItem{ID: storage.NewID("obx_"), LineID: line.ID, Kind: storage.KindMessage, ChatID: c.ID, Text: &text, SendAt: sendAt, MaxAttempts: 1},
		Agent: &storage.AgentCheck{KeyID: keyID, ChatID: c.ID, Now: sendAt},
	})
	if err != nil {
		t.Fatal(err)
	}
	return item
}

// claimAt claims what is due at now and returns the IDs claimed.
func claimAt(t *testing.T, db *storage.DB, now int64) []string {
	t.Helper()
	items, _, err := db.ClaimDue(ctx, now, 100)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, it := range items {
		ids = append(ids, it.ID)
	}
	return ids
}

// outcome is an item's status, error and approval as stored.
func outcome(t *testing.T, db *storage.DB, id string) storage.OutboxItem {
	t.Helper()
	item, err := db.OutboxItemByID(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return item
}

// An agent key's scheduled message that the owner's takeover, another
// key's lease, an opt-out or a block now refuses is failed with the API's
// code when it falls due, in the claim, and never claimed; a non-agent
// key's, and the agent's own lease, pass.
func TestDueAgentItemsCheckedAgain(t *testing.T) {
	db, line, c := openAgentDB(t, t.TempDir())
	now := time.Now().UnixMilli()
	sendAt := now + 1000

	taken := scheduleAgent(t, db, line, c, "key_a", sendAt)
	human, err := enqueueText(t, db, line, c.ID, sendAt, nil)
	if err != nil {
		t.Fatal(err)
	}
	ownerSends(t, db, line, c, now+10)
	if got := claimAt(t, db, sendAt); !slices.Equal(got, []string{human.ID}) {
		t.Fatalf("claimed %q under the owner's takeover; want only the non-agent key's %s", got, human.ID)
	}
	if it := outcome(t, db, taken.ID); it.Status != storage.StatusFailed || it.Error != "human_active" || it.Attempts != 0 || it.CompletedAt != sendAt {
		t.Fatalf("agent item after the takeover: %+v; want failed human_active, never attempted", it)
	}
	if got, next, err := db.ClaimDue(ctx, 1<<62, 100); err != nil || len(got) != 0 || next != 0 {
		t.Fatalf("due queue after: %v, next %d, %v; want empty", got, next, err)
	}

	// After the window: another key's lease refuses, the key's own passes.
	after := now + 10 + quiet
	leased := scheduleAgent(t, db, line, c, "key_a", after)
	own := scheduleAgent(t, db, line, c, "key_b", after)
	if _, err := db.AcquireLease(ctx, storage.Lease{ChatID: c.ID, LineID: line.ID, KeyID: "key_b", ExpiresAt: after + hour}, false, after); err != nil {
		t.Fatal(err)
	}
	if got := claimAt(t, db, after); !slices.Equal(got, []string{own.ID}) {
		t.Fatalf("claimed %q under key_b's lease; want only key_b's %s", got, own.ID)
	}
	if it := outcome(t, db, leased.ID); it.Status != storage.StatusFailed || it.Error != "chat_leased" {
		t.Fatalf("other key's item under a lease: %+v; want failed chat_leased", it)
	}
	if _, err := db.ReleaseLease(ctx, c.ID, "key_b", false, after); err != nil {
		t.Fatal(err)
	}

	optedOut := scheduleAgent(t, db, line, c, "key_a", after)
	textFrom(t, db, line, c.Identifier, "STOP", storage.KeywordOptOut)
	plain, err := enqueueText(t, db, line, c.ID, 0, nil)
	if err == nil {
		t.Fatalf("non-agent send to an opted-out contact accepted: %+v", plain)
	}
	if got := claimAt(t, db, after); len(got) != 0 {
		t.Fatalf("claimed %q after the contact opted out", got)
	}
	if it := outcome(t, db, optedOut.ID); it.Status != storage.StatusFailed || it.Error != "contact_opted_out" {
		t.Fatalf("item to an opted-out contact: %+v; want failed contact_opted_out", it)
	}
	textFrom(t, db, line, c.Identifier, "START", storage.KeywordOptIn)

	blocked := scheduleAgent(t, db, line, c, "key_a", after)
	if _, err := db.BlockContacts(ctx, line.ID, c.Identifier); err != nil {
		t.Fatal(err)
	}
	if got := claimAt(t, db, after); len(got) != 0 {
		t.Fatalf("claimed %q after the contact was blocked", got)
	}
	if it := outcome(t, db, blocked.ID); it.Status != storage.StatusFailed || it.Error != "contact_blocked" {
		t.Fatalf("item to a blocked contact: %+v; want failed contact_blocked", it)
	}
}

// On a line with takeover = "hold", an agent's message that falls due in a
// chat the owner took over becomes a draft waiting for approval, through
// a restart; approved, it goes out although the owner still holds the
// chat. A typing cannot wait and is failed.
func TestDueAgentItemHeldAsDraft(t *testing.T) {
	dir := t.TempDir()
	db, err := storage.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := db.SyncLines(ctx, []storage.Line{{Handle: "+15550000001", Service: "imessage", Bridge: "sim", TakeoverQuiet: quiet, TakeoverHold: true, ApprovalTTL: hour}})
	if err != nil {
		t.Fatal(err)
	}
	line := lines[0]
	c := inbound(t, db, line, "+15551110001", 10).Chat
	now := time.Now().UnixMilli()
	sendAt := now + 1000
	item := scheduleAgent(t, db, line, c, "key_a", sendAt)
	typing, _, err := db.Enqueue(ctx, storage.EnqueueRequest{
		Item:  storage.OutboxItem{ID: storage.NewID("obx_"), LineID: line.ID, Kind: storage.KindTyping, ChatID: c.ID, TypingOn: true, SendAt: sendAt, MaxAttempts: 1},
		Agent: &storage.AgentCheck{KeyID: "key_a", ChatID: c.ID, Now: now},
	})
	if err != nil {
		t.Fatal(err)
	}
	ownerSends(t, db, line, c, now+10)
	if got := claimAt(t, db, sendAt); len(got) != 0 {
		t.Fatalf("claimed %q under the owner's takeover", got)
	}
	if it := outcome(t, db, typing.ID); it.Status != storage.StatusFailed || it.Error != "human_active" {
		t.Fatalf("typing item: %+v; want failed human_active", it)
	}
	db.Close()
	if db, err = storage.Open(dir); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	waiting, err := db.WaitingApprovals(ctx, line.ID)
	if err != nil || len(waiting) != 1 || waiting[0].ID != item.ID || waiting[0].Status != storage.StatusPending ||
		waiting[0].Approval != api.ApprovalWaiting || waiting[0].ApprovalExpiresAt != sendAt+hour || waiting[0].Attempts != 0 {
		t.Fatalf("waiting after a restart: %+v, %v; want the item, pending, waiting until %d", waiting, err, sendAt+hour)
	}
	if _, err := db.ApproveOutbox(ctx, item.ID, "console", nil, sendAt+1); err != nil {
		t.Fatal(err)
	}
	if got := claimAt(t, db, sendAt+2); !slices.Equal(got, []string{item.ID}) {
		t.Fatalf("claimed %q after approval; want %s", got, item.ID)
	}
}

// An agent's item that was handed to a network that sends at most once
// before a crash may have gone out: made due again, it is claimed (its
// bridge looks for what it did) whatever the rules now say.
func TestHandedAgentItemNotHeldBack(t *testing.T) {
	db, line, c := openAgentDB(t, t.TempDir())
	now := time.Now().UnixMilli()
	item := scheduleAgent(t, db, line, c, "key_a", now)
	if got := claimAt(t, db, now); !slices.Equal(got, []string{item.ID}) {
		t.Fatalf("claimed %q; want %s", got, item.ID)
	}
	if err := db.MarkHanded(ctx, item.ID); err != nil {
		t.Fatal(err)
	}
	ownerSends(t, db, line, c, now+10)
	if n, err := db.RecoverClaimed(ctx); err != nil || n != 1 {
		t.Fatalf("recover: %d, %v", n, err)
	}
	// A minute on: within the owner's takeover window, after the recovery.
	if got := claimAt(t, db, time.Now().UnixMilli()+60_000); !slices.Equal(got, []string{item.ID}) {
		t.Fatalf("claimed %q after the recovery; want the handed item %s", got, item.ID)
	}
}

// An agent's item claimed when the daemon stopped, on a network that sends
// at least once (no hand-off recorded), may have gone out too: made due
// again, it is claimed, not failed human_active, so its status never says
// "not sent" of a message the contact may have; an attempt that certainly
// failed is checked again at its retry.
func TestRecoveredAgentItemNotHeldBack(t *testing.T) {
	db, line, c := openAgentDB(t, t.TempDir())
	now := time.Now().UnixMilli()
	item := scheduleAgent(t, db, line, c, "key_a", now)
	if got := claimAt(t, db, now); !slices.Equal(got, []string{item.ID}) {
		t.Fatalf("claimed %q; want %s", got, item.ID)
	}
	ownerSends(t, db, line, c, now+10)
	if n, err := db.RecoverClaimed(ctx); err != nil || n != 1 {
		t.Fatalf("recover: %d, %v", n, err)
	}
	// A minute on: within the owner's takeover window, after the recovery.
	if got := claimAt(t, db, time.Now().UnixMilli()+60_000); !slices.Equal(got, []string{item.ID}) {
		t.Fatalf("claimed %q after the recovery; want %s", got, item.ID)
	}
	if got := outcome(t, db, item.ID); got.Status != storage.StatusClaimed {
		t.Fatalf("recovered item %s: %s %v", item.ID, got.Status, got.Error)
	}
}
