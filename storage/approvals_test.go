package storage_test

import (
	"errors"
	"testing"
	"time"

	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/storage"
)

const hour = 60 * 60 * 1000 // ms

// draft enqueues an agent's message under approval check a at now.
func draft(t *testing.T, db *storage.DB, line storage.Line, c storage.Chat, a *storage.ApprovalCheck, now int64) (storage.OutboxItem, error) {
	t.Helper()
	text := "draft reply"
	item, _, err := db.Enqueue(ctx, storage.EnqueueRequest{
		Item:     storage.OutboxItem{ID: storage.NewID("obx_"), LineID: line.ID, Kind: storage.KindMessage, ChatID: c.ID, Text: &text, MaxAttempts: 1},
		Agent:    &storage.AgentCheck{KeyID: "key_a", ChatID: c.ID, Now: now},
		Approval: a,
	})
	return item, err
}

// claimAll claims every item due by far in the future.
func claimAll(t *testing.T, db *storage.DB) []storage.OutboxItem {
	t.Helper()
	items, _, err := db.ClaimDue(ctx, time.Now().Add(365*24*time.Hour).UnixMilli(), 100)
	if err != nil {
		t.Fatal(err)
	}
	return items
}

// A draft waits, through a restart, without delivery ever claiming it;
// approved (with a new text) it is claimed once; answered twice it is
// refused.
func TestDraftWaitsUntilApproved(t *testing.T) {
	dir := t.TempDir()
	db, line, c := openAgentDB(t, dir)
	now := time.Now().UnixMilli()
	changed := db.ApprovalsChanged()
	item, err := draft(t, db, line, c, &storage.ApprovalCheck{Required: true, ExpiresAt: now + hour}, now)
	if err != nil {
		t.Fatal(err)
	}
	if item.Status != storage.StatusPending || item.Approval != api.ApprovalWaiting || item.ApprovalExpiresAt != now+hour {
		t.Fatalf("draft %+v", item)
	}
	select {
	case <-changed:
	default:
		t.Fatal("ApprovalsChanged was not closed by a new draft")
	}
	if got := claimAll(t, db); len(got) != 0 {
		t.Fatalf("claimed a waiting draft: %+v", got)
	}
	// A restart: the draft still waits, and recovery does not make it due.
	db.Close()
	db, line, c = openAgentDB(t, dir)
	if _, err := db.RecoverClaimed(ctx); err != nil {
		t.Fatal(err)
	}
	if got := claimAll(t, db); len(got) != 0 {
		t.Fatalf("claimed a waiting draft after a restart: %+v", got)
	}
	waiting, err := db.WaitingApprovals(ctx, line.ID)
	if err != nil || len(waiting) != 1 || waiting[0].ID != item.ID {
		t.Fatalf("waiting after a restart: %+v, %v", waiting, err)
	}
	if other, err := db.WaitingApprovals(ctx, "ln_other"); err != nil || len(other) != 0 {
		t.Fatalf("another line's drafts: %+v, %v", other, err)
	}

	edited := "the owner's words"
	approved, err := db.ApproveOutbox(ctx, item.ID, "console", &edited, now+1)
	if err != nil {
		t.Fatal(err)
	}
	if approved.Approval != api.ApprovalApproved || approved.ApprovalBy != "console" || *approved.Text != edited {
		t.Fatalf("approved %+v", approved)
	}
	got := claimAll(t, db)
	if len(got) != 1 || got[0].ID != item.ID || *got[0].Text != edited {
		t.Fatalf("claimed after approval %+v", got)
	}
	if waiting, _ := db.WaitingApprovals(ctx, ""); len(waiting) != 0 {
		t.Fatalf("still waiting after approval: %+v", waiting)
	}
	if _, err := db.ApproveOutbox(ctx, item.ID, "console", nil, now+2); !errors.Is(err, storage.ErrApprovalAnswered) {
		t.Fatalf("approving twice: %v", err)
	}
	if _, err := db.DeclineOutbox(ctx, item.ID, "console", now+2); !errors.Is(err, storage.ErrApprovalAnswered) {
		t.Fatalf("declining an approved draft: %v", err)
	}
	if got := claimAll(t, db); len(got) != 0 {
		t.Fatalf("claimed again: %+v", got)
	}
}

