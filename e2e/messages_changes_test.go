package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/blueline-app/blueline/bridge/messages/chatdb/chatdbtest"
	"github.com/blueline-app/blueline/testkit"
)

// eventLog hands out a receiver's deliveries one at a time, each once.
type eventLog struct {
	t    *testing.T
	rc   *receiver
	used map[string]bool // delivery IDs handed out
}

func newEventLog(t *testing.T, rc *receiver) *eventLog {
	return &eventLog{t: t, rc: rc, used: map[string]bool{}}
}

// next waits for a delivery of event, not handed out before, whose data
// satisfies match.
func (l *eventLog) next(event string, match func(d map[string]any) bool) map[string]any {
	l.t.Helper()
	var found map[string]any
	testkit.Eventually(l.t, 10*time.Second, func() bool {
		for _, r := range l.rc.Requests() {
			if r.Err != nil {
				l.t.Fatalf("delivery does not verify: %v", r.Err)
			}
			if l.used[r.DeliveryID()] || r.Event() != event || !match(r.Data()) {
				continue
			}
			l.used[r.DeliveryID()] = true
			found = r.Data()
			return true
		}
		return false
	})
	return found
}

// counts is how many deliveries of each event the receiver has had. A
// delivery made again (the daemon stopped before it recorded the answer:
// delivery is at least once) counts once, by its ID.
func (l *eventLog) counts() map[string]int {
	out, seen := map[string]int{}, map[string]bool{}
	for _, r := range l.rc.Requests() {
		if !seen[r.DeliveryID()] {
			seen[r.DeliveryID()] = true
			out[r.Event()]++
		}
	}
	return out
}

func guidIs(guid string) func(map[string]any) bool {
	return func(d map[string]any) bool { return d["guid"] == guid }
}

func fieldIs(name string, v any) func(map[string]any) bool {
	return func(d map[string]any) bool { return d[name] == v }
}

// millis is t as the API gives it: Unix ms, as a JSON number.
func millis(t time.Time) float64 { return float64(t.UnixMilli()) }

// messageByGUID finds a message among a chat's.
func (td *testDaemon) messageByGUID(key, to, guid string) map[string]any {
	td.t.Helper()
	for _, m := range td.messagesOf(key, to) {
		if m["guid"] == guid {
			return m
		}
	}
	td.t.Fatalf("no message %s with %s", guid, to)
	return nil
}

