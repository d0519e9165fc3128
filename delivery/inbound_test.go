package delivery_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/blueline-app/blueline/bridge"
	"github.com/blueline-app/blueline/bridge/sim"
	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/storage"
)

// writeTemp writes a file the way a bridge finds one on disk.
func writeTemp(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// stored reads back the blob of a file in the store.
func (e *env) stored(fileID string) string {
	e.t.Helper()
	b, err := os.ReadFile(e.files.Path(fileID))
	if err != nil {
		e.t.Fatal(err)
	}
	return string(b)
}

// An inbound message's files are copied into the file store; one the
// network has not delivered yet keeps its name, type and size, and is
// filled in when the message is reported again with it. A GUID is stored once.
func TestReceiverRecordsAttachmentsOnce(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	photo := writeTemp(t, "IMG_0001.jpeg", "jpeg bytes")
	text := "look"
	in := bridge.Inbound{Line: mainLine, Chat: sim.OneToOne("imessage", alice), GUID: sim.NewGUID(), Sender: alice, Text: &text,
		SentAt: time.UnixMilli(1_700_000_000_000),
		Attachments: []bridge.File{
			{Path: photo, Filename: "IMG_0001.jpeg", MimeType: "image/jpeg", Size: 10},
			{Filename: "late.mov", MimeType: "video/quicktime", Size: 99},
		}}
	first, err := e.recv.Record(ctx, in)
	if err != nil || first.Duplicate {
		t.Fatal(first, err)
	}
	m := first.Message
	if m.SentAt != 1_700_000_000_000 || m.Service != "imessage" || m.Sender != alice || m.IsFromMe || *m.Text != "look" ||
		first.Chat.Identifier != alice || first.Chat.LineID != e.line.ID {
		t.Fatalf("recorded %+v in %+v", m, first.Chat)
	}
	if len(m.Attachments) != 2 || m.Attachments[0].FileID == "" || m.Attachments[0].Filename != "IMG_0001.jpeg" ||
		m.Attachments[1].FileID != "" || m.Attachments[1].Size != 99 {
		t.Fatalf("attachments %+v", m.Attachments)
	}
	photoID := m.Attachments[0].FileID
	if got := e.stored(photoID); got != "jpeg bytes" {
		t.Fatalf("stored copy %q", got)
	}
	if f, err := e.db.FileByID(ctx, photoID); err != nil || f.LineID != e.line.ID || f.MimeType != "image/jpeg" {
		t.Fatalf("file record %+v %v", f, err)
	}

	// Reported again, now with the late file: the message is not stored
	// twice, the photo is not copied again, the video is filled in.
	in.Attachments[1].Path = writeTemp(t, "late.mov", "movie")
	again, err := e.recv.Record(ctx, in)
	if err != nil || !again.Duplicate || again.Message.ID != m.ID {
		t.Fatalf("second record: %+v %v", again, err)
	}
	got, err := e.db.MessageByGUID(ctx, in.GUID)
	if err != nil || got.Attachments[0].FileID != photoID || got.Attachments[1].FileID == "" {
		t.Fatalf("after the late file: %+v %v", got.Attachments, err)
	}
	if s := e.stored(got.Attachments[1].FileID); s != "movie" {
		t.Fatalf("late file stored as %q", s)
	}
	if msgs, _, _ := e.db.ListMessages(ctx, first.Chat.ID, nil, 10); len(msgs) != 1 {
		t.Fatalf("%d messages stored", len(msgs))
	}

	if _, err := e.recv.Record(ctx, bridge.Inbound{Line: "+15559999999", GUID: sim.NewGUID()}); err == nil {
		t.Fatal("a message for an unknown line was recorded")
	}
	in.GUID, in.Attachments = sim.NewGUID(), []bridge.File{{Path: filepath.Join(t.TempDir(), "gone"), Filename: "gone"}}
	if _, err := e.recv.Receive(ctx, in); err == nil {
		t.Fatal("a message whose file cannot be read was recorded")
	}
}

// RecordUpdate stores edits, unsends and receipts, copies a file that
// arrived late, and says ErrNotRecorded for a message it does not know.
func TestReceiverRecordUpdate(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	in := e.inbound(mainLine, alice, "helo")
	guid := in.Message.GUID

	edited := "hello"
	m, events, err := e.recv.RecordUpdate(ctx, bridge.MessageUpdate{Line: mainLine, GUID: guid, Text: &edited, EditedAt: time.UnixMilli(5)})
	if err != nil || !slices.Equal(events, []string{api.EventMessageEdited}) || *m.Text != "hello" || m.EditedAt != 5 {
		t.Fatalf("edit: %+v %v %v", m, events, err)
	}
	// The same update again is nothing new.
	if _, events, err := e.recv.RecordUpdate(ctx, bridge.MessageUpdate{Line: mainLine, GUID: guid, Text: &edited, EditedAt: time.UnixMilli(5)}); err != nil || len(events) != 0 {
		t.Fatalf("repeated edit: %v %v", events, err)
	}

	// A file the message lacked is copied in through an update.
	text := "a file follows"
	withFile := bridge.Inbound{Line: mainLine, Chat: sim.OneToOne("imessage", alice), GUID: sim.NewGUID(), Sender: alice, Text: &text,
		Attachments: []bridge.File{{Filename: "doc.pdf", MimeType: "application/pdf", Size: 3}}}
	if _, err := e.recv.Receive(ctx, withFile); err != nil {
		t.Fatal(err)
	}
	m, _, err = e.recv.RecordUpdate(ctx, bridge.MessageUpdate{Line: mainLine, GUID: withFile.GUID,
		Attachments: []bridge.File{{Path: writeTemp(t, "doc.pdf", "pdf"), Filename: "doc.pdf", MimeType: "application/pdf", Size: 3}}})
	if err != nil || len(m.Attachments) != 1 || m.Attachments[0].FileID == "" {
		t.Fatalf("late file: %+v %v", m, err)
	}
	if s := e.stored(m.Attachments[0].FileID); s != "pdf" {
		t.Fatalf("late file stored as %q", s)
	}

	if err := e.recv.ReceiveUpdate(ctx, bridge.MessageUpdate{Line: mainLine, GUID: guid, UnsentAt: time.UnixMilli(9)}); err != nil {
		t.Fatal(err)
	}
	if got, _ := e.db.MessageByGUID(ctx, guid); got.UnsentAt != 9 || got.Text != nil {
		t.Fatalf("unsent message %+v", got)
	}

	for _, u := range []bridge.MessageUpdate{
		{Line: mainLine, GUID: "unknown", Text: &edited, EditedAt: time.UnixMilli(5)},
		{Line: mainLine, GUID: "unknown", Attachments: []bridge.File{{Filename: "x"}}},
	} {
		if _, _, err := e.recv.RecordUpdate(ctx, u); !errors.Is(err, bridge.ErrNotRecorded) {
			t.Errorf("update of an unknown message: %v", err)
		}
	}
	if _, _, err := e.recv.RecordUpdate(ctx, bridge.MessageUpdate{Line: "+15559999999", GUID: guid}); err == nil || errors.Is(err, bridge.ErrNotRecorded) {
		t.Errorf("update on an unknown line: %v", err)
	}
}

// History is stored without copying files; once the import is settled
// every GUID is still found, and a live report of one is a duplicate.
func TestReceiverHistory(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	t1, t2 := "old one", "old two"
	msgs := []bridge.Inbound{
		{Line: mainLine, Chat: sim.OneToOne("imessage", alice), GUID: sim.NewGUID(), Sender: alice, Text: &t1, SentAt: time.UnixMilli(1000),
			Attachments: []bridge.File{{Path: writeTemp(t, "a.jpg", "x"), Filename: "a.jpg", MimeType: "image/jpeg", Size: 1}}},
		{Line: mainLine, Chat: sim.OneToOne("imessage", alice), GUID: sim.NewGUID(), Sender: mainLine, IsFromMe: true, Text: &t2, SentAt: time.UnixMilli(2000)},
	}
	if _, err := e.recv.ReceiveHistory(ctx, mainLine, msgs); err != nil {
		t.Fatal(err)
	}
	if err := e.recv.HistoryImported(ctx, mainLine); err != nil {
		t.Fatal(err)
	}
	first, err := e.db.MessageByGUID(ctx, msgs[0].GUID)
	if err != nil || len(first.Attachments) != 1 || first.Attachments[0].FileID != "" || first.Attachments[0].Filename != "a.jpg" || first.SentAt != 1000 {
		t.Fatalf("history message %+v %v", first, err)
	}
	if second, err := e.db.MessageByGUID(ctx, msgs[1].GUID); err != nil || !second.IsFromMe || second.ChatID != first.ChatID {
		t.Fatalf("history message %+v %v", second, err)
	}
	res, err := e.recv.Record(ctx, msgs[0])
	if err != nil || !res.Duplicate || res.Message.ID != first.ID {
		t.Fatalf("live report of a history message: %+v %v", res, err)
	}
	if _, err := e.recv.ReceiveHistory(ctx, "+15559999999", msgs); err == nil {
		t.Fatal("history for an unknown line was stored")
	}
}

func TestReceiverReactions(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	target := e.inbound(mainLine, alice, "hi").Message
	rec, changed, err := e.recv.RecordReaction(ctx, bridge.InboundReaction{Line: mainLine, Chat: sim.OneToOne("imessage", alice),
		TargetGUID: target.GUID, Type: bridge.ReactionEmoji, Emoji: "🎉", Added: true, Sender: alice})
	if err != nil || !changed || rec.MessageID != target.ID || rec.Emoji != "🎉" || rec.SentAt == 0 {
		t.Fatalf("emoji reaction: %+v %v %v", rec, changed, err)
	}
	// A like replaces it (the emoji is kept, removed); a like's emoji field is dropped.
	if err := e.recv.ReceiveReaction(ctx, bridge.InboundReaction{Line: mainLine, TargetGUID: target.GUID, Type: "like", Emoji: "x", Added: true, Sender: alice}); err != nil {
		t.Fatal(err)
	}
	if rs, err := e.db.ReactionsByMessage(ctx, target.ID); err != nil || len(rs) != 2 || rs[0].Type != bridge.ReactionEmoji || rs[0].Added ||
		rs[1].Type != "like" || !rs[1].Added || rs[1].Emoji != "" {
		t.Fatalf("reactions %+v %v", rs, err)
	}
	for name, in := range map[string]bridge.InboundReaction{
		"emoji without emoji": {Line: mainLine, TargetGUID: target.GUID, Type: bridge.ReactionEmoji},
		"unknown type":        {Line: mainLine, TargetGUID: target.GUID, Type: "shrug"},
		"unknown line":        {Line: "+15559999999", TargetGUID: target.GUID, Type: "like"},
	} {
		if _, _, err := e.recv.RecordReaction(ctx, in); err == nil || errors.Is(err, bridge.ErrNotRecorded) {
			t.Errorf("%s: %v", name, err)
		}
	}
	// A message of another line, or none at all: not recorded (yet).
	other := e.inbound(otherLine, alice, "hi").Message
	for _, guid := range []string{"unknown", other.GUID} {
		if _, _, err := e.recv.RecordReaction(ctx, bridge.InboundReaction{Line: mainLine, TargetGUID: guid, Type: "like"}); !errors.Is(err, bridge.ErrNotRecorded) {
			t.Errorf("reaction to %s: %v", guid, err)
		}
	}
}

// Group changes, typing, read receipts and late send failures land on the
// chats and messages they concern.
func TestReceiverChatEvents(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	group := sim.NewGroup("imessage", "Climbing", []string{alice, bob})
	up := bridge.ChatUpdate{Line: mainLine, Chat: group, GUID: sim.NewGUID(), Action: bridge.ChatParticipantAdded, Participant: carol, By: alice}
	cu, applied, err := e.recv.RecordChatUpdate(ctx, up)
	if err != nil || !applied || !slices.Contains(cu.Chat.Participants, carol) || cu.At == 0 {
		t.Fatalf("chat update: %+v %v %v", cu, applied, err)
	}
	if _, applied, err := e.recv.RecordChatUpdate(ctx, up); err != nil || applied {
		t.Fatalf("the same change again: applied %v %v", applied, err)
	}
	if err := e.recv.ReceiveChatUpdate(ctx, bridge.ChatUpdate{Line: "+15559999999", Chat: group, GUID: sim.NewGUID()}); err == nil {
		t.Fatal("a change on an unknown line was applied")
	}

	ind, err := e.recv.RecordTyping(ctx, bridge.InboundTyping{Line: mainLine, Chat: group, Sender: bob, On: true})
	if err != nil || !ind.IsTyping || ind.Handle != bob {
		t.Fatalf("typing: %+v %v", ind, err)
	}
	if got := e.db.TypingIndicators(cu.Chat.ID, time.Now()); len(got) != 1 {
		t.Fatalf("indicators %+v", got)
	}
	if err := e.recv.ReceiveTyping(ctx, bridge.InboundTyping{Line: mainLine, Chat: sim.OneToOne("imessage", "+15558888888"), Sender: bob}); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("typing in an unknown chat: %v", err)
	}

	if err := e.recv.ReceiveRead(ctx, bridge.InboundRead{Line: mainLine, Chat: group, Reader: bob, ReadAt: time.UnixMilli(77)}); err != nil {
		t.Fatal(err)
	}
	if rs, err := e.db.Receipts(ctx, cu.Chat.ID); err != nil || len(rs) != 1 || rs[0].LastReadAt != 77 || rs[0].Handle != bob {
		t.Fatalf("receipts %+v %v", rs, err)
	}
	if err := e.recv.ReceiveRead(ctx, bridge.InboundRead{Line: "+15559999999", Chat: group}); err == nil {
		t.Fatal("a receipt on an unknown line was recorded")
	}

	// A late failure: only for a message of a sent outbox item.
	net := sim.New(0)
	chat := e.inbound(mainLine, alice, "hi").Chat
	item := e.sendText(chat, "out")
	e.run(net, deliveryOptions())
	item = e.wait(item.ID, completed)
	sent, err := e.db.MessageByID(ctx, item.MessageID)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.recv.ReceiveSendFailure(ctx, bridge.SendFailure{Line: mainLine, GUID: sent.GUID, Reason: "Not Delivered"}); err != nil {
		t.Fatal(err)
	}
	if item, _ := e.db.OutboxItemByID(ctx, item.ID); item.Status != storage.StatusFailed || item.Error != "Not Delivered" {
		t.Fatalf("after a late failure: %+v", item)
	}
	inboundMsg := e.inbound(mainLine, alice, "theirs").Message
	if err := e.recv.ReceiveSendFailure(ctx, bridge.SendFailure{Line: mainLine, GUID: inboundMsg.GUID}); err != nil {
		t.Fatalf("late failure of a message not ours: %v", err)
	}
	if err := e.recv.ReceiveSendFailure(ctx, bridge.SendFailure{Line: mainLine, GUID: "unknown"}); !errors.Is(err, bridge.ErrNotRecorded) {
		t.Fatalf("late failure of an unknown message: %v", err)
	}
	if err := e.recv.ReceiveSendFailure(ctx, bridge.SendFailure{Line: "+15559999999", GUID: sent.GUID}); err == nil {
		t.Fatal("a late failure on an unknown line was recorded")
	}
}
