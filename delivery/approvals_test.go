package delivery_test

import (
	"context"
	"testing"
	"time"

	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/delivery"
	"github.com/blueline-app/blueline/storage"
)

// The worker never sends a draft waiting for approval, even while it
// sends what comes after it in the same chat; approved, the draft is sent
// once, in the owner's words; declined, never.
func TestWorkerWaitsForApproval(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	chat := e.inbound(mainLine, alice, "hi").Chat
	fb := &fakeBridge{}
	e.run(fb, delivery.Options{})
	draft := func(text string) storage.OutboxItem {
		t.Helper()
		item, _, err := e.db.Enqueue(ctx, storage.EnqueueRequest{
			Item:     storage.OutboxItem{ID: storage.NewID("obx_"), LineID: e.line.ID, Kind: storage.KindMessage, ChatID: chat.ID, Text: &text, MaxAttempts: 3},
			Approval: &storage.ApprovalCheck{Required: true, ExpiresAt: time.Now().Add(time.Hour).UnixMilli()},
		})
		if err != nil {
			t.Fatal(err)
		}
		return item
	}
	approved, declined := draft("agent's words"), draft("never")
	after := e.sendText(chat, "after the drafts")
	e.wait(after.ID, completed)
	for _, id := range []string{approved.ID, declined.ID} {
		if item, err := e.db.OutboxItemByID(ctx, id); err != nil || item.Status != storage.StatusPending || item.Attempts != 0 {
			t.Fatalf("a waiting draft once a later message was sent: %+v, %v", item, err)
		}
	}
	owner := "owner's words"
	if _, err := e.db.ApproveOutbox(ctx, approved.ID, "console", &owner, time.Now().UnixMilli()); err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.DeclineOutbox(ctx, declined.ID, "console", time.Now().UnixMilli()); err != nil {
		t.Fatal(err)
	}
	if item := e.wait(approved.ID, completed); item.Status != storage.StatusSent || item.Approval != api.ApprovalApproved {
		t.Fatalf("the approved draft: %+v", item)
	}
	var texts []string
	for _, out := range fb.handed() {
		texts = append(texts, out.Text)
	}
	if len(texts) != 2 || texts[0] != "after the drafts" || texts[1] != owner {
		t.Fatalf("the bridge was handed %q; want the later message, then the draft in the owner's words", texts)
	}
}
