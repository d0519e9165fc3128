package storage_test

import (
	"errors"
	"testing"

	"github.com/blueline-app/blueline/storage"
)

// An edit counts against its message's limit when accepted, and stops
// counting if it fails.
func TestEditLimitCounting(t *testing.T) {
	db, line := openDB(t)
	res := inbound(t, db, line, "+15551110001", 1)
	m := res.Message
	text := "edited"
	edit := func() (storage.OutboxItem, error) {
		item, _, err := db.Enqueue(ctx, storage.EnqueueRequest{EditLimit: 2, Item: storage.OutboxItem{
			ID: storage.NewID("obx_"), LineID: line.ID, Kind: storage.KindEdit, MaxAttempts: 1, ChatID: m.ChatID,
			TargetMessageID: m.ID, TargetGUID: m.GUID, Text: &text,
		}})
		return item, err
	}
	for range 2 {
		if _, err := edit(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := edit(); !errors.Is(err, storage.ErrEditLimit) {
		t.Fatalf("third edit: %v", err)
	}
	claimed, _, err := db.ClaimDue(ctx, 1<<62, 1)
	if err != nil || len(claimed) != 1 {
		t.Fatal(claimed, err)
	}
	if _, err := db.MarkFailed(ctx, claimed[0].ID, "refused"); err != nil {
		t.Fatal(err)
	}
	if got, _ := db.MessageByID(ctx, m.ID); got.EditRequests != 1 {
		t.Fatalf("after a failed edit: %d edits counted", got.EditRequests)
	}
	if _, err := edit(); err != nil {
		t.Fatalf("an edit in the room a failed one left: %v", err)
	}
}

// A new group is stored with its first message when its item is sent.
func TestGroupCreatedWhenSent(t *testing.T) {
	db, line := openDB(t)
	text := "climbing?"
	item, _, err := db.Enqueue(ctx, storage.EnqueueRequest{Item: storage.OutboxItem{
		ID: storage.NewID("obx_"), LineID: line.ID, Kind: storage.KindGroupCreate, MaxAttempts: 1, Text: &text,
		Participants: []string{"+15551110001", "+15551110002"}, GroupName: "Climbers",
	}})
	if err != nil || item.ChatID != "" {
		t.Fatal(item, err)
	}
	if _, _, err := db.ClaimDue(ctx, 1<<62, 1); err != nil {
		t.Fatal(err)
	}
	chat := storage.Chat{ID: storage.NewID("cht_"), GUID: "iMessage;+;chat1", Identifier: "chat1", Service: "imessage", Name: "Climbers",
		Participants: []string{"+15551110001", "+15551110002"}}
	msg := storage.Message{ID: storage.NewID("msg_"), GUID: "FIRST", Sender: line.Handle, Text: &text, IsFromMe: true, SentAt: 5}
	if err := db.MarkSent(ctx, storage.Sent{OutboxID: item.ID, Chat: chat, Message: msg}); err != nil {
		t.Fatal(err)
	}
	done, _ := db.OutboxItemByID(ctx, item.ID)
	c, err := db.ChatByID(ctx, done.ChatID)
	if err != nil || done.Status != storage.StatusSent || done.ChatID != chat.ID || !c.IsGroup || c.LineID != line.ID || c.Name != "Climbers" ||
		c.HasReceivedInbound || len(c.Participants) != 2 || c.LastMessageAt != 5 {
		t.Fatalf("item %+v, chat %+v, %v", done, c, err)
	}
	stored, err := db.MessageByGUID(ctx, "FIRST")
	if err != nil || stored.ChatID != chat.ID || stored.OutboxID != item.ID || done.MessageID != msg.ID {
		t.Fatalf("first message %+v: %v", stored, err)
	}
}
