package storage_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/blueline-app/blueline/storage"
)

// Contacts of these tests.
const (
	rxAlice = "+15551110001"
	rxBob   = "+15551110002"
)

func TestApplyReaction(t *testing.T) {
	db, line := openDB(t)
	msg := inbound(t, db, line, rxAlice, 1).Message
	base := storage.Reaction{MessageID: msg.ID, ChatID: msg.ChatID, LineID: line.ID, Type: "love", Sender: rxAlice, Added: true, SentAt: 100, SyncedAt: 1}
	apply := func(r storage.Reaction) (storage.Reaction, bool) {
		t.Helper()
		got, changed, err := db.ApplyReaction(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		return got, changed
	}
	first, changed := apply(base)
	if !changed || !storage.ValidID(first.ID, "rxn_") || !first.Added || first.SentAt != 100 || first.Sender != rxAlice || first.MessageID != msg.ID {
		t.Fatalf("new reaction: %+v changed %v", first, changed)
	}
	for _, step := range []struct {
		name       string
		added      bool
		sentAt     int64
		changed    bool
		wantAdded  bool
		wantSentAt int64
	}{
		{"the same state again", true, 200, false, true, 100},
		{"removed", false, 300, true, false, 300},
		{"an add older than the removal", true, 250, false, false, 300},
		{"removed again", false, 400, false, false, 300},
		{"added back", true, 500, true, true, 500},
		{"a removal older than the add", false, 450, false, true, 500},
	} {
		r := base
		r.Added, r.SentAt = step.added, step.sentAt
		got, changed := apply(r)
		if got.ID != first.ID || changed != step.changed || got.Added != step.wantAdded || got.SentAt != step.wantSentAt {
			t.Fatalf("%s: %+v changed %v", step.name, got, changed)
		}
		stored, err := db.ReactionsByMessage(ctx, msg.ID)
		if err != nil || len(stored) != 1 || stored[0] != got {
			t.Fatalf("%s: stored %+v %v, returned %+v", step.name, stored, err, got)
		}
	}

	// Another type, another sender: records of their own.
	like := base
	like.Type = "like"
	byBob := base
	byBob.Sender = rxBob
	for _, r := range []storage.Reaction{like, byBob} {
		if got, changed := apply(r); !changed || got.ID == first.ID {
			t.Fatalf("%+v: %+v changed %v", r, got, changed)
		}
	}
	if stored, _ := db.ReactionsByMessage(ctx, msg.ID); len(stored) != 3 {
		t.Fatalf("%d records, want 3", len(stored))
	}

	unknown := base
	unknown.MessageID = storage.NewID("msg_")
	if _, _, err := db.ApplyReaction(ctx, unknown); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("reaction to an unknown message: %v", err)
	}
	if stored, err := db.ReactionsByMessage(ctx, unknown.MessageID); err != nil || stored == nil || len(stored) != 0 {
		t.Fatalf("reactions of an unknown message: %#v %v", stored, err)
	}
}

// Reactions are listed oldest change first, and only the message's own.
func TestReactionsByMessage(t *testing.T) {
	db, line := openDB(t)
	a := inbound(t, db, line, rxAlice, 1).Message
	b := inbound(t, db, line, rxAlice, 2).Message
	react := func(m storage.Message, sender, typ string, added bool, at int64) {
		t.Helper()
		_, _, err := db.ApplyReaction(ctx, storage.Reaction{MessageID: m.ID, ChatID: m.ChatID, LineID: line.ID, Type: typ, Sender: sender,
			IsFromMe: sender == line.Handle, Added: added, SentAt: at, SyncedAt: at})
		if err != nil {
			t.Fatal(err)
		}
	}
	types := func(m storage.Message) []string {
		t.Helper()
		recs, err := db.ReactionsByMessage(ctx, m.ID)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range recs {
			if r.MessageID != m.ID {
				t.Fatalf("message %s lists a reaction of %s", m.ID, r.MessageID)
			}
			out = append(out, r.Type)
		}
		return out
	}
	react(a, rxBob, "like", true, 300)
	react(a, rxAlice, "love", true, 100)
	react(a, line.Handle, "laugh", true, 200)
	react(b, rxAlice, "question", true, 50)
	if got := types(a); !slices.Equal(got, []string{"love", "laugh", "like"}) {
		t.Fatalf("message a: %v", got)
	}
	if got := types(b); !slices.Equal(got, []string{"question"}) {
		t.Fatalf("message b: %v", got)
	}
	// A change moves a record to its new place.
	react(a, rxAlice, "love", false, 400)
	if got := types(a); !slices.Equal(got, []string{"laugh", "like", "love"}) {
		t.Fatalf("after removing love: %v", got)
	}
}

