package storage_test

import (
	"slices"
	"testing"

	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/storage"
)

// openSelfDB is a database with a line whose owner's Apple ID has the
// handles self, the first of which is the line's.
func openSelfDB(t *testing.T, self ...string) (*storage.DB, storage.Line) {
	t.Helper()
	db, err := storage.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	lines, err := db.SyncLines(ctx, []storage.Line{{Handle: self[0], Service: "imessage", Bridge: "sim", TakeoverQuiet: quiet, SelfHandles: self}})
	if err != nil {
		t.Fatal(err)
	}
	return db, lines[0]
}

// The owner's chat with themselves, under the phone number and the
// e-mail address of the Apple ID: what the owner writes is one
// message.self however many rows Messages writes of it; the line's own
// sends there are message.sent, and their received copies nothing; a
// second copy naming the same message is news.
func TestSelfChat(t *testing.T) {
	const phone, mail = "+15550000001", "owner@example.com"
	db, line := openSelfDB(t, phone, mail)
	chatOf := func(h string) storage.Chat {
		return storage.Chat{ID: storage.NewID("cht_"), LineID: line.ID, GUID: "any;-;" + h, Identifier: h, Service: "imessage"}
	}
	record := func(h string, fromMe bool, echoOf string) storage.InboundResult {
		t.Helper()
		text, sender := "status?", h
		if fromMe {
			sender = phone
		}
		res, err := db.RecordInbound(ctx, storage.Inbound{Chat: chatOf(h), EchoOf: echoOf, Message: storage.Message{ID: storage.NewID("msg_"),
			GUID: storage.NewID("guid_"), Sender: sender, IsFromMe: fromMe, Text: &text, SentAt: 1, SyncedAt: 1}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	selfEvents := func(after uint64) int {
		return len(slices.DeleteFunc(eventNames(t, db, after), func(n string) bool { return n != api.EventMessageSelf }))
	}

	for _, h := range []string{phone, mail} {
		last, _ := db.LastEventSeq(ctx)
		sent := record(h, true, "")
		copied := record(mail, false, sent.Message.GUID) // the copy may come under the other handle
		if !copied.Duplicate || copied.Message.ID != sent.Message.ID {
			t.Fatalf("%s: the received copy was stored as %+v, not as the sent message %s", h, copied.Message, sent.Message.ID)
		}
		if names := eventNames(t, db, last); !slices.Equal(names, []string{api.EventMessageSelf}) {
			t.Fatalf("%s: the owner's message and its copy made %v, want one message.self", h, names)
		}
		if c, _ := db.HandoffOf(ctx, sent.Chat.ID); c.Until != 0 {
			t.Errorf("%s: the owner's message took their own chat over: %+v", h, c)
		}
		// A second row naming the same message is the owner writing again.
		if again := record(h, false, sent.Message.GUID); again.Duplicate || selfEvents(last) != 2 {
			t.Fatalf("%s: a second row naming the message: duplicate %v, %d message.self", h, again.Duplicate, selfEvents(last))
		}
	}

	// The line's own send into the chat: message.sent; its copy, nothing.
	c, _ := db.ChatByIdentifier(ctx, line.ID, phone)
	last, _ := db.LastEventSeq(ctx)
	text := "status?"
	item, _, err := db.Enqueue(ctx, storage.EnqueueRequest{Item: storage.OutboxItem{ID: storage.NewID("obx_"), LineID: line.ID,
		Kind: storage.KindMessage, MaxAttempts: 1, ChatID: c.ID, Text: &text}})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := db.ClaimDue(ctx, 1<<62, 1); err != nil {
		t.Fatal(err)
	}
	own := storage.Message{ID: storage.NewID("msg_"), GUID: storage.NewID("guid_"), Sender: phone, Text: &text, IsFromMe: true, SentAt: 2}
	if err := db.MarkSent(ctx, storage.Sent{OutboxID: item.ID, Message: own}); err != nil {
		t.Fatal(err)
	}
	if copied := record(phone, false, own.GUID); !copied.Duplicate || copied.Message.OutboxID != item.ID {
		t.Fatalf("the copy of the line's own send: %+v", copied)
	}
	if names := eventNames(t, db, last); !slices.Equal(names, []string{api.EventMessageSent}) {
		t.Fatalf("the line's own send and its copy made %v, want message.sent alone", names)
	}
}
