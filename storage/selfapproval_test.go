package storage_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/storage"
)

// The owner answers drafts in their chat with themselves: each draft is
// written there as a prompt, in the transaction that makes it wait; a 👍
// on the prompt (or on its received copy) approves the draft, a 👎
// declines it, and an inline reply sends the reply's words instead, with
// no message.self. A tapback on a draft answered already changes nothing.
func TestApprovalInSelfChat(t *testing.T) {
	const phone = "+15550000001"
	db, line := openSelfDB(t, phone)
	contact := inbound(t, db, line, "+15551110001", 10).Chat
	// A line whose owner never wrote to themselves has nowhere to ask.
	now := time.Now().UnixMilli()
	if _, err := draft(t, db, line, contact, &storage.ApprovalCheck{Required: true, ExpiresAt: now + hour}, now); err != nil {
		t.Fatal(err)
	}
	if due := claimAll(t, db); len(due) != 0 {
		t.Fatalf("a prompt with no chat of the owner's: %+v", due)
	}
	note := "note to self"
	selfChat := storage.Chat{ID: storage.NewID("cht_"), LineID: line.ID, GUID: "any;-;" + phone, Identifier: phone, Service: "imessage"}
	if _, err := db.RecordInbound(ctx, storage.Inbound{Chat: selfChat, Message: storage.Message{ID: storage.NewID("msg_"), GUID: storage.NewID("guid_"), Sender: phone,
		IsFromMe: true, Text: &note, SentAt: 20, SyncedAt: 20}}); err != nil {
		t.Fatal(err)
	}

	// ask makes a draft and sends its prompt: it returns both.
	ask := func() (storage.OutboxItem, storage.Message) {
		t.Helper()
		d, err := draft(t, db, line, contact, &storage.ApprovalCheck{Required: true, ExpiresAt: time.Now().UnixMilli() + hour}, time.Now().UnixMilli())
		if err != nil {
			t.Fatal(err)
		}
		due := claimAll(t, db)
		if len(due) != 1 || due[0].PromptFor != d.ID || due[0].Text == nil || !strings.Contains(*due[0].Text, "draft reply") ||
			!strings.Contains(*due[0].Text, contact.Identifier) {
			t.Fatalf("the prompt of draft %s: %+v", d.ID, due)
		}
		prompt := storage.Message{ID: storage.NewID("msg_"), GUID: storage.NewID("guid_"), Sender: phone, Text: due[0].Text, IsFromMe: true, SentAt: 30}
		if err := db.MarkSent(ctx, storage.Sent{OutboxID: due[0].ID, Message: prompt}); err != nil {
			t.Fatal(err)
		}
		stored, err := db.MessageByGUID(ctx, prompt.GUID)
		if err != nil {
			t.Fatal(err)
		}
		return d, stored
	}
	tapback := func(m storage.Message, typ string) {
		t.Helper()
		if _, _, err := db.ApplyReaction(ctx, storage.Reaction{MessageID: m.ID, ChatID: m.ChatID, LineID: line.ID, Type: typ, Sender: phone,
			IsFromMe: true, Added: true, SentAt: time.Now().UnixMilli(), SyncedAt: time.Now().UnixMilli()}); err != nil {
			t.Fatal(err)
		}
	}
	answered := func(d storage.OutboxItem, approval, status string) storage.OutboxItem {
		t.Helper()
		got, err := db.OutboxItemByID(ctx, d.ID)
		if err != nil || got.Approval != approval || got.Status != status || got.ApprovalBy != storage.AnsweredInMessages {
			t.Fatalf("draft %s: %+v, %v; want %s %s", d.ID, got, err, approval, status)
		}
		return got
	}

	d, prompt := ask()
	tapback(prompt, "like")
	answered(d, api.ApprovalApproved, storage.StatusPending)
	if due := claimAll(t, db); len(due) != 1 || due[0].ID != d.ID {
		t.Fatalf("the approved draft is not due: %+v", due)
	}
	tapback(prompt, "dislike") // answered already: it stays approved
	answered(d, api.ApprovalApproved, storage.StatusClaimed)

	d, prompt = ask()
	// The owner taps the prompt's received copy, which names it.
	text := "copy"
	copyGUID := storage.NewID("guid_")
	if _, err := db.RecordInbound(ctx, storage.Inbound{Chat: selfChat, EchoOf: prompt.GUID,
		Message: storage.Message{ID: storage.NewID("msg_"), GUID: copyGUID, Sender: phone, Text: &text, SentAt: 31}}); err != nil {
		t.Fatal(err)
	}
	viaCopy, err := db.MessageByGUID(ctx, copyGUID)
	if err != nil || viaCopy.ID != prompt.ID {
		t.Fatalf("the prompt's copy: %+v, %v", viaCopy, err)
	}
	tapback(viaCopy, "dislike")
	if got := answered(d, api.ApprovalDeclined, storage.StatusFailed); got.Error != storage.Declined {
		t.Fatalf("declined draft: %+v", got)
	}

	d, prompt = ask()
	last, _ := db.LastEventSeq(ctx)
	words := "Yes, it ships on Monday."
	if _, err := db.RecordInbound(ctx, storage.Inbound{Chat: selfChat,
		Message: storage.Message{ID: storage.NewID("msg_"), GUID: storage.NewID("guid_"), Sender: phone, IsFromMe: true, Text: &words,
			ReplyToGUID: prompt.GUID, SentAt: 40, SyncedAt: 40}}); err != nil {
		t.Fatal(err)
	}
	if got := answered(d, api.ApprovalApproved, storage.StatusPending); got.Text == nil || *got.Text != words {
		t.Fatalf("the reply's words: %+v", got)
	}
	if names := eventNames(t, db, last); slices.Contains(names, api.EventMessageSelf) {
		t.Fatalf("the reply to a prompt made %v", names)
	}
}