// Declined, cancelled or expired, a draft fails and is never claimed; one
// that is not a draft cannot be answered.
func TestDraftDeclinedCancelledExpired(t *testing.T) {
	dir := t.TempDir()
	db, line, c := openAgentDB(t, dir)
	now := time.Now().UnixMilli()
	check := &storage.ApprovalCheck{Required: true, ExpiresAt: now + hour}

	declined, _ := draft(t, db, line, c, check, now)
	item, err := db.DeclineOutbox(ctx, declined.ID, "key_owner", now+1)
	if err != nil || item.Status != storage.StatusFailed || item.Error != storage.Declined || item.Approval != api.ApprovalDeclined {
		t.Fatalf("declined %+v, %v", item, err)
	}
	if _, err := db.ApproveOutbox(ctx, declined.ID, "console", nil, now+2); !errors.Is(err, storage.ErrApprovalAnswered) {
		t.Fatalf("approving a declined draft: %v", err)
	}

	cancelled, _ := draft(t, db, line, c, check, now)
	item, err = db.CancelOutbox(ctx, cancelled.ID)
	if err != nil || item.Error != storage.Canceled || item.Approval != api.ApprovalDeclined {
		t.Fatalf("cancelled %+v, %v", item, err)
	}

	// One expires through ExpireApprovals, after a restart; the other
	// when approved too late, before ExpireApprovals came by.
	expiring, _ := draft(t, db, line, c, check, now)
	late, _ := draft(t, db, line, c, &storage.ApprovalCheck{Required: true, ExpiresAt: now + 2*hour}, now)
	if n, err := db.ExpireApprovals(ctx, now+hour-1); err != nil || n != 0 {
		t.Fatalf("expired before their time: %d, %v", n, err)
	}
	db.Close()
	db, _, _ = openAgentDB(t, dir)
	if n, err := db.ExpireApprovals(ctx, now+hour); err != nil || n != 1 {
		t.Fatalf("expired %d, %v; want 1", n, err)
	}
	item, err = db.OutboxItemByID(ctx, expiring.ID)
	if err != nil || item.Status != storage.StatusFailed || item.Error != storage.ApprovalTimeout || item.Approval != api.ApprovalExpired {
		t.Fatalf("expired %+v, %v", item, err)
	}
	if _, err := db.ApproveOutbox(ctx, expiring.ID, "console", nil, now+hour+1); !errors.Is(err, storage.ErrApprovalExpired) {
		t.Fatalf("approving an expired draft: %v", err)
	}
	item, err = db.ApproveOutbox(ctx, late.ID, "console", nil, now+2*hour)
	if !errors.Is(err, storage.ErrApprovalExpired) || item.Status != storage.StatusFailed || item.Error != storage.ApprovalTimeout {
		t.Fatalf("approved after its expiry: %+v, %v", item, err)
	}
	if waiting, _ := db.WaitingApprovals(ctx, ""); len(waiting) != 0 {
		t.Fatalf("still waiting: %+v", waiting)
	}
	if got := claimAll(t, db); len(got) != 0 {
		t.Fatalf("claimed a failed draft: %+v", got)
	}

	sent := &storage.ApprovalCheck{}
	plain, err := draft(t, db, line, c, sent, now)
	if err != nil || plain.Approval != "" {
		t.Fatalf("a message that needs no approval: %+v, %v", plain, err)
	}
	if _, err := db.ApproveOutbox(ctx, plain.ID, "console", nil, now); !errors.Is(err, storage.ErrNoApproval) {
		t.Fatalf("approving a message that needed none: %v", err)
	}
}

// On a line that holds them, an agent's message to a chat the owner took
// over waits for approval instead of being refused; another's lease still
// refuses it.
func TestTakeoverHoldsDrafts(t *testing.T) {
	db, line, c := openAgentDB(t, t.TempDir())
	now := time.Now().UnixMilli()
	ownerSends(t, db, line, c, now)
	_, err := draft(t, db, line, c, &storage.ApprovalCheck{ExpiresAt: now + hour}, now+1)
	if _, ok := errors.AsType[*storage.ErrHumanActive](err); !ok {
		t.Fatalf("without hold: %v; want ErrHumanActive", err)
	}
	item, err := draft(t, db, line, c, &storage.ApprovalCheck{HoldHumanActive: true, ExpiresAt: now + hour}, now+1)
	if err != nil || item.Approval != api.ApprovalWaiting {
		t.Fatalf("held: %+v, %v", item, err)
	}
	// After the window, the same line sends at once.
	item, err = draft(t, db, line, c, &storage.ApprovalCheck{HoldHumanActive: true, ExpiresAt: now + hour}, now+quiet)
	if err != nil || item.Approval != "" {
		t.Fatalf("after the window: %+v, %v", item, err)
	}
	if _, err := db.AcquireLease(ctx, storage.Lease{ChatID: c.ID, LineID: line.ID, KeyID: "key_b", ExpiresAt: now + quiet + hour}, false, now+quiet); err != nil {
		t.Fatal(err)
	}
	_, err = draft(t, db, line, c, &storage.ApprovalCheck{HoldHumanActive: true, Required: true, ExpiresAt: now + hour}, now+quiet)
	if _, ok := errors.AsType[*storage.ErrChatLeased](err); !ok {
		t.Fatalf("another key's lease: %v; want ErrChatLeased", err)
	}
}