// Everything Messages records after writing a row reaches the API and the
// webhooks that ask for it: edits, unsends in both forms, delivered and
// read, emoji and sticker tapbacks, a changed tapback, group changes; and
// no inbound message is lost on the way: not one whose storing fails for a
// while, not a file named only in the body, not a file that comes late.
func TestMessagesChanges(t *testing.T) {
	const alice, bob, carol = "+15551230001", "+15551230002", "+15551230003"
	app := newMessagesApp(t, func(int, osaRun) answer { return accepted })
	dm := app.db.DirectChat("imessage", alice)
	group := app.db.GroupChat("imessage", "Climbing", alice, carol)
	all, fourEvents := newReceiver(t, nil), newReceiver(t, nil)
	td, key := app.macDaemon(t, "transfer_wait = \"1s\"\n"+fastSends, webhookConfig(t, all, ""), alice, dm)
	td.register(key, macLine, all, "message.received", "message.sent", "message.edited", "message.unsent", "message.delivered",
		"receipt.read", "chat.updated", "reaction.added", "reaction.removed")
	td.register(key, macLine, fourEvents, "message.received", "message.sent", "reaction.added", "reaction.removed")
	ev := newEventLog(t, all)
	attachments := filepath.Join(app.home, "Library", "Messages", "Attachments")
	file := func(rel, content string) (stored string) {
		p := filepath.Join(attachments, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		writeFile(t, p, content)
		return "~/Library/Messages/Attachments/" + rel
	}
	download := func(att map[string]any) string {
		t.Helper()
		url, ok := att["url"].(string)
		if !ok {
			t.Fatalf("attachment without a URL: %v", att)
		}
		resp, body := get(t, "GET", url)
		if resp.StatusCode != 200 {
			t.Fatalf("download %s: %d", url, resp.StatusCode)
		}
		return string(body)
	}

	// An edit: the text becomes the latest version, with edited_at.
	_, edited := app.db.Insert(chatdbtest.Msg{Chat: dm, From: alice, Text: "see you at 5", Ventura: true})
	first := ev.next("message.received", guidIs(edited))
	editAt := time.Now().Add(-time.Second)
	app.db.Edit(edited, "see you at 6", editAt)
	d := ev.next("message.edited", guidIs(edited))
	if d["id"] != first["id"] || d["text"] != "see you at 6" || d["edited_at"] != millis(editAt) || d["unsent_at"] != nil || d["line_handle"] != macLine {
		t.Fatalf("message.edited: %v", d)
	}
	if m := td.messageByGUID(key, alice, edited); m["text"] != "see you at 6" || m["edited_at"] != millis(editAt) {
		t.Fatalf("edited message over HTTP: %v", m)
	}

	// An unsend as macOS 13 to 15 record it (date_retracted), of a message
	// with a photo: it keeps its ID, loses its text and its attachments.
	_, retracted := app.db.Insert(chatdbtest.Msg{Chat: dm, From: alice, Text: "oops", Attachments: []chatdbtest.FileSpec{{
		Path: file("ab/01/oops.jpeg", "jpeg"), MimeType: "image/jpeg", TransferName: "oops.jpeg", TotalBytes: 4}}})
	if d := ev.next("message.received", guidIs(retracted)); len(d["attachments"].([]any)) != 1 {
		t.Fatalf("message with a photo: %v", d)
	}
	unsendAt := time.Now().Add(-time.Second)
	app.db.Unsend(retracted, unsendAt)
	d = ev.next("message.unsent", guidIs(retracted))
	if d["text"] != nil || len(d["attachments"].([]any)) != 0 || d["unsent_at"] != millis(unsendAt) {
		t.Fatalf("message.unsent: %v", d)
	}
	if m := td.messageByGUID(key, alice, retracted); m["text"] != nil || len(m["attachments"].([]any)) != 0 || m["unsent_at"] != millis(unsendAt) {
		t.Fatalf("unsent message over HTTP: %v", m)
	}
	// …and as macOS 26 may: an edit that empties the body.
	_, emptied := app.db.Insert(chatdbtest.Msg{Chat: dm, From: alice, Text: "wrong chat, sorry"})
	ev.next("message.received", guidIs(emptied))
	app.db.UnsendAsEdit(emptied, unsendAt)
	if d := ev.next("message.unsent", guidIs(emptied)); d["text"] != nil || d["unsent_at"] != millis(unsendAt) {
		t.Fatalf("message.unsent (an emptying edit): %v", d)
	}

	// Delivered, then read: a message sent through the API.
	var sent string
	app.setHandler(func(int, osaRun) answer { return answer{then: func() { sent = app.sendRow(dm, alice, "on my way") }} })
	obx := td.send(key, map[string]any{"from": macLine, "to": alice, "text": "on my way"})
	if item := td.waitOutbox(key, obx["id"].(string)); item["status"] != "sent" {
		t.Fatalf("send: %v", item)
	}
	deliveredAt, readAt := time.Now().Add(-2*time.Second), time.Now().Add(-time.Second)
	app.db.MarkDelivered(sent, deliveredAt)
	d = ev.next("message.delivered", guidIs(sent))
	if d["delivered_at"] != millis(deliveredAt) || d["read_at"] != nil || d["outbox_id"] != obx["id"] || d["is_from_me"] != true {
		t.Fatalf("message.delivered: %v", d)
	}
	app.db.MarkRead(sent, readAt)
	rcpt := ev.next("receipt.read", fieldIs("handle", alice))
	if rcpt["last_read_at"] != millis(readAt) || rcpt["chat_id"] != d["chat_id"] || rcpt["line_handle"] != macLine || rcpt["id"] == nil {
		t.Fatalf("receipt.read: %v", rcpt)
	}
	if m := td.messageByGUID(key, alice, sent); m["delivered_at"] != millis(deliveredAt) || m["read_at"] != millis(readAt) {
		t.Fatalf("read message over HTTP: %v", m)
	}
	receipts := td.listAll(key, "/v1/receipts?from="+macLine+"&to="+alice)
	if len(receipts) != 1 || receipts[0]["handle"] != alice || receipts[0]["last_read_at"] != millis(readAt) || receipts[0]["id"] != rcpt["id"] {
		t.Fatalf("receipts: %v", receipts)
	}

	// Emoji and sticker tapbacks, and a changed tapback: one current
	// tapback per sender.
	msgID := first["id"]
	app.db.Insert(chatdbtest.Msg{Chat: dm, From: alice, Text: "Reacted 🎉 to “see you at 6”", ReactionTo: edited, ReactionType: 2006, Emoji: "🎉"})
	d = ev.next("reaction.added", fieldIs("type", "emoji"))
	if d["emoji"] != "🎉" || d["message_id"] != msgID || d["sender"] != alice || d["added"] != true {
		t.Fatalf("emoji tapback: %v", d)
	}
	app.db.Insert(chatdbtest.Msg{Chat: dm, From: alice, Text: "Removed 🎉 from “see you at 6”", ReactionTo: edited, ReactionType: 3006, Emoji: "🎉"})
	if d := ev.next("reaction.removed", fieldIs("type", "emoji")); d["emoji"] != "🎉" || d["added"] != false {
		t.Fatalf("emoji tapback removed: %v", d)
	}
	_, love := app.db.Insert(chatdbtest.Msg{Chat: dm, From: alice, Text: "Loved “see you at 6”", ReactionTo: edited, ReactionType: 2000})
	ev.next("reaction.added", fieldIs("type", "love"))
	// Changing a tapback, Messages deletes the old row and writes the new.
	app.db.DeleteMessage(love)
	app.db.Insert(chatdbtest.Msg{Chat: dm, From: alice, Text: "Liked “see you at 6”", ReactionTo: edited, ReactionType: 2001})
	ev.next("reaction.removed", fieldIs("type", "love"))
	ev.next("reaction.added", fieldIs("type", "like"))
	app.db.Insert(chatdbtest.Msg{Chat: dm, From: alice, ReactionTo: edited, ReactionType: 2007, Attachments: []chatdbtest.FileSpec{{
		Path: file("st/01/sticker.heic", "heic"), MimeType: "image/heic", TransferName: "sticker.heic", TotalBytes: 4}}})
	ev.next("reaction.removed", fieldIs("type", "like"))
	if d := ev.next("reaction.added", fieldIs("type", "sticker")); d["emoji"] != nil || d["message_id"] != msgID {
		t.Fatalf("sticker tapback: %v", d)
	}
	var current []any
	for _, r := range td.listAll(key, "/v1/reactions?message_id="+edited) {
		if r["added"] == true {
			current = append(current, r["type"])
		}
	}
	if !slices.Equal(current, []any{"sticker"}) {
		t.Fatalf("current tapbacks %v, want the sticker only", current)
	}

	// Group changes: the chat changes when Messages records them.
	_, hello := app.db.Insert(chatdbtest.Msg{Chat: group, From: alice, Text: "group hello"})
	chatID := ev.next("message.received", guidIs(hello))["chat_id"]
	app.db.AddMember(group, alice, bob)
	d = ev.next("chat.updated", fieldIs("chat_id", chatID))
	change := d["change"].(map[string]any)
	if change["action"] != "participant_added" || change["participant"] != bob || change["by"] != alice || change["is_from_me"] != false ||
		d["id"] != chatID || !slices.Contains(d["participants"].([]any), any(bob)) || d["line_handle"] != macLine {
		t.Fatalf("member added: %v", d)
	}
	app.db.Rename(group, carol, "Crag crew")
	d = ev.next("chat.updated", fieldIs("chat_id", chatID))
	if change := d["change"].(map[string]any); change["action"] != "renamed" || change["name"] != "Crag crew" || change["by"] != carol || d["name"] != "Crag crew" {
		t.Fatalf("renamed: %v", d)
	}
	app.db.Leave(group, carol)
	if change := ev.next("chat.updated", fieldIs("chat_id", chatID))["change"].(map[string]any); change["action"] != "participant_left" || change["participant"] != carol {
		t.Fatalf("member left: %v", change)
	}
	app.db.SetGroupPhoto(group, "")
	if change := ev.next("chat.updated", fieldIs("chat_id", chatID))["change"].(map[string]any); change["action"] != "photo_changed" || change["by"] != macLine || change["is_from_me"] != true {
		t.Fatalf("photo changed: %v", change)
	}
	var chat map[string]any
	for _, c := range td.listAll(key, "/v1/chats?from="+macLine) {
		if c["id"] == chatID {
			chat = c
		}
	}
	if chat == nil || chat["name"] != "Crag crew" || fmt.Sprint(chat["participants"]) != fmt.Sprint([]any{alice, bob}) {
		t.Fatalf("group over HTTP: %v", chat)
	}

	// A file named only in attributedBody (no join row) is kept.
	_, bodyOnly := app.db.Insert(chatdbtest.Msg{Chat: dm, From: alice, Text: "the menu", Attachments: []chatdbtest.FileSpec{{
		Path: file("mn/01/menu.pdf", "menu"), MimeType: "application/pdf", TransferName: "menu.pdf", TotalBytes: 4, BodyOnly: true}}})
	d = ev.next("message.received", guidIs(bodyOnly))
	if atts := d["attachments"].([]any); len(atts) != 1 || atts[0].(map[string]any)["filename"] != "menu.pdf" || download(atts[0].(map[string]any)) != "menu" {
		t.Fatalf("attachment named only in the body: %v", d)
	}

	// Files that come late: one still transferring after transfer_wait,
	// one whose file is not on the disk yet (downloading from iCloud).
	_, transferring := app.db.Insert(chatdbtest.Msg{Chat: dm, From: alice, Attachments: []chatdbtest.FileSpec{{
		MimeType: "image/jpeg", TransferName: "late.jpeg", TotalBytes: 4}}})
	_, offloaded := app.db.Insert(chatdbtest.Msg{Chat: dm, From: alice, Attachments: []chatdbtest.FileSpec{{
		Path: "~/Library/Messages/Attachments/ic/01/cloud.png", MimeType: "image/png", TransferName: "cloud.png", TotalBytes: 5}}})
	for _, g := range []string{transferring, offloaded} {
		if a := ev.next("message.received", guidIs(g))["attachments"].([]any)[0].(map[string]any); a["url"] != nil || a["filename"] == nil {
			t.Fatalf("a file not there yet: %v", a)
		}
	}
	app.db.FinishTransfer(transferring, file("lt/01/late.jpeg", "late"))
	file("ic/01/cloud.png", "cloud")
	for guid, want := range map[string]string{transferring: "late", offloaded: "cloud"} {
		var att map[string]any
		testkit.Eventually(t, 10*time.Second, func() bool {
			att = td.messageByGUID(key, alice, guid)["attachments"].([]any)[0].(map[string]any)
			return att["url"] != nil
		})
		if got := download(att); got != want {
			t.Fatalf("late file: %q, want %q", got, want)
		}
	}

	// Storing fails (a directory where the file should be: the copy
	// fails), across a restart: the row is tried again until it is
	// stored, and the rows after it go on meanwhile.
	broken := filepath.Join(attachments, "rp/01/report.pdf")
	if err := os.MkdirAll(broken, 0o700); err != nil {
		t.Fatal(err)
	}
	_, report := app.db.Insert(chatdbtest.Msg{Chat: dm, From: alice, Text: "the report", Attachments: []chatdbtest.FileSpec{{
		Path: "~/Library/Messages/Attachments/rp/01/report.pdf", MimeType: "application/pdf", TransferName: "report.pdf", TotalBytes: 3}}})
	_, after := app.db.Insert(chatdbtest.Msg{Chat: dm, From: alice, Text: "did you get it?"})
	ev.next("message.received", guidIs(after))
	before := ev.counts()
	td.stop()
	td.start()
	if err := os.Remove(broken); err != nil {
		t.Fatal(err)
	}
	file("rp/01/report.pdf", "pdf")
	if a := ev.next("message.received", guidIs(report))["attachments"].([]any); len(a) != 1 {
		t.Fatalf("the report, stored at last: %v", a)
	}
	// A retry between the removal and the write stores the message with
	// the file missing, and the file is filled in when it appears.
	var att map[string]any
	testkit.Eventually(t, 10*time.Second, func() bool {
		att = td.messageByGUID(key, alice, report)["attachments"].([]any)[0].(map[string]any)
		return att["url"] != nil
	})
	if got := download(att); got != "pdf" {
		t.Fatalf("the report's file: %q", got)
	}

	// Nothing was reported twice, restart included; the receiver of the
	// four reference events got none of the others.
	_, sentinel := app.db.Insert(chatdbtest.Msg{Chat: dm, From: alice, Text: "sentinel"})
	ev.next("message.received", guidIs(sentinel))
	after2 := ev.counts()
	before["message.received"] += 2 // the report, the sentinel
	if fmt.Sprint(after2) != fmt.Sprint(before) {
		t.Fatalf("events after the restart %v, want %v", after2, before)
	}
	if a := td.messageByGUID(key, alice, edited); a["text"] != "see you at 6" {
		t.Fatalf("after the restart: %v", a)
	}
	testkit.Eventually(t, 10*time.Second, func() bool {
		got := fourEvents.Requests()
		return len(got) > 0 && got[len(got)-1].Data()["guid"] == sentinel
	})
	for _, r := range fourEvents.Requests() {
		if e := r.Event(); e != "message.received" && e != "message.sent" && e != "reaction.added" && e != "reaction.removed" {
			t.Fatalf("the four-event receiver got %s", r.Raw)
		}
	}
}

// New rows are seen at once after Messages checkpoints its write-ahead log
// (truncated), and after it closes and opens the database again: with the
// backstop poll an hour away, only the change notices can tell.
func TestMessagesWALCheckpoint(t *testing.T) {
	const alice = "+15551230001"
	app := newMessagesApp(t, func(int, osaRun) answer { return accepted })
	dm := app.db.DirectChat("imessage", alice)
	rc := newReceiver(t, nil)
	td, key := app.macDaemon(t, `poll = "1h"`, webhookConfig(t, rc, ""), alice, dm)
	td.register(key, macLine, rc, "message.received", "message.edited")
	ev := newEventLog(t, rc)

	app.db.Checkpoint()
	_, g := app.db.Insert(chatdbtest.Msg{Chat: dm, From: alice, Text: "after a checkpoint"})
	ev.next("message.received", guidIs(g))
	app.db.Edit(g, "after a checkpoint, edited", time.Now())
	ev.next("message.edited", guidIs(g))
	app.db.Checkpoint()
	app.db.Reopen()
	_, g2 := app.db.Insert(chatdbtest.Msg{Chat: dm, From: alice, Text: "after Messages reopened"})
	ev.next("message.received", guidIs(g2))
}
