package chatdbtest_test

import (
	"database/sql"
	"os"
	"path/filepath"
	"testing"
	"time"

	"howett.net/plist"

	"github.com/blueline-app/blueline/bridge/messages/chatdb/chatdbtest"
	"github.com/blueline-app/blueline/bridge/messages/typedstream"
)

// count runs a COUNT(*) query on the fixture.
func count(t *testing.T, f *chatdbtest.Fixture, query string, args ...any) int {
	t.Helper()
	var n int
	if err := f.QueryRow(query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// The one-to-one fixture builders write the rows Messages writes: handles
// once per address and service, a chat under the GUID asked for, state
// changes on existing rows.
func TestFixtureMessageStates(t *testing.T) {
	const alice = "+15551110001"
	f := chatdbtest.New(t, t.TempDir())
	if filepath.Base(f.Path()) != "chat.db" {
		t.Fatalf("Path() = %s", f.Path())
	}

	h := f.Handle(alice, "sms")
	if again := f.Handle(alice, "SMS"); again != h {
		t.Errorf("Handle made a second row (%d, then %d) for the same address and service", h, again)
	}
	if other := f.Handle(alice, "iMessage"); other == h {
		t.Error("Handle reused the SMS handle for iMessage")
	}
	var service string
	if err := f.QueryRow("SELECT service FROM handle WHERE ROWID = ?", h).Scan(&service); err != nil || service != "SMS" {
		t.Errorf("handle service %q, %v; want SMS", service, err)
	}

	anyChat := f.ChatWithGUID("any;-;"+alice, "iMessage", alice)
	if anyChat.Identifier != alice || anyChat.GUID != "any;-;"+alice || anyChat.RowID == 0 {
		t.Fatalf("ChatWithGUID = %+v", anyChat)
	}
	var style int
	if err := f.QueryRow("SELECT style FROM chat WHERE ROWID = ?", anyChat.RowID).Scan(&style); err != nil || style != 45 {
		t.Errorf("one-to-one chat style %d, %v; want 45", style, err)
	}
	group := f.ChatWithGUID("any;+;chat123", "iMessage", alice, "+15551110002")
	if err := f.QueryRow("SELECT style FROM chat WHERE ROWID = ?", group.RowID).Scan(&style); err != nil || style != 43 {
		t.Errorf("group chat style %d, %v; want 43", style, err)
	}
	if n := count(t, f, "SELECT COUNT(*) FROM chat_handle_join WHERE chat_id = ?", group.RowID); n != 2 {
		t.Errorf("group has %d members, want 2", n)
	}

	dm := f.DirectChat("iMessage", alice)
	at := time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)
	_, out := f.Insert(chatdbtest.Msg{Chat: dm, Text: "hello", Date: at})
	f.AddToChat(out, anyChat)
	if n := count(t, f, "SELECT COUNT(*) FROM chat_message_join WHERE message_id = (SELECT ROWID FROM message WHERE guid = ?)", out); n != 2 {
		t.Errorf("the message is filed under %d chats, want 2", n)
	}

	var sent, errCode, read int
	var dateRead int64
	f.MarkSent(out)
	f.MarkError(out, 22)
	if err := f.QueryRow("SELECT is_sent, error FROM message WHERE guid = ?", out).Scan(&sent, &errCode); err != nil || sent != 1 || errCode != 22 {
		t.Errorf("is_sent %d, error %d (%v); want 1, 22", sent, errCode, err)
	}

	_, in := f.Insert(chatdbtest.Msg{Chat: dm, From: alice, Text: "hi", Date: at})
	f.MarkRead(in, at.Add(time.Minute))
	if err := f.QueryRow("SELECT is_read, date_read FROM message WHERE guid = ?", in).Scan(&read, &dateRead); err != nil ||
		read != 1 || dateRead != chatdbtest.AppleNanos(at.Add(time.Minute)) {
		t.Errorf("after MarkRead: is_read %d, date_read %d (%v)", read, dateRead, err)
	}
	f.MarkUnread(in)
	if err := f.QueryRow("SELECT is_read, date_read FROM message WHERE guid = ?", in).Scan(&read, &dateRead); err != nil || read != 0 || dateRead != 0 {
		t.Errorf("after MarkUnread: is_read %d, date_read %d (%v)", read, dateRead, err)
	}

	f.SetText(in, "hi again")
	var text sql.NullString
	var body []byte
	if err := f.QueryRow("SELECT text, attributedBody FROM message WHERE guid = ?", in).Scan(&text, &body); err != nil {
		t.Fatal(err)
	}
	if got, _ := typedstream.Text(body); text.String != "hi again" || got != "hi again" {
		t.Errorf("after SetText: text %q, attributedBody %q", text.String, got)
	}

	// A voice memo's text is its transcription, in the attachment.
	_, memo := f.Insert(chatdbtest.Msg{Chat: dm, From: alice, IsAudioMessage: true, Text: "first words"})
	f.SetText(memo, "better words")
	var info []byte
	if err := f.QueryRow(`SELECT a.user_info FROM attachment a JOIN message_attachment_join j ON j.attachment_id = a.ROWID
		JOIN message m ON m.ROWID = j.message_id WHERE m.guid = ?`, memo).Scan(&info); err != nil {
		t.Fatal(err)
	}
	var ui map[string]string
	if _, err := plist.Unmarshal(info, &ui); err != nil || ui["audio-transcription"] != "better words" {
		t.Errorf("memo user_info %v (%v), want the new transcription", ui, err)
	}

	// A transfer that had not finished gets its file.
	_, pending := f.Insert(chatdbtest.Msg{Chat: dm, From: alice, Attachments: []chatdbtest.FileSpec{{MimeType: "image/png"}}})
	f.FinishTransfer(pending, "~/Library/Messages/Attachments/ab/cd/x.png")
	var filename string
	var state int
	if err := f.QueryRow(`SELECT a.filename, a.transfer_state FROM attachment a JOIN message_attachment_join j ON j.attachment_id = a.ROWID
		JOIN message m ON m.ROWID = j.message_id WHERE m.guid = ?`, pending).Scan(&filename, &state); err != nil ||
		filename != "~/Library/Messages/Attachments/ab/cd/x.png" || state != 5 {
		t.Errorf("after FinishTransfer: filename %q, state %d (%v)", filename, state, err)
	}

	f.SetFilter(dm, 2, true, true)
	var filtered, blackholed, review int
	if err := f.QueryRow("SELECT is_filtered, is_blackholed, is_pending_review FROM chat WHERE ROWID = ?", dm.RowID).
		Scan(&filtered, &blackholed, &review); err != nil || filtered != 2 || blackholed != 1 || review != 1 {
		t.Errorf("after SetFilter: %d %d %d (%v)", filtered, blackholed, review, err)
	}

	f.Exec("UPDATE message SET is_spam = 1 WHERE guid = ?", in)
	if n := count(t, f, "SELECT COUNT(*) FROM message WHERE is_spam = 1"); n != 1 {
		t.Errorf("Exec: %d spam rows, want 1", n)
	}
	if got := chatdbtest.AppleTime(chatdbtest.AppleNanos(at)); !got.Equal(at) {
		t.Errorf("AppleTime(AppleNanos(%s)) = %s", at, got)
	}
}

// Unsending, whole or as macOS 26's empty edit, leaves the row with no
// body and every part retracted.
func TestFixtureUnsend(t *testing.T) {
	const alice = "+15551110001"
	f := chatdbtest.New(t, t.TempDir())
	dm := f.DirectChat("iMessage", alice)
	at := time.Now().Add(-time.Minute)
	_, a := f.Insert(chatdbtest.Msg{Chat: dm, Text: "oops", IsSent: true,
		Attachments: []chatdbtest.FileSpec{{Path: "~/a.jpg", MimeType: "image/jpeg"}}})
	_, b := f.Insert(chatdbtest.Msg{Chat: dm, Text: "oops too", IsSent: true})
	f.Unsend(a, at)
	f.UnsendAsEdit(b, at)

	type row struct {
		text      sql.NullString
		body      []byte
		retracted int64
		edited    int64
		parts     int
		info      []byte
	}
	get := func(guid string) row {
		var r row
		if err := f.QueryRow("SELECT text, attributedBody, COALESCE(date_retracted, 0), COALESCE(date_edited, 0), part_count, message_summary_info FROM message WHERE guid = ?", guid).
			Scan(&r.text, &r.body, &r.retracted, &r.edited, &r.parts, &r.info); err != nil {
			t.Fatal(err)
		}
		return r
	}
	retracted := func(info []byte) []int {
		var s struct {
			RP []int `plist:"rp"`
		}
		if _, err := plist.Unmarshal(info, &s); err != nil {
			t.Fatalf("message_summary_info: %v", err)
		}
		return s.RP
	}

	ra := get(a)
	if ra.text.Valid || ra.body != nil || ra.retracted != chatdbtest.AppleNanos(at) || ra.edited != chatdbtest.AppleNanos(at) || ra.parts != 0 {
		t.Errorf("Unsend left %+v", ra)
	}
	if rp := retracted(ra.info); len(rp) != 2 || rp[0] != 0 || rp[1] != 1 {
		t.Errorf("Unsend retracted parts %v, want [0 1] (the file and the text)", rp)
	}
	if n := count(t, f, "SELECT COUNT(*) FROM message_attachment_join WHERE message_id = (SELECT ROWID FROM message WHERE guid = ?)", a); n != 0 {
		t.Errorf("Unsend kept %d attachment joins", n)
	}

	rb := get(b)
	if rb.text.Valid || rb.body == nil || rb.retracted != 0 || rb.edited != chatdbtest.AppleNanos(at) || rb.parts != 0 {
		t.Errorf("UnsendAsEdit left %+v", rb)
	}
	if txt, _ := typedstream.Text(rb.body); txt != "" {
		t.Errorf("UnsendAsEdit body holds %q", txt)
	}
	if rp := retracted(rb.info); len(rp) != 1 || rp[0] != 0 {
		t.Errorf("UnsendAsEdit retracted parts %v, want [0]", rp)
	}
}

// Group changes are system rows of the right item and action types, and
// change the membership and name.
func TestFixtureGroupChanges(t *testing.T) {
	const alice, bob, carol = "+15551110001", "+15551110002", "+15551110003"
	f := chatdbtest.New(t, t.TempDir())
	g := f.GroupChat("iMessage", "Team", alice, bob)

	kind := func(guid string) (itemType, action int, other int64, title sql.NullString) {
		t.Helper()
		if err := f.QueryRow("SELECT item_type, group_action_type, other_handle, group_title FROM message WHERE guid = ?", guid).
			Scan(&itemType, &action, &other, &title); err != nil {
			t.Fatal(err)
		}
		return
	}
	members := func() int {
		return count(t, f, "SELECT COUNT(*) FROM chat_handle_join WHERE chat_id = ?", g.RowID)
	}

	added := f.AddMember(g, "", carol)
	if it, act, other, _ := kind(added); it != 1 || act != 0 || other != f.Handle(carol, "iMessage") {
		t.Errorf("AddMember row: item %d action %d other %d", it, act, other)
	}
	if members() != 3 {
		t.Errorf("%d members after AddMember, want 3", members())
	}
	removed := f.RemoveMember(g, alice, bob)
	if it, act, _, _ := kind(removed); it != 1 || act != 1 {
		t.Errorf("RemoveMember row: item %d action %d", it, act)
	}
	left := f.Leave(g, carol)
	if it, act, _, _ := kind(left); it != 3 || act != 0 {
		t.Errorf("Leave row: item %d action %d", it, act)
	}
	if members() != 1 {
		t.Errorf("%d members after a removal and a leave, want 1", members())
	}
	renamed := f.Rename(g, alice, "Crew")
	if it, _, _, title := kind(renamed); it != 2 || title.String != "Crew" {
		t.Errorf("Rename row: item %d title %q", it, title.String)
	}
	var name string
	if err := f.QueryRow("SELECT display_name FROM chat WHERE ROWID = ?", g.RowID).Scan(&name); err != nil || name != "Crew" {
		t.Errorf("display_name %q (%v), want Crew", name, err)
	}
	photo := f.SetGroupPhoto(g, alice)
	if it, act, _, _ := kind(photo); it != 3 || act != 1 {
		t.Errorf("SetGroupPhoto row: item %d action %d", it, act)
	}
}

// Checkpoint empties the write-ahead log; Reopen and Replace keep the
// fixture writing to chat.db; DropColumn removes a column even when
// Apple's indexes and triggers use it.
func TestFixtureFileLifecycle(t *testing.T) {
	const alice = "+15551110001"
	f := chatdbtest.New(t, t.TempDir())
	dm := f.DirectChat("iMessage", alice)
	f.Insert(chatdbtest.Msg{Chat: dm, From: alice, Text: "one"})
	f.Checkpoint()
	if fi, err := os.Stat(f.Path() + "-wal"); err != nil || fi.Size() != 0 {
		t.Errorf("after Checkpoint the WAL is %v (%v), want empty", fi, err)
	}

	f.Reopen()
	f.Insert(chatdbtest.Msg{Chat: dm, From: alice, Text: "two"})
	if n := count(t, f, "SELECT COUNT(*) FROM message"); n != 2 {
		t.Errorf("%d messages after Reopen, want 2", n)
	}

	f.Replace(func(nf *chatdbtest.Fixture) {
		c := nf.DirectChat("iMessage", alice)
		nf.Insert(chatdbtest.Msg{Chat: c, From: alice, Text: "restored"})
	})
	var text string
	if err := f.QueryRow("SELECT text FROM message").Scan(&text); err != nil || text != "restored" {
		t.Errorf("after Replace: %q (%v), want the new database's one message", text, err)
	}
	// The fixture writes to the new file from then on.
	f.Insert(chatdbtest.Msg{Chat: f.DirectChat("iMessage", alice), From: alice, Text: "after"})
	if n := count(t, f, "SELECT COUNT(*) FROM message"); n != 2 {
		t.Errorf("%d messages after writing to the replaced database, want 2", n)
	}

	// message.date is used by Apple's indexes: they go with it.
	f.DropColumn("message", "date_edited")
	if n := count(t, f, "SELECT COUNT(*) FROM pragma_table_info('message') WHERE name = 'date_edited'"); n != 0 {
		t.Error("date_edited is still there")
	}
	f.DropColumn("message", "date")
	if n := count(t, f, "SELECT COUNT(*) FROM pragma_table_info('message') WHERE name = 'date'"); n != 0 {
		t.Error("date is still there")
	}
}