func TestTypingIndicators(t *testing.T) {
	db, line := openDB(t)
	chat := inbound(t, db, line, rxAlice, 1).Chat
	other := inbound(t, db, line, rxBob, 1).Chat
	t0 := time.UnixMilli(1_800_000_000_000)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	listed := func(now time.Time) []storage.Indicator {
		t.Helper()
		inds := db.TypingIndicators(chat.ID, now)
		if inds == nil {
			t.Fatal("TypingIndicators returned nil, not an empty list")
		}
		return inds
	}

	on := db.SetTyping(chat.ID, rxAlice, true, t0)
	if !storage.ValidID(on.ID, "ind_") || on.ChatID != chat.ID || on.Handle != rxAlice || !on.IsTyping || on.UpdatedAt != t0.UnixMilli() {
		t.Fatalf("new indicator: %+v", on)
	}
	if inds := listed(at(storage.TypingTTL - time.Millisecond)); len(inds) != 1 || inds[0] != on {
		t.Fatalf("just before the TTL: %+v", inds)
	}
	if inds := db.TypingIndicators(other.ID, t0); len(inds) != 0 {
		t.Fatalf("another chat: %+v", inds)
	}

	off := db.SetTyping(chat.ID, rxAlice, false, at(30*time.Second))
	if off.ID != on.ID || off.IsTyping || off.UpdatedAt != at(30*time.Second).UnixMilli() {
		t.Fatalf("stopped: %+v", off)
	}
	// An update older than the last one is late news: ignored.
	if late := db.SetTyping(chat.ID, rxAlice, true, at(10*time.Second)); late != off {
		t.Fatalf("older update: %+v, want %+v", late, off)
	}
	mine := db.SetTyping(chat.ID, line.Handle, true, at(40*time.Second))
	if mine.ID == on.ID {
		t.Fatal("two members share an indicator")
	}
	if inds := listed(at(40 * time.Second)); len(inds) != 2 {
		t.Fatalf("two members typing: %+v", inds)
	}
	// TypingTTL after its last change an indicator is gone, exactly.
	if inds := listed(at(30*time.Second + storage.TypingTTL - time.Millisecond)); len(inds) != 2 {
		t.Fatalf("a millisecond before rxAlice's TTL: %+v", inds)
	}
	if inds := listed(at(30*time.Second + storage.TypingTTL)); len(inds) != 1 || inds[0] != mine {
		t.Fatalf("at rxAlice's TTL: %+v", inds)
	}
	// After it expired, the member's next indicator is a new one.
	again := db.SetTyping(chat.ID, rxAlice, true, at(30*time.Second+storage.TypingTTL))
	if again.ID == on.ID || !again.IsTyping {
		t.Fatalf("indicator after expiry: %+v (old %s)", again, on.ID)
	}
	if inds := listed(at(40*time.Second + storage.TypingTTL)); len(inds) != 1 || inds[0] != again {
		t.Fatalf("at the line's TTL: %+v", inds)
	}
	if inds := listed(at(time.Hour)); len(inds) != 0 {
		t.Fatalf("an hour later: %+v", inds)
	}
}

func TestRecordRead(t *testing.T) {
	db, line := openDB(t)
	chat := inbound(t, db, line, rxAlice, 1).Chat
	read := func(handle string, at int64) storage.Receipt {
		t.Helper()
		r, err := db.RecordRead(ctx, chat.ID, handle, at)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	first := read(line.Handle, 100)
	if !storage.ValidID(first.ID, "rcp_") || first.ChatID != chat.ID || first.Handle != line.Handle || first.LastReadAt != 100 || first.SyncedAt == 0 {
		t.Fatalf("first receipt: %+v", first)
	}
	for _, at := range []int64{50, 100} {
		if r := read(line.Handle, at); r != first {
			t.Fatalf("read at %d after 100: %+v", at, r)
		}
	}
	if r := read(line.Handle, 200); r.ID != first.ID || r.LastReadAt != 200 {
		t.Fatalf("read forward: %+v", r)
	}
	theirs := read(rxAlice, 150)
	if theirs.ID == first.ID || theirs.Handle != rxAlice {
		t.Fatalf("the contact's receipt: %+v", theirs)
	}
	recs, err := db.Receipts(ctx, chat.ID)
	if err != nil || len(recs) != 2 || recs[0].Handle != line.Handle || recs[0].LastReadAt != 200 || recs[1] != theirs {
		t.Fatalf("receipts, most recently read first: %+v %v", recs, err)
	}

	unknown := storage.NewID("cht_")
	if _, err := db.RecordRead(ctx, unknown, rxAlice, 1); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("read of an unknown chat: %v", err)
	}
	if recs, err := db.Receipts(ctx, unknown); err != nil || recs == nil || len(recs) != 0 {
		t.Fatalf("receipts of an unknown chat: %#v %v", recs, err)
	}
}

