package storage_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/storage"
)

// eventNames are the names of the events recorded after seq after.
func eventNames(t *testing.T, db *storage.DB, after uint64) []string {
	t.Helper()
	evs, err := db.Events(ctx, after, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range evs {
		out = append(out, e.Name)
	}
	return out
}

func textFrom(t *testing.T, db *storage.DB, line storage.Line, from, text, keyword string) storage.InboundResult {
	t.Helper()
	res, err := db.RecordInbound(ctx, storage.Inbound{
		Chat:    storage.Chat{ID: storage.NewID("cht_"), LineID: line.ID, GUID: "iMessage;-;" + from, Identifier: from, Service: "imessage"},
		Message: storage.Message{ID: storage.NewID("msg_"), GUID: storage.NewID("guid_"), Sender: from, Text: &text, SentAt: 1},
		Keyword: keyword,
	})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// An opt-out keyword opts the contact out in the transaction that stores
// it, with its event and the line's reply, once; sends are refused until
// an opt-in keyword; an unsend still passes.
func TestOptOut(t *testing.T) {
	db, err := storage.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	lines, err := db.SyncLines(ctx, []storage.Line{{Handle: "+15550000001", Service: "imessage", Bridge: "sim", OptOutReply: "Bye"}})
	if err != nil {
		t.Fatal(err)
	}
	line := lines[0]
	const contact = "+15551110001"
	chat := textFrom(t, db, line, contact, "hi", "").Chat
	sent, err := enqueueText(t, db, line, chat.ID, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	seq, _ := db.LastEventSeq(ctx)

	textFrom(t, db, line, contact, "Stop", storage.KeywordOptOut)
	textFrom(t, db, line, contact, "STOP", storage.KeywordOptOut) // no news
	if got, want := eventNames(t, db, seq), []string{api.EventMessageReceived, api.EventContactOptedOut, api.EventMessageReceived}; !slices.Equal(got, want) {
		t.Errorf("events %q, want %q", got, want)
	}
	if o, err := db.OptedOut(ctx, line.ID, contact); err != nil || o.Handle != contact || o.At == 0 || o.Word != "Stop" {
		t.Errorf("OptedOut = %+v, %v", o, err)
	}
	_, err = enqueueText(t, db, line, chat.ID, 0, nil)
	if ce, ok := errors.AsType[*storage.ContactError](err); !ok || ce.Handle != contact || !errors.Is(err, storage.ErrContactOptedOut) {
		t.Fatalf("Enqueue to an opted-out contact: %v", err)
	}
	// The reply is queued, once, besides the item accepted before.
	items, _, err := db.ClaimDue(ctx, 1<<62, 10)
	if err != nil {
		t.Fatal(err)
	}
	var replies []string
	for _, it := range items {
		if it.ID != sent.ID {
			replies = append(replies, *it.Text)
			if it.ChatID != chat.ID || it.Kind != storage.KindMessage || it.MaxAttempts != storage.OptOutReplyAttempts {
				t.Errorf("reply item %+v", it)
			}
		}
	}
	if !slices.Equal(replies, []string{"Bye"}) {
		t.Errorf("replies %q, want one", replies)
	}
	unsend := storage.OutboxItem{ID: storage.NewID("obx_"), LineID: line.ID, Kind: storage.KindUnsend, ChatID: chat.ID, MaxAttempts: 1}
	if _, _, err := db.Enqueue(ctx, storage.EnqueueRequest{Item: unsend}); err != nil {
		t.Errorf("unsend to an opted-out contact: %v", err)
	}
	textFrom(t, db, line, "+15551110002", " quit ", storage.KeywordOptOut)
	if page, next, err := db.OptedOutContacts(ctx, line.ID, "", 1); err != nil || len(page) != 1 || page[0].Handle != contact || next != contact {
		t.Errorf("OptedOutContacts, first page = %+v, %q, %v", page, next, err)
	}
	if page, next, err := db.OptedOutContacts(ctx, line.ID, contact, 1); err != nil || len(page) != 1 || page[0].Handle != "+15551110002" || page[0].Word != "quit" || next != "" {
		t.Errorf("OptedOutContacts, second page = %+v, %q, %v", page, next, err)
	}

	seq, _ = db.LastEventSeq(ctx)
	textFrom(t, db, line, contact, "start", storage.KeywordOptIn)
	textFrom(t, db, line, contact, "start", storage.KeywordOptIn)
	if got, want := eventNames(t, db, seq), []string{api.EventMessageReceived, api.EventContactOptedIn, api.EventMessageReceived}; !slices.Equal(got, want) {
		t.Errorf("events %q, want %q", got, want)
	}
	if _, err := db.OptedOut(ctx, line.ID, contact); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("OptedOut after opting in: %v", err)
	}
	if _, err := enqueueText(t, db, line, chat.ID, 0, nil); err != nil {
		t.Errorf("Enqueue after opting in: %v", err)
	}
}

// A keyword in a group chat, or from the line's owner, changes nothing.
func TestOptOutOneToOneOnly(t *testing.T) {
	db, line := openDB(t)
	text := "STOP"
	group := storage.Chat{ID: storage.NewID("cht_"), LineID: line.ID, GUID: "iMessage;+;chat1", Identifier: "chat1", Service: "imessage",
		IsGroup: true, Participants: []string{"+15551110001", "+15551110002"}}
	for _, in := range []storage.Inbound{
		{Chat: group, Message: storage.Message{ID: storage.NewID("msg_"), GUID: storage.NewID("guid_"), Sender: "+15551110001", Text: &text, SentAt: 1}},
		{Chat: storage.Chat{ID: storage.NewID("cht_"), LineID: line.ID, GUID: "iMessage;-;+15551110001", Identifier: "+15551110001", Service: "imessage"},
			Message: storage.Message{ID: storage.NewID("msg_"), GUID: storage.NewID("guid_"), Sender: line.Handle, IsFromMe: true, Text: &text, SentAt: 1}},
	} {
		in.Keyword = storage.KeywordOptOut
		if _, err := db.RecordInbound(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.OptedOut(ctx, line.ID, "+15551110001"); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("OptedOut: %v", err)
	}
}

// A blocked contact's messages are stored without events; writes to it
// (one-to-one, a new group with it) are refused until it is unblocked.
func TestBlockedContacts(t *testing.T) {
	db, line := openDB(t)
	const contact = "+15551110001"
	chat := textFrom(t, db, line, contact, "hi", "").Chat
	added, err := db.BlockContacts(ctx, line.ID, contact, "+15551110003", "+15551110002", contact)
	if err != nil || added != 3 {
		t.Fatalf("BlockContacts = %d, %v", added, err)
	}
	if added, err := db.BlockContacts(ctx, line.ID, contact); err != nil || added != 0 {
		t.Errorf("BlockContacts again = %d, %v", added, err)
	}
	seq, _ := db.LastEventSeq(ctx)
	res := textFrom(t, db, line, contact, "still here", "")
	if _, _, err := db.ApplyReaction(ctx, storage.Reaction{MessageID: res.Message.ID, ChatID: chat.ID, LineID: line.ID, Type: "love",
		Sender: contact, Added: true, SentAt: 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.RecordRead(ctx, chat.ID, contact, 3); err != nil {
		t.Fatal(err)
	}
	if got := eventNames(t, db, seq); len(got) != 0 {
		t.Errorf("a blocked contact's message, tapback and receipt made events %q", got)
	}
	msgs, _, err := db.ListMessages(ctx, chat.ID, nil, 10)
	if err != nil || len(msgs) != 2 || msgs[0].ID != res.Message.ID {
		t.Errorf("a blocked contact's message is not stored: %d messages, %v", len(msgs), err)
	}
	if _, err := enqueueText(t, db, line, chat.ID, 0, nil); !errors.Is(err, storage.ErrContactBlocked) {
		t.Errorf("Enqueue to a blocked contact: %v", err)
	}
	// Its typing shows nowhere; the line's own does.
	now := time.Now()
	db.SetTyping(chat.ID, contact, true, now)
	db.SetTyping(chat.ID, line.Handle, true, now)
	if inds := db.TypingIndicators(chat.ID, now); len(inds) != 1 || inds[0].Handle != line.Handle {
		t.Errorf("TypingIndicators of a chat with a blocked contact: %+v", inds)
	}
	group := storage.OutboxItem{ID: storage.NewID("obx_"), LineID: line.ID, Kind: storage.KindGroupCreate,
		Participants: []string{"+15551110009", contact}, MaxAttempts: 1}
	if _, _, err := db.Enqueue(ctx, storage.EnqueueRequest{Item: group}); !errors.Is(err, storage.ErrContactBlocked) {
		t.Errorf("Enqueue of a group with a blocked contact: %v", err)
	}

	// Pages in handle order.
	var got []string
	for after := ""; ; {
		page, next, err := db.BlockedContacts(ctx, line.ID, after, 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, bc := range page {
			got = append(got, bc.Handle)
		}
		if next == "" {
			break
		}
		after = next
	}
	if want := []string{contact, "+15551110002", "+15551110003"}; !slices.Equal(got, want) {
		t.Errorf("BlockedContacts = %q, want %q", got, want)
	}

	if err := db.UnblockContact(ctx, line.ID, contact); err != nil {
		t.Fatal(err)
	}
	if err := db.UnblockContact(ctx, line.ID, contact); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("UnblockContact of a contact not blocked: %v", err)
	}
	if _, err := enqueueText(t, db, line, chat.ID, 0, nil); err != nil {
		t.Errorf("Enqueue after unblocking: %v", err)
	}
	seq, _ = db.LastEventSeq(ctx)
	textFrom(t, db, line, contact, "back", "")
	if got := eventNames(t, db, seq); !slices.Equal(got, []string{api.EventMessageReceived}) {
		t.Errorf("after unblocking: events %q", got)
	}
	if inds := db.TypingIndicators(chat.ID, now); len(inds) != 2 {
		t.Errorf("TypingIndicators after unblocking: %+v", inds)
	}
}
