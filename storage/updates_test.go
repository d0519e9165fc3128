package storage_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/blueline-app/blueline/bridge"
	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/storage"
)

// events lists the events queued for a webhook, in order, and the
// subjects they carry.
func events(t *testing.T, db *storage.DB, w storage.Webhook) ([]string, []storage.DueDelivery) {
	t.Helper()
	d := due(t, db, w)
	names := make([]string, len(d))
	for i, x := range d {
		names[i] = x.Event
	}
	return names, d
}

// sentMessage stores a message the line sent in its one-to-one chat with
// contact, as the owner's other device would report it.
func sentMessage(t *testing.T, db *storage.DB, line storage.Line, contact, guid string) storage.Message {
	t.Helper()
	text := "ours"
	res, err := db.RecordInbound(ctx, storage.Inbound{
		Chat:    storage.Chat{ID: storage.NewID("cht_"), LineID: line.ID, GUID: "iMessage;-;" + contact, Identifier: contact, Service: "imessage"},
		Message: storage.Message{ID: storage.NewID("msg_"), GUID: guid, Sender: line.Handle, IsFromMe: true, Text: &text, SentAt: 10},
	})
	if err != nil {
		t.Fatal(err)
	}
	return res.Message
}

func TestUpdateMessage(t *testing.T) {
	db, line := openDB(t)
	hook := createWebhook(t, db, line, api.EventMessageEdited, api.EventMessageUnsent, api.EventMessageDelivered, api.EventReceiptRead)
	theirs := inbound(t, db, line, rxAlice, 1).Message
	ours := sentMessage(t, db, line, rxAlice, "OURS-1")
	update := func(u storage.MessageUpdate) (storage.Message, []string) {
		t.Helper()
		m, ev, err := db.UpdateMessage(ctx, line.ID, u)
		if err != nil {
			t.Fatal(err)
		}
		return m, ev
	}
	text := func(s string) *string { return &s }

	// An edit, then the same edit again, then an older one: one event.
	m, ev := update(storage.MessageUpdate{GUID: theirs.GUID, Text: text("edited"), EditedAt: 50})
	if !slices.Equal(ev, []string{api.EventMessageEdited}) || *m.Text != "edited" || m.EditedAt != 50 || m.ID != theirs.ID {
		t.Fatalf("edit: %+v %v", m, ev)
	}
	for _, u := range []storage.MessageUpdate{{GUID: theirs.GUID, Text: text("edited"), EditedAt: 50}, {GUID: theirs.GUID, Text: text("older"), EditedAt: 40}} {
		if m, ev := update(u); ev != nil || *m.Text != "edited" {
			t.Fatalf("edit %+v again: %+v %v", u, m, ev)
		}
	}
	// Delivered and read mean nothing on a contact's message.
	if _, ev := update(storage.MessageUpdate{GUID: theirs.GUID, DeliveredAt: 60, ReadAt: 70}); ev != nil {
		t.Fatalf("read on an inbound message: %v", ev)
	}
	// An unsend empties the message for good: no edit, no file after it.
	m, ev = update(storage.MessageUpdate{GUID: theirs.GUID, UnsentAt: 80})
	if !slices.Equal(ev, []string{api.EventMessageUnsent}) || m.Text != nil || len(m.Attachments) != 0 || m.UnsentAt != 80 {
		t.Fatalf("unsend: %+v %v", m, ev)
	}
	if m, ev := update(storage.MessageUpdate{GUID: theirs.GUID, Text: text("back?"), EditedAt: 90, UnsentAt: 95}); ev != nil || m.Text != nil || m.UnsentAt != 80 {
		t.Fatalf("after the unsend: %+v %v", m, ev)
	}

	// Ours: delivered, then read (the contact's receipt moves), then read
	// later again; the same update twice changes nothing.
	m, ev = update(storage.MessageUpdate{GUID: ours.GUID, DeliveredAt: 100})
	if !slices.Equal(ev, []string{api.EventMessageDelivered}) || m.DeliveredAt != 100 {
		t.Fatalf("delivered: %+v %v", m, ev)
	}
	m, ev = update(storage.MessageUpdate{GUID: ours.GUID, DeliveredAt: 100, ReadAt: 200})
	if !slices.Equal(ev, []string{api.EventReceiptRead}) || m.ReadAt != 200 {
		t.Fatalf("read: %+v %v", m, ev)
	}
	if _, ev := update(storage.MessageUpdate{GUID: ours.GUID, DeliveredAt: 100, ReadAt: 200}); ev != nil {
		t.Fatalf("the same again: %v", ev)
	}
	recs, err := db.Receipts(ctx, ours.ChatID)
	if err != nil || len(recs) != 1 || recs[0].Handle != rxAlice || recs[0].LastReadAt != 200 {
		t.Fatalf("receipts: %+v %v", recs, err)
	}

	names, d := events(t, db, hook)
	if want := []string{"message.edited", "message.unsent", "message.delivered", "receipt.read"}; !slices.Equal(names, want) {
		t.Fatalf("events %v, want %v", names, want)
	}
	if d[3].Receipt == nil || d[3].Receipt.Handle != rxAlice || d[3].Receipt.LastReadAt != 200 || d[1].Message.UnsentAt != 80 {
		t.Fatalf("event subjects: %+v", d)
	}

	// Unknown GUIDs, and another line's messages, are not found.
	for _, u := range []storage.MessageUpdate{{GUID: "NOPE", EditedAt: 1}} {
		if _, _, err := db.UpdateMessage(ctx, line.ID, u); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("unknown GUID: %v", err)
		}
	}
	if _, _, err := db.UpdateMessage(ctx, "ln_other", storage.MessageUpdate{GUID: ours.GUID, ReadAt: 300}); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("another line's message: %v", err)
	}
}