// A voice memo's transcription may come after the memo: the network reports
// the message again, and the missing transcription is filled in, once.
func TestRecordInboundFillsTranscription(t *testing.T) {
	db, line := openDB(t)
	report := func(guid string, atts ...storage.Attachment) storage.InboundResult {
		t.Helper()
		res, err := db.RecordInbound(ctx, storage.Inbound{
			Chat: storage.Chat{ID: storage.NewID("cht_"), LineID: line.ID, GUID: "iMessage;-;" + rxAlice, Identifier: rxAlice, Service: "imessage"},
			Message: storage.Message{ID: storage.NewID("msg_"), GUID: guid, Sender: rxAlice, IsAudioMessage: true, SentAt: 1,
				Attachments: atts},
		})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	text := func(s string) *string { return &s }
	memo := storage.Attachment{FileID: storage.NewID("file_"), Filename: "Audio Message.caf", MimeType: "audio/x-caf", Size: 9}

	first := report("MEMO", memo)
	if first.Duplicate || first.Transcribed || first.Message.Attachments[0].Transcription != nil {
		t.Fatalf("first report: %+v", first)
	}
	if res := report("MEMO"); !res.Duplicate || res.Transcribed {
		t.Fatalf("a report without attachments: %+v", res)
	}
	if res := report("MEMO", storage.Attachment{}); !res.Duplicate || res.Transcribed {
		t.Fatalf("a report still without transcription: %+v", res)
	}
	filled := report("MEMO", storage.Attachment{Transcription: text("Running late")})
	att := filled.Message.Attachments[0]
	if !filled.Duplicate || !filled.Transcribed || filled.Message.ID != first.Message.ID || att.Transcription == nil ||
		*att.Transcription != "Running late" || att.FileID != memo.FileID || att.Filename != memo.Filename || att.Size != memo.Size {
		t.Fatalf("the transcription's report: %+v", filled)
	}
	// Never overwritten, by another transcription or by none.
	for _, tr := range []*string{text("Running lake"), nil} {
		if res := report("MEMO", storage.Attachment{Transcription: tr}); !res.Duplicate || res.Transcribed ||
			*res.Message.Attachments[0].Transcription != "Running late" {
			t.Fatalf("a later report: %+v", res)
		}
	}
	for _, get := range []func() (storage.Message, error){
		func() (storage.Message, error) { return db.MessageByGUID(ctx, "MEMO") },
		func() (storage.Message, error) { return db.MessageByID(ctx, first.Message.ID) },
	} {
		m, err := get()
		if err != nil || len(m.Attachments) != 1 || m.Attachments[0].Transcription == nil || *m.Attachments[0].Transcription != "Running late" ||
			m.Attachments[0].FileID != memo.FileID {
			t.Fatalf("stored: %+v %v", m, err)
		}
	}
	if msgs, _, err := db.ListMessages(ctx, first.Chat.ID, nil, 10); err != nil || len(msgs) != 1 || *msgs[0].Attachments[0].Transcription != "Running late" {
		t.Fatalf("chat history: %+v %v", msgs, err)
	}

	// A memo first reported with its transcription keeps it.
	memo.Transcription = text("On my way")
	if res := report("MEMO-2", memo); res.Duplicate || res.Transcribed {
		t.Fatalf("new memo with a transcription: %+v", res)
	}
	if res := report("MEMO-2", storage.Attachment{Transcription: text("Something else")}); res.Transcribed || *res.Message.Attachments[0].Transcription != "On my way" {
		t.Fatalf("a second transcription: %+v", res)
	}
}