func TestApplyChatUpdate(t *testing.T) {
	db, line := openDB(t)
	hook := createWebhook(t, db, line, api.EventChatUpdated)
	group := storage.Chat{ID: storage.NewID("cht_"), LineID: line.ID, GUID: "iMessage;+;chat1", Identifier: "chat1", Service: "imessage",
		IsGroup: true, Name: "Team", Participants: []string{rxAlice}}
	apply := func(guid string, u storage.ChatUpdate) (storage.ChatUpdate, bool) {
		t.Helper()
		got, applied, err := db.ApplyChatUpdate(ctx, guid, group, u)
		if err != nil {
			t.Fatal(err)
		}
		return got, applied
	}
	// A chat not stored yet is created by its first change.
	got, applied := apply("G1", storage.ChatUpdate{Action: bridge.ChatParticipantAdded, Participant: rxBob, By: rxAlice, At: 5})
	if !applied || !slices.Equal(got.Chat.Participants, []string{rxAlice, rxBob}) || got.Chat.ID != group.ID || got.By != rxAlice {
		t.Fatalf("added: %+v %v", got, applied)
	}
	if _, applied := apply("G1", storage.ChatUpdate{Action: bridge.ChatParticipantAdded, Participant: rxBob, At: 5}); applied {
		t.Fatal("the same change applied twice")
	}
	got, _ = apply("G2", storage.ChatUpdate{Action: bridge.ChatRenamed, Name: "Crew", At: 6})
	if got.Chat.Name != "Crew" {
		t.Fatalf("renamed: %+v", got)
	}
	got, _ = apply("G3", storage.ChatUpdate{Action: bridge.ChatParticipantLeft, Participant: rxAlice, By: rxAlice, At: 7})
	if !slices.Equal(got.Chat.Participants, []string{rxBob}) {
		t.Fatalf("left: %+v", got)
	}
	if _, _, err := db.ApplyChatUpdate(ctx, "G4", group, storage.ChatUpdate{Action: "exploded"}); err == nil {
		t.Fatal("an unknown action was applied")
	}
	stored, err := db.ChatByID(ctx, group.ID)
	if err != nil || stored.Name != "Crew" || !slices.Equal(stored.Participants, []string{rxBob}) {
		t.Fatalf("stored chat: %+v %v", stored, err)
	}
	names, d := events(t, db, hook)
	if len(names) != 3 || d[0].ChatUpdate.Action != bridge.ChatParticipantAdded || d[2].ChatUpdate.Chat.Name != "Crew" {
		t.Fatalf("events %v %+v", names, d)
	}
}

// A sender has one current tapback on a message; an emoji tapback's emoji
// can change.
func TestOneTapbackPerSender(t *testing.T) {
	db, line := openDB(t)
	msg := inbound(t, db, line, rxAlice, 1).Message
	hook := createWebhook(t, db, line, api.EventReactionAdded, api.EventReactionRemoved)
	react := func(typ, emoji string, added bool, at int64) {
		t.Helper()
		if _, _, err := db.ApplyReaction(ctx, storage.Reaction{MessageID: msg.ID, ChatID: msg.ChatID, LineID: line.ID, Type: typ, Emoji: emoji,
			Sender: rxBob, Added: added, SentAt: at}); err != nil {
			t.Fatal(err)
		}
	}
	react("love", "", true, 1)
	react("emoji", "🎉", true, 2) // replaces love
	react("emoji", "🔥", true, 3) // another emoji: the same record, changed
	react("emoji", "🔥", true, 4) // the same again: nothing
	// Another sender's tapback is theirs.
	if _, _, err := db.ApplyReaction(ctx, storage.Reaction{MessageID: msg.ID, ChatID: msg.ChatID, LineID: line.ID, Type: "like",
		Sender: rxAlice, Added: true, SentAt: 5}); err != nil {
		t.Fatal(err)
	}
	react("emoji", "🔥", false, 6)
	names, d := events(t, db, hook)
	want := []string{"reaction.added", "reaction.removed", "reaction.added", "reaction.added", "reaction.added", "reaction.removed"}
	if !slices.Equal(names, want) {
		t.Fatalf("events %v, want %v", names, want)
	}
	if r := d[1].Reaction; r.Type != "love" || r.Added {
		t.Fatalf("replaced tapback: %+v", r)
	}
	if r := d[3].Reaction; r.Type != "emoji" || r.Emoji != "🔥" || r.ID != d[2].Reaction.ID {
		t.Fatalf("changed emoji: %+v (was %+v)", r, d[2].Reaction)
	}
	if r := d[5].Reaction; r.Emoji != "🔥" || r.Added {
		t.Fatalf("emoji removed: %+v", r)
	}
	all, err := db.ReactionsByMessage(ctx, msg.ID)
	if err != nil {
		t.Fatal(err)
	}
	current := map[string]string{}
	for _, r := range all {
		if r.Added {
			current[r.Sender] = r.Type
		}
	}
	if len(current) != 1 || current[rxAlice] != "like" {
		t.Fatalf("current tapbacks %v", current)
	}
}
