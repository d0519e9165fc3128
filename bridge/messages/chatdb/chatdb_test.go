package chatdb_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/blueline-app/blueline/bridge/messages/chatdb"
	"github.com/blueline-app/blueline/bridge/messages/chatdb/chatdbtest"
)

const (
	alice = "+15551230001"
	bob   = "bob@example.com"
	carol = "+15551230003"
)

func open(t testing.TB, f *chatdbtest.Fixture) *chatdb.DB {
	t.Helper()
	db, err := chatdb.Open(context.Background(), f.Path())
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func rows(t testing.TB, db *chatdb.DB, after int64) []chatdb.Row {
	t.Helper()
	rs, err := db.Rows(context.Background(), after, 1000)
	if err != nil {
		t.Fatalf("Rows: %v", err)
	}
	return rs
}

func byGUID(t testing.TB, db *chatdb.DB, guid string) chatdb.Row {
	t.Helper()
	rs, err := db.RowsByGUID(context.Background(), []string{guid})
	if err != nil {
		t.Fatalf("RowsByGUID: %v", err)
	}
	if len(rs) != 1 {
		t.Fatalf("RowsByGUID(%s): got %d rows, want 1", guid, len(rs))
	}
	return rs[0]
}

func str(p *string) string {
	if p == nil {
		return "<nil>"
	}
	return *p
}

// date is a fixed time with nanoseconds, to check the conversion is exact.
var date = time.Date(2025, 3, 14, 15, 9, 26, 535897932, time.UTC)

func TestOpenRefusesMissingRequiredColumns(t *testing.T) {
	f := chatdbtest.New(t, t.TempDir())
	f.DropColumn("message", "associated_message_type")
	f.DropColumn("message", "item_type")
	f.DropColumn("chat", "display_name")
	_, err := chatdb.Open(context.Background(), f.Path())
	if err == nil {
		t.Fatal("Open succeeded without required columns")
	}
	for _, want := range []string{"table message", "associated_message_type", "item_type", "table chat", "display_name", "macOS version may be unsupported"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func TestOpenRefusesMissingTable(t *testing.T) {
	f := chatdbtest.New(t, t.TempDir())
	f.Exec("DROP TABLE message_attachment_join")
	_, err := chatdb.Open(context.Background(), f.Path())
	if err == nil || !strings.Contains(err.Error(), "table message_attachment_join is missing") {
		t.Fatalf("Open: got %v, want an error naming message_attachment_join", err)
	}
}

func TestOpenWithoutOptionalColumns(t *testing.T) {
	f := chatdbtest.New(t, t.TempDir())
	chat := f.DirectChat("iMessage", alice)
	_, first := f.Insert(chatdbtest.Msg{Chat: chat, From: alice, Text: "first", Date: date})
	f.Insert(chatdbtest.Msg{Chat: chat, From: alice, Text: "reply", ReplyTo: first, Date: date,
		Attachments: []chatdbtest.FileSpec{{Path: "/tmp/a.jpg", MimeType: "image/jpeg", UTI: "public.jpeg", TransferName: "a.jpg"}}})
	f.MarkRead(first, date)
	for _, c := range [][2]string{
		{"message", "thread_originator_guid"}, {"message", "is_audio_message"}, {"message", "date_read"},
		{"message", "is_delivered"}, {"message", "balloon_bundle_id"},
		{"attachment", "uti"}, {"attachment", "transfer_state"}, {"attachment", "user_info"},
	} {
		f.DropColumn(c[0], c[1])
	}
	db := open(t, f)
	rs := rows(t, db, 0)
	if len(rs) != 2 {
		t.Fatalf("got %d rows, want 2", len(rs))
	}
	if got := str(rs[1].Text); got != "reply" {
		t.Errorf("Text = %q, want reply", got)
	}
	if !rs[0].DateRead.IsZero() || rs[1].ThreadOriginatorGUID != "" || rs[1].IsDelivered {
		t.Errorf("optional fields set without their columns: %+v", rs)
	}
	if len(rs[1].Attachments) != 1 || rs[1].Attachments[0].UTI != "" || rs[1].Attachments[0].TransferName != "a.jpg" {
		t.Errorf("Attachments = %+v, want a.jpg without UTI", rs[1].Attachments)
	}
}

func TestOpenMissingFile(t *testing.T) {
	_, err := chatdb.Open(context.Background(), filepath.Join(t.TempDir(), "chat.db"))
	if err == nil || !strings.Contains(err.Error(), "does not exist") || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Open: got %v, want a not-exist error", err)
	}
}

func TestOpenPermissionDenied(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root reads any file")
	}
	dir := t.TempDir()
	f := chatdbtest.New(t, dir)
	if err := os.Chmod(f.Path(), 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(f.Path(), 0o600) })
	_, err := chatdb.Open(context.Background(), f.Path())
	exe, _ := os.Executable()
	if err == nil || !strings.Contains(err.Error(), "Full Disk Access") || !strings.Contains(err.Error(), exe) {
		t.Fatalf("Open: got %v, want an error asking for Full Disk Access for %s", err, exe)
	}
	if errors.Unwrap(err) == nil {
		t.Errorf("error %v does not wrap its cause", err)
	}
}

func TestReadOnly(t *testing.T) {
	f := chatdbtest.New(t, t.TempDir())
	f.Handle(alice, "iMessage")
	db := open(t, f)
	ctx := context.Background()
	for _, q := range []string{
		"INSERT INTO handle (id, service) VALUES ('x', 'iMessage')",
		"UPDATE handle SET id = 'y'",
		"CREATE TABLE ours (x)",
	} {
		if err := db.ExecForTest(ctx, q); err == nil {
			t.Errorf("%s succeeded through the read-only connection", q)
		}
	}
	if id := f.Handle(alice, "iMessage"); id != 1 {
		t.Errorf("handle ROWID = %d after refused writes, want 1", id)
	}
}

func TestRowsSeeWritesAfterOpen(t *testing.T) {
	f := chatdbtest.New(t, t.TempDir())
	db := open(t, f)
	if rs := rows(t, db, 0); len(rs) != 0 {
		t.Fatalf("empty database: got %d rows", len(rs))
	}
	chat := f.DirectChat("iMessage", alice)
	id1, _ := f.Insert(chatdbtest.Msg{Chat: chat, From: alice, Text: "one"})
	if _, err := os.Stat(f.Path() + "-wal"); err != nil {
		t.Fatalf("fixture is not in WAL mode: %v", err)
	}
	rs := rows(t, db, 0)
	if len(rs) != 1 || rs[0].RowID != id1 || str(rs[0].Text) != "one" {
		t.Fatalf("after first insert: got %+v", rs)
	}
	id2, _ := f.Insert(chatdbtest.Msg{Chat: chat, From: alice, Text: "two"})
	rs = rows(t, db, id1)
	if len(rs) != 1 || rs[0].RowID != id2 || str(rs[0].Text) != "two" {
		t.Fatalf("after second insert: got %+v", rs)
	}
}

func TestMaxRowID(t *testing.T) {
	f := chatdbtest.New(t, t.TempDir())
	db := open(t, f)
	ctx := context.Background()
	if got, err := db.MaxRowID(ctx); err != nil || got != 0 {
		t.Fatalf("empty: MaxRowID = %d, %v; want 0", got, err)
	}
	chat := f.DirectChat("iMessage", alice)
	f.Insert(chatdbtest.Msg{Chat: chat, From: alice, Text: "a"})
	last, guid := f.Insert(chatdbtest.Msg{Chat: chat, Text: "b"})
	if got, err := db.MaxRowID(ctx); err != nil || got != last {
		t.Fatalf("MaxRowID = %d, %v; want %d", got, err, last)
	}
	f.DeleteMessage(guid) // AUTOINCREMENT: the ROWID is not reused
	next, _ := f.Insert(chatdbtest.Msg{Chat: chat, Text: "c"})
	if next != last+1 {
		t.Fatalf("ROWID after delete = %d, want %d", next, last+1)
	}
	if got, _ := db.MaxRowID(ctx); got != next {
		t.Fatalf("MaxRowID = %d, want %d", got, next)
	}
}

func TestRowsDirectIMessage(t *testing.T) {
	f := chatdbtest.New(t, t.TempDir())
	chat := f.DirectChat("iMessage", alice)
	id, guid := f.Insert(chatdbtest.Msg{Chat: chat, From: alice, Text: "Hello “you”", Date: date})
	r := byGUID(t, open(t, f), guid)
	want := chatdb.Row{
		RowID: id, GUID: guid, Sender: alice, Service: "imessage", Date: date, IsDelivered: true, Account: "E:me@example.com",
		Chat: chatdb.Chat{RowID: chat.RowID, GUID: "iMessage;-;" + alice, RawGUID: "iMessage;-;" + alice, Identifier: alice, Service: "imessage",
			Participants: []string{alice}},
	}
	if str(r.Text) != "Hello “you”" {
		t.Errorf("Text = %q", str(r.Text))
	}
	if r.Kind() != chatdb.KindMessage {
		t.Errorf("Kind = %v, want message", r.Kind())
	}
	r.Text = nil
	if !reflect.DeepEqual(r, want) {
		t.Errorf("row:\n got %+v\nwant %+v", r, want)
	}
	if !r.Date.Equal(date) {
		t.Errorf("Date = %v, want %v", r.Date, date)
	}
}

func TestRowsSMS(t *testing.T) {
	f := chatdbtest.New(t, t.TempDir())
	chat := f.DirectChat("SMS", carol)
	_, sms := f.Insert(chatdbtest.Msg{Chat: chat, From: carol, Text: "sms"})
	_, rcs := f.Insert(chatdbtest.Msg{Chat: chat, From: carol, Text: "rcs"})
	_, none := f.Insert(chatdbtest.Msg{Chat: chat, From: carol, Text: "no service"})
	f.Exec("UPDATE message SET service = 'RCS' WHERE guid = ?", rcs)
	f.Exec("UPDATE message SET service = NULL WHERE guid = ?", none)
	db := open(t, f)
	// RCS is its own service: a row sent over RCS in the chat says so.
	for g, want := range map[string]string{sms: "sms", rcs: "rcs", none: "sms"} {
		r := byGUID(t, db, g)
		if r.Service != want || r.Chat.Service != "sms" || r.Chat.GUID != "SMS;-;"+carol || r.Sender != carol {
			t.Errorf("%s: Service %q, chat %q %q, sender %q; want %s", str(r.Text), r.Service, r.Chat.Service, r.Chat.GUID, r.Sender, want)
		}
	}
	rcsChat := f.ChatWithGUID("any;-;"+bob, "RCS", bob)
	_, g0 := f.Insert(chatdbtest.Msg{Chat: rcsChat, From: bob, Text: "over RCS"})
	if r := byGUID(t, db, g0); r.Service != "rcs" || r.Chat.Service != "rcs" || r.Chat.GUID != "RCS;-;"+bob {
		t.Errorf("an RCS chat: Service %q, chat %q %q", r.Service, r.Chat.Service, r.Chat.GUID)
	}
	// No service on the row and none on an iMessage chat: the chat's.
	im := f.DirectChat("iMessage", alice)
	_, g := f.Insert(chatdbtest.Msg{Chat: im, From: alice, Text: "x"})
	f.Exec("UPDATE message SET service = '' WHERE guid = ?", g)
	if r := byGUID(t, db, g); r.Service != "imessage" {
		t.Errorf("Service = %q, want imessage", r.Service)
	}
}

func TestRowsGroupChat(t *testing.T) {
	f := chatdbtest.New(t, t.TempDir())
	chat := f.GroupChat("iMessage", "Weekend", carol, bob, alice)
	_, in := f.Insert(chatdbtest.Msg{Chat: chat, From: bob, Text: "hi all"})
	_, out := f.Insert(chatdbtest.Msg{Chat: chat, Text: "hi bob", IsSent: true})
	db := open(t, f)
	r := byGUID(t, db, in)
	wantChat := chatdb.Chat{RowID: chat.RowID, GUID: chat.GUID, RawGUID: chat.GUID, Identifier: chat.Identifier, IsGroup: true,
		DisplayName: "Weekend", Service: "imessage", Participants: []string{"+15551230001", "+15551230003", bob}}
	if !reflect.DeepEqual(r.Chat, wantChat) {
		t.Errorf("Chat:\n got %+v\nwant %+v", r.Chat, wantChat)
	}
	if !strings.HasPrefix(chat.GUID, "iMessage;+;chat") || len(chat.Identifier) != len("chat")+18 {
		t.Errorf("group GUID %q, identifier %q", chat.GUID, chat.Identifier)
	}
	if r.Sender != bob {
		t.Errorf("Sender = %q, want %q", r.Sender, bob)
	}
	r = byGUID(t, db, out)
	if r.Sender != "" || !r.IsFromMe || !r.IsSent || !r.Chat.IsGroup {
		t.Errorf("own row: %+v", r)
	}

	// Without a name, and recognised as a group by its GUID alone.
	unnamed := f.GroupChat("iMessage", "", alice, bob)
	_, g := f.Insert(chatdbtest.Msg{Chat: unnamed, From: alice, Text: "x"})
	f.Exec("UPDATE chat SET style = 0 WHERE ROWID = ?", unnamed.RowID)
	if r := byGUID(t, db, g); !r.Chat.IsGroup || r.Chat.DisplayName != "" {
		t.Errorf("unnamed group: %+v", r.Chat)
	}
}

func TestRowsVentura(t *testing.T) {
	f := chatdbtest.New(t, t.TempDir())
	chat := f.DirectChat("iMessage", alice)
	_, g := f.Insert(chatdbtest.Msg{Chat: chat, From: alice, Text: "only in attributedBody ✓", Ventura: true})
	_, empty := f.Insert(chatdbtest.Msg{Chat: chat, From: alice, Ventura: true})
	db := open(t, f)
	if r := byGUID(t, db, g); str(r.Text) != "only in attributedBody ✓" || r.Kind() != chatdb.KindMessage {
		t.Errorf("Text = %q, Kind %v", str(r.Text), r.Kind())
	}
	if r := byGUID(t, db, empty); r.Text != nil || r.Kind() != chatdb.KindOther {
		t.Errorf("empty row: Text %q, Kind %v; want nil, other", str(r.Text), r.Kind())
	}
	// A blob that does not decode leaves the row without a body, and
	// does not fail the read.
	f.Exec("UPDATE message SET attributedBody = x'0102' WHERE guid = ?", g)
	if r := byGUID(t, db, g); r.Text != nil {
		t.Errorf("undecodable body: Text = %q, want nil", str(r.Text))
	}
}

func TestRowsFromMe(t *testing.T) {
	f := chatdbtest.New(t, t.TempDir())
	chat := f.DirectChat("iMessage", alice)
	_, g := f.Insert(chatdbtest.Msg{Chat: chat, Text: "from me"})
	db := open(t, f)
	r := byGUID(t, db, g)
	if !r.IsFromMe || r.Sender != "" || r.IsSent || r.IsDelivered || r.Error != 0 {
		t.Fatalf("unsent row: %+v", r)
	}
	f.MarkSent(g)
	if r := byGUID(t, db, g); !r.IsSent || r.IsDelivered || !r.DateDelivered.IsZero() {
		t.Fatalf("after MarkSent: %+v", r)
	}
	at := time.Now().Add(-time.Second).Truncate(time.Microsecond)
	f.MarkDelivered(g, at)
	f.MarkRead(g, at.Add(time.Millisecond))
	if r := byGUID(t, db, g); !r.IsDelivered || !r.DateDelivered.Equal(at) || !r.DateRead.Equal(at.Add(time.Millisecond)) {
		t.Fatalf("after MarkDelivered and MarkRead: %+v", r)
	}
	_, failed := f.Insert(chatdbtest.Msg{Chat: chat, Text: "fails"})
	f.MarkError(failed, 22)
	if r := byGUID(t, db, failed); r.Error != 22 || r.IsSent {
		t.Fatalf("after MarkError: %+v", r)
	}
}

func TestAppleTime(t *testing.T) {
	for _, tc := range []struct {
		v    int64
		want time.Time
	}{
		{0, time.Time{}},
		{763_657_766_535_897_932, date},                                 // nanoseconds
		{763_657_766, date.Truncate(time.Second)},                       // seconds, macOS 10.12 and older
		{1, time.Date(2001, 1, 1, 0, 0, 1, 0, time.UTC)},                // one second
		{200_000_000_000, time.Date(2001, 1, 1, 0, 3, 20, 0, time.UTC)}, // 200 s in nanoseconds
		{-31_622_400, time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)},      // before the epoch, seconds
		{99_999_999_999, time.Unix(978_307_200+99_999_999_999, 0)},      // largest "seconds"
	} {
		if got := chatdb.AppleTime(tc.v); !got.Equal(tc.want) {
			t.Errorf("AppleTime(%d) = %v, want %v", tc.v, got, tc.want)
		}
	}
	if chatdbtest.AppleNanos(date) != 763_657_766_535_897_932 {
		t.Errorf("AppleNanos(%v) = %d", date, chatdbtest.AppleNanos(date))
	}

	f := chatdbtest.New(t, t.TempDir())
	chat := f.DirectChat("iMessage", alice)
	_, ns := f.Insert(chatdbtest.Msg{Chat: chat, From: alice, Text: "ns", Date: date})
	_, secs := f.Insert(chatdbtest.Msg{Chat: chat, From: alice, Text: "s"})
	_, zero := f.Insert(chatdbtest.Msg{Chat: chat, From: alice, Text: "zero"})
	f.Exec("UPDATE message SET date = 763657766, date_read = 763657800 WHERE guid = ?", secs)
	f.Exec("UPDATE message SET date = 0, date_read = NULL WHERE guid = ?", zero)
	f.MarkRead(ns, date.Add(time.Minute))
	db := open(t, f)
	if r := byGUID(t, db, ns); !r.Date.Equal(date) || !r.DateRead.Equal(date.Add(time.Minute)) {
		t.Errorf("ns row: Date %v, DateRead %v", r.Date, r.DateRead)
	}
	if r := byGUID(t, db, secs); !r.Date.Equal(date.Truncate(time.Second)) || !r.DateRead.Equal(date.Truncate(time.Second).Add(34*time.Second)) {
		t.Errorf("seconds row: Date %v, DateRead %v", r.Date, r.DateRead)
	}
	if r := byGUID(t, db, zero); !r.Date.IsZero() || !r.DateRead.IsZero() {
		t.Errorf("zero row: Date %v, DateRead %v", r.Date, r.DateRead)
	}
}

func TestTapbacks(t *testing.T) {
	f := chatdbtest.New(t, t.TempDir())
	chat := f.DirectChat("iMessage", alice)
	_, target := f.Insert(chatdbtest.Msg{Chat: chat, Text: "nice?", IsSent: true})
	_, love := f.Insert(chatdbtest.Msg{Chat: chat, From: alice, Text: "Loved “nice?”", ReactionTo: target, ReactionType: 2000})
	_, unlike := f.Insert(chatdbtest.Msg{Chat: chat, From: alice, Text: "Removed a like from “nice?”", ReactionTo: "bp:" + target, ReactionType: 3001})
	_, bare := f.Insert(chatdbtest.Msg{Chat: chat, From: alice, Text: "Questioned", ReactionTo: "p:1/" + target, ReactionType: 2005})
	db := open(t, f)
	for _, tc := range []struct {
		guid, typ string
		added     bool
	}{{love, "love", true}, {unlike, "like", false}, {bare, "question", true}} {
		r := byGUID(t, db, tc.guid)
		typ, added, ok := r.Reaction()
		if !ok || typ != tc.typ || added != tc.added || r.AssociatedGUID != target || r.Kind() != chatdb.KindReaction {
			t.Errorf("%s: Reaction() = %q, %v, %v; AssociatedGUID %q; Kind %v", str(r.Text), typ, added, ok, r.AssociatedGUID, r.Kind())
		}
	}
	if _, _, ok := byGUID(t, db, target).Reaction(); ok {
		t.Error("a plain message is a reaction")
	}

	// Every code, without a database.
	names := []string{"love", "like", "dislike", "laugh", "emphasize", "question"}
	for i, name := range names {
		for _, base := range []int{2000, 3000} {
			typ, added, ok := chatdb.Row{AssociatedType: base + i}.Reaction()
			if !ok || typ != name || added != (base == 2000) {
				t.Errorf("Reaction(%d) = %q, %v, %v", base+i, typ, added, ok)
			}
		}
	}
	for _, code := range []int{0, 1000, 1999, 2006, 2008, 3006, 3008, 4000} {
		if _, _, ok := (chatdb.Row{AssociatedType: code}).Reaction(); ok {
			t.Errorf("Reaction(%d) ok", code)
		}
	}

	// Emoji and sticker tapbacks (iOS 18, macOS 15).
	_, party := f.Insert(chatdbtest.Msg{Chat: chat, From: alice, Text: "Reacted 🎉 to “nice?”", ReactionTo: target, ReactionType: 2006, Emoji: "🎉"})
	_, unparty := f.Insert(chatdbtest.Msg{Chat: chat, From: alice, Text: "Removed 🎉 from “nice?”", ReactionTo: target, ReactionType: 3006, Emoji: "🎉"})
	_, sticker := f.Insert(chatdbtest.Msg{Chat: chat, From: alice, ReactionTo: target, ReactionType: 2007,
		Attachments: []chatdbtest.FileSpec{{Path: "~/Library/Messages/Stickers/s.heic", MimeType: "image/heic", TransferName: "s.heic"}}})
	for _, tc := range []struct {
		guid, typ, emoji string
		added            bool
	}{{party, "emoji", "🎉", true}, {unparty, "emoji", "🎉", false}, {sticker, "sticker", "", true}} {
		r := byGUID(t, db, tc.guid)
		typ, added, ok := r.Reaction()
		if !ok || typ != tc.typ || added != tc.added || r.AssociatedEmoji != tc.emoji || r.AssociatedGUID != target || r.Kind() != chatdb.KindReaction {
			t.Errorf("%s: Reaction() = %q, %v, %v; emoji %q; Kind %v", tc.guid, typ, added, ok, r.AssociatedEmoji, r.Kind())
		}
	}
}

func TestReply(t *testing.T) {
	f := chatdbtest.New(t, t.TempDir())
	chat := f.DirectChat("iMessage", alice)
	_, orig := f.Insert(chatdbtest.Msg{Chat: chat, From: alice, Text: "question"})
	_, reply := f.Insert(chatdbtest.Msg{Chat: chat, Text: "answer", ReplyTo: orig, IsSent: true})
	db := open(t, f)
	if r := byGUID(t, db, reply); r.ThreadOriginatorGUID != orig || r.Kind() != chatdb.KindMessage {
		t.Errorf("ThreadOriginatorGUID = %q, want %q (Kind %v)", r.ThreadOriginatorGUID, orig, r.Kind())
	}
	if r := byGUID(t, db, orig); r.ThreadOriginatorGUID != "" {
		t.Errorf("ThreadOriginatorGUID = %q, want empty", r.ThreadOriginatorGUID)
	}
}

// The received copy Messages writes of a message sent to oneself names
// the sent row in reply_to_guid, which is read as ReplyToGUID (not the
// thread: ThreadOriginatorGUID stays empty).
func TestSelfChatCopy(t *testing.T) {
	f := chatdbtest.New(t, t.TempDir())
	const me = "owner@example.com"
	chat := f.DirectChat("iMessage", me)
	_, sent := f.Insert(chatdbtest.Msg{Chat: chat, Text: "note", IsSent: true})
	_, copied := f.Insert(chatdbtest.Msg{Chat: chat, From: me, Text: "note", Follows: sent})
	db := open(t, f)
	if r := byGUID(t, db, copied); r.ReplyToGUID != sent || r.ThreadOriginatorGUID != "" || r.IsFromMe || r.Sender != me {
		t.Errorf("the copy: ReplyToGUID %q (want %q), thread %q, from me %v, sender %q", r.ReplyToGUID, sent, r.ThreadOriginatorGUID, r.IsFromMe, r.Sender)
	}
	if r := byGUID(t, db, sent); r.ReplyToGUID != "" {
		t.Errorf("the sent row: ReplyToGUID %q, want empty", r.ReplyToGUID)
	}
}

func TestAttachments(t *testing.T) {
	home, err := os.UserHomeDir()
	if err != nil {
		t.Skip("no home directory:", err)
	}
	f := chatdbtest.New(t, t.TempDir())
	chat := f.DirectChat("iMessage", alice)
	_, g := f.Insert(chatdbtest.Msg{Chat: chat, From: alice, Text: "two photos", Attachments: []chatdbtest.FileSpec{
		{Path: "~/Library/Messages/Attachments/ab/11/X/IMG_1.heic", MimeType: "image/heic", UTI: "public.heic", TransferName: "IMG_1.heic", TotalBytes: 1234},
		{Path: "", MimeType: "", UTI: "public.jpeg", TransferName: "IMG_2.jpeg", TotalBytes: 99},
	}})
	_, only := f.Insert(chatdbtest.Msg{Chat: chat, From: alice, Ventura: true, Attachments: []chatdbtest.FileSpec{
		{Path: "/var/folders/x/doc.pdf", MimeType: "application/pdf", TransferName: "doc.pdf"},
	}})
	db := open(t, f)
	r := byGUID(t, db, g)
	if str(r.Text) != "two photos" {
		t.Errorf("Text = %q, want the caption without placeholders", str(r.Text))
	}
	if len(r.Attachments) != 2 {
		t.Fatalf("Attachments = %+v", r.Attachments)
	}
	a, b := r.Attachments[0], r.Attachments[1]
	wantA := chatdb.Attachment{GUID: a.GUID, Path: filepath.Join(home, "Library/Messages/Attachments/ab/11/X/IMG_1.heic"),
		MimeType: "image/heic", UTI: "public.heic", TransferName: "IMG_1.heic", TotalBytes: 1234, TransferState: 5}
	if a != wantA || !strings.HasPrefix(a.GUID, "at_") {
		t.Errorf("first attachment:\n got %+v\nwant %+v", a, wantA)
	}
	if b.Path != "" || b.MimeType != "" || b.TransferName != "IMG_2.jpeg" || b.TransferState != 0 {
		t.Errorf("unfinished attachment: %+v", b)
	}
	r = byGUID(t, db, only)
	if r.Text != nil || len(r.Attachments) != 1 || r.Attachments[0].Path != "/var/folders/x/doc.pdf" || r.Kind() != chatdb.KindMessage {
		t.Errorf("attachment-only row: Text %q, %+v, Kind %v", str(r.Text), r.Attachments, r.Kind())
	}
	// The same attachments through Rows (the ROWID window query).
	rs := rows(t, db, 0)
	if len(rs) != 2 || !reflect.DeepEqual(rs[0].Attachments, byGUID(t, db, g).Attachments) || len(rs[1].Attachments) != 1 {
		t.Errorf("Rows attachments differ from RowsByGUID: %+v", rs)
	}
}

func TestVoiceMemo(t *testing.T) {
	f := chatdbtest.New(t, t.TempDir())
	chat := f.DirectChat("iMessage", alice)
	_, transcribed := f.Insert(chatdbtest.Msg{Chat: chat, From: alice, IsAudioMessage: true, Text: "Call me back, it's about the café"})
	_, later := f.Insert(chatdbtest.Msg{Chat: chat, From: alice, IsAudioMessage: true, Ventura: true})
	db := open(t, f)

	r := byGUID(t, db, transcribed)
	if !r.IsAudioMessage || r.Text != nil || str(r.Transcription) != "Call me back, it's about the café" || r.Kind() != chatdb.KindMessage {
		t.Errorf("voice memo: Text %q, Transcription %q, Kind %v", str(r.Text), str(r.Transcription), r.Kind())
	}
	if len(r.Attachments) != 1 || r.Attachments[0].UTI != "com.apple.coreaudio-format" {
		t.Errorf("voice memo attachments: %+v", r.Attachments)
	}

	r = byGUID(t, db, later)
	if r.Transcription != nil || r.Text != nil || r.Kind() != chatdb.KindMessage {
		t.Errorf("before transcription: Text %q, Transcription %q, Kind %v", str(r.Text), str(r.Transcription), r.Kind())
	}
	long := strings.Repeat("A long transcription. ", 20)
	f.SetText(later, long)
	if r := byGUID(t, db, later); str(r.Transcription) != strings.TrimSpace(long) {
		t.Errorf("after SetText: Transcription %q", str(r.Transcription))
	}

	// Where only the body text carries it (older layouts), that is used.
	_, plain := f.Insert(chatdbtest.Msg{Chat: chat, From: alice, IsAudioMessage: true})
	f.Exec("UPDATE message SET text = ? WHERE guid = ?", "\uFFFCin the text", plain)
	if r := byGUID(t, db, plain); str(r.Transcription) != "in the text" || r.Text != nil {
		t.Errorf("body-text transcription: Text %q, Transcription %q", str(r.Text), str(r.Transcription))
	}
	// user_info wins over a body text.
	f.SetText(plain, "from user_info")
	if r := byGUID(t, db, plain); str(r.Transcription) != "from user_info" {
		t.Errorf("Transcription = %q, want the user_info one", str(r.Transcription))
	}
}

func TestMessageInSeveralChats(t *testing.T) {
	f := chatdbtest.New(t, t.TempDir())
	first := f.DirectChat("iMessage", alice) // lower ROWID
	second := f.DirectChat("SMS", alice)
	_, g := f.Insert(chatdbtest.Msg{Chat: second, From: alice, Text: "twice"})
	f.AddToChat(g, first)
	db := open(t, f)
	rs := rows(t, db, 0)
	if len(rs) != 1 {
		t.Fatalf("got %d rows, want the message once", len(rs))
	}
	if rs[0].Chat.RowID != first.RowID || rs[0].Chat.GUID != first.GUID {
		t.Errorf("Chat = %+v, want the lowest ROWID %d", rs[0].Chat, first.RowID)
	}
	if r := byGUID(t, db, g); r.Chat.RowID != first.RowID {
		t.Errorf("RowsByGUID chat %d, want %d", r.Chat.RowID, first.RowID)
	}
}

func TestKind(t *testing.T) {
	f := chatdbtest.New(t, t.TempDir())
	chat := f.GroupChat("iMessage", "Team", alice, bob)
	_, target := f.Insert(chatdbtest.Msg{Chat: chat, From: alice, Text: "target"})
	cases := []struct {
		name string
		msg  chatdbtest.Msg
		want chatdb.Kind
	}{
		{"message", chatdbtest.Msg{Text: "hi"}, chatdb.KindMessage},
		{"member added", chatdbtest.Msg{ItemType: 1, Other: bob}, chatdb.KindGroupChange},
		{"renamed", chatdbtest.Msg{ItemType: 2, GroupTitle: "Team"}, chatdb.KindGroupChange},
		{"member left", chatdbtest.Msg{ItemType: 3}, chatdb.KindGroupChange},
		{"renamed with text", chatdbtest.Msg{ItemType: 2, Text: "Team"}, chatdb.KindGroupChange},
		{"location sharing", chatdbtest.Msg{ItemType: 4}, chatdb.KindOther},
		{"sticker", chatdbtest.Msg{ReactionTo: target, ReactionType: 1000, Attachments: []chatdbtest.FileSpec{{Path: "/s.heic"}}}, chatdb.KindOther},
		{"emoji tapback without its emoji", chatdbtest.Msg{Text: "Reacted 🎉", ReactionTo: target, ReactionType: 2006}, chatdb.KindOther},
		{"emoji tapback", chatdbtest.Msg{Text: "Reacted 🎉", ReactionTo: target, ReactionType: 2006, Emoji: "🎉"}, chatdb.KindReaction},
		{"sticker tapback", chatdbtest.Msg{ReactionTo: target, ReactionType: 2007}, chatdb.KindReaction},
		{"poll vote", chatdbtest.Msg{ReactionTo: target, ReactionType: 4000}, chatdb.KindOther},
		{"tapback", chatdbtest.Msg{Text: "Liked “target”", ReactionTo: target, ReactionType: 2001}, chatdb.KindReaction},
		{"empty", chatdbtest.Msg{}, chatdb.KindOther},
		{"whitespace", chatdbtest.Msg{Text: " \n "}, chatdb.KindOther},
	}
	guids := make([]string, len(cases))
	for i, tc := range cases {
		tc.msg.Chat, tc.msg.From = chat, alice
		_, guids[i] = f.Insert(tc.msg)
	}
	_, poll := f.Insert(chatdbtest.Msg{Chat: chat, From: alice, Text: "\uFFFC"})
	f.Exec("UPDATE message SET balloon_bundle_id = ? WHERE guid = ?",
		"com.apple.messages.MSMessageExtensionBalloonPlugin:0000000000:com.apple.messages.Polls", poll)
	_, link := f.Insert(chatdbtest.Msg{Chat: chat, From: alice, Text: "https://example.com"})
	f.Exec("UPDATE message SET balloon_bundle_id = 'com.apple.messages.URLBalloonProvider' WHERE guid = ?", link)

	db := open(t, f)
	for i, tc := range cases {
		if got := byGUID(t, db, guids[i]).Kind(); got != tc.want {
			t.Errorf("%s: Kind = %v, want %v", tc.name, got, tc.want)
		}
	}
	if got := byGUID(t, db, poll).Kind(); got != chatdb.KindOther {
		t.Errorf("poll: Kind = %v, want other", got)
	}
	if r := byGUID(t, db, link); r.Kind() != chatdb.KindMessage || r.BalloonBundleID == "" {
		t.Errorf("link preview: Kind = %v (%q), want message", r.Kind(), r.BalloonBundleID)
	}
}

func TestRowsPagingAndGaps(t *testing.T) {
	f := chatdbtest.New(t, t.TempDir())
	chat := f.DirectChat("iMessage", alice)
	var ids []int64
	var guids []string
	for i := range 10 {
		id, g := f.Insert(chatdbtest.Msg{Chat: chat, From: alice, Text: strings.Repeat("x", i+1)})
		ids, guids = append(ids, id), append(guids, g)
	}
	f.DeleteMessage(guids[3])
	f.DeleteMessage(guids[4])
	db := open(t, f)
	ctx := context.Background()
	var got []int64
	after := int64(0)
	for {
		rs, err := db.Rows(ctx, after, 3)
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) == 0 {
			break
		}
		if len(rs) > 3 {
			t.Fatalf("Rows returned %d rows, limit 3", len(rs))
		}
		for _, r := range rs {
			got = append(got, r.RowID)
		}
		after = rs[len(rs)-1].RowID
	}
	want := slices.Concat(ids[:3], ids[5:])
	if !slices.Equal(got, want) {
		t.Errorf("paged ROWIDs = %v, want %v", got, want)
	}
	if rs, err := db.Rows(ctx, 0, 0); err != nil || len(rs) != 0 {
		t.Errorf("Rows(limit 0) = %v, %v", rs, err)
	}
}

func TestRowsByGUID(t *testing.T) {
	f := chatdbtest.New(t, t.TempDir())
	chat := f.DirectChat("iMessage", alice)
	_, a := f.Insert(chatdbtest.Msg{Chat: chat, From: alice, Text: "a"})
	_, b := f.Insert(chatdbtest.Msg{Chat: chat, From: alice, Text: "b"})
	_, c := f.Insert(chatdbtest.Msg{Chat: chat, GUID: "MY-GUID", Text: "c"})
	db := open(t, f)
	rs, err := db.RowsByGUID(context.Background(), []string{c, "NOT-THERE", a})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 || rs[0].GUID != a || rs[1].GUID != "MY-GUID" || str(rs[1].Text) != "c" {
		t.Errorf("RowsByGUID = %+v, want a then c in ROWID order", rs)
	}
	if rs, err := db.RowsByGUID(context.Background(), nil); err != nil || rs != nil {
		t.Errorf("RowsByGUID(nil) = %v, %v", rs, err)
	}
	// More GUIDs than one query takes.
	many := []string{b}
	for range 1200 {
		many = append(many, "X")
	}
	if rs, err := db.RowsByGUID(context.Background(), many); err != nil || len(rs) != 1 || rs[0].GUID != b {
		t.Errorf("RowsByGUID(1201 GUIDs) = %v, %v", rs, err)
	}
}

// outgoing finds the rows of a send and returns their GUIDs.
func outgoing(t *testing.T, db *chatdb.DB, o chatdb.Outgoing) []string {
	t.Helper()
	rs, err := db.FindOutgoing(context.Background(), o)
	if err != nil {
		t.Fatalf("FindOutgoing(%+v): %v", o, err)
	}
	if rs != nil && len(rs) == 0 {
		t.Errorf("FindOutgoing(%+v) = an empty slice, want nil", o)
	}
	var guids []string
	for _, r := range rs {
		guids = append(guids, r.GUID)
	}
	return guids
}

func TestFindOutgoing(t *testing.T) {
	f := chatdbtest.New(t, t.TempDir())
	chat := f.DirectChat("iMessage", alice)
	other := f.DirectChat("iMessage", bob)
	start := time.Now().Add(-time.Minute)
	// Older rows with the same text: before since, and at the mark.
	f.Insert(chatdbtest.Msg{Chat: chat, Text: "See you at 5", Date: start.Add(-time.Hour)})
	mark, _ := f.Insert(chatdbtest.Msg{Chat: chat, Text: "See you at 5", Date: start.Add(time.Second)})
	// Same text, wrong chat; same text, inbound; a tapback of ours.
	f.Insert(chatdbtest.Msg{Chat: other, Text: "See you at 5", Date: start.Add(2 * time.Second)})
	f.Insert(chatdbtest.Msg{Chat: chat, From: alice, Text: "See you at 5", Date: start.Add(3 * time.Second)})
	f.Insert(chatdbtest.Msg{Chat: chat, Text: "See you at 5", ReactionTo: "X", ReactionType: 2000, Date: start.Add(3 * time.Second)})
	// Ours, with the spacing and quotes Messages may change, Ventura-style.
	id, g := f.Insert(chatdbtest.Msg{Chat: chat, Text: "See  you\u00a0at 5!", Ventura: true, Date: start.Add(4 * time.Second)})
	_, file := f.Insert(chatdbtest.Msg{Chat: chat, Date: start.Add(5 * time.Second), Attachments: []chatdbtest.FileSpec{
		{Path: "~/Library/Messages/Attachments/blueline/u/report.pdf", MimeType: "application/pdf", TransferName: "report.pdf"}}})
	_, emoji := f.Insert(chatdbtest.Msg{Chat: chat, Text: "👍", Date: start.Add(6 * time.Second)})
	_, accented := f.Insert(chatdbtest.Msg{Chat: chat, Date: start.Add(7 * time.Second), Attachments: []chatdbtest.FileSpec{
		{Path: "~/Library/Messages/Attachments/blueline/v/r.pdf", MimeType: "application/pdf", TransferName: "Re\u0301sume\u0301.PDF"}}})

	db := open(t, f)
	ctx := context.Background()
	rs, err := db.FindOutgoing(ctx, chatdb.Outgoing{Identifier: alice, After: mark, Since: start, Text: "See you at 5"})
	if err != nil || len(rs) != 1 || rs[0].GUID != g || rs[0].RowID != id || !rs[0].IsFromMe || rs[0].Chat.GUID != chat.GUID {
		t.Fatalf("by text: got %+v, %v; want row %d", rs, err, id)
	}
	for _, tc := range []struct {
		name string
		o    chatdb.Outgoing
		want []string
	}{
		{"by file name", chatdb.Outgoing{Identifier: alice, After: mark, Since: start, Filename: "report.pdf"}, []string{file}},
		{"file name in another case and form", chatdb.Outgoing{Identifier: alice, After: mark, Since: start, Filename: "résumé.pdf"}, []string{accented}},
		{"emoji", chatdb.Outgoing{Identifier: alice, After: mark, Since: start, Text: "👍"}, []string{emoji}},
		{"other chat only", chatdb.Outgoing{Identifier: bob, After: id, Since: start, Text: "See you at 5"}, nil},
		{"after our row", chatdb.Outgoing{Identifier: alice, After: id, Since: start, Text: "See you at 5"}, nil},
		{"too late", chatdb.Outgoing{Identifier: alice, Since: start.Add(time.Hour), Text: "See you at 5"}, nil},
		{"other text", chatdb.Outgoing{Identifier: alice, Since: start, Text: "See you at 6"}, nil},
		{"a longer text", chatdb.Outgoing{Identifier: alice, Since: start, Text: "See you at 5 tomorrow"}, nil},
		{"other file", chatdb.Outgoing{Identifier: alice, Since: start, Filename: "report.doc"}, nil},
		{"other emoji", chatdb.Outgoing{Identifier: alice, Since: start, Text: "👎"}, nil},
		{"no such chat", chatdb.Outgoing{Identifier: "nobody", Text: "See you at 5"}, nil},
		{"as a group", chatdb.Outgoing{Identifier: alice, IsGroup: true, After: mark, Since: start, Text: "See you at 5"}, []string{g}},
	} {
		if got := outgoing(t, db, tc.o); !slices.Equal(got, tc.want) {
			t.Errorf("%s: found %v, want %v", tc.name, got, tc.want)
		}
	}
	// Only bob's own chat has bob's row, whatever the case of his address.
	if got := outgoing(t, db, chatdb.Outgoing{Identifier: "BOB@Example.COM", Text: "See you at 5"}); len(got) != 1 {
		t.Errorf("bob in another case: found %v, want his row", got)
	}
	if _, err := db.FindOutgoing(ctx, chatdb.Outgoing{Identifier: alice, Since: start}); err == nil {
		t.Error("FindOutgoing without text or file name succeeded")
	}
}

func TestFindOutgoingScansPastManyRows(t *testing.T) {
	f := chatdbtest.New(t, t.TempDir())
	chat := f.DirectChat("iMessage", alice)
	var mark int64
	f.Batch(func() {
		for range 300 {
			mark, _ = f.Insert(chatdbtest.Msg{Chat: chat, Text: "needle"}) // before the mark
		}
		for i := range 1200 {
			f.Insert(chatdbtest.Msg{Chat: chat, Text: "noise " + strconv.Itoa(i)})
		}
	})
	_, g := f.Insert(chatdbtest.Msg{Chat: chat, Text: "needle"})
	db := open(t, f)
	if got := outgoing(t, db, chatdb.Outgoing{Identifier: alice, After: mark, Text: "needle"}); !slices.Equal(got, []string{g}) {
		t.Fatalf("found %v, want %s past 1200 rows", got, g)
	}
}

// BenchmarkRows100k reads 100,000 rows (a first start's backlog) in one
// call: text, Ventura, group, tapback and attachment rows mixed.
func BenchmarkRows100k(b *testing.B) {
	const n = 100_000
	f := chatdbtest.New(b, b.TempDir())
	chats := []chatdbtest.ChatRef{
		f.DirectChat("iMessage", alice),
		f.DirectChat("SMS", carol),
		f.GroupChat("iMessage", "Group", alice, bob, carol),
	}
	for i := range 200 {
		chats = append(chats, f.DirectChat("iMessage", fmt.Sprintf("+1555000%04d", i)))
	}
	f.Batch(func() {
		var last string
		for i := range n {
			m := chatdbtest.Msg{Chat: chats[i%len(chats)], Text: "message number " + strconv.Itoa(i), Date: date.Add(time.Duration(i) * time.Second)}
			if i%3 == 0 {
				m.From = m.Chat.Identifier
				if strings.Contains(m.Chat.GUID, ";+;") {
					m.From = bob
				}
			}
			switch i % 10 {
			case 1:
				m.Ventura = true
			case 5:
				m.Attachments = []chatdbtest.FileSpec{{Path: "~/Library/Messages/Attachments/x/IMG.heic", MimeType: "image/heic", TransferName: "IMG.heic", TotalBytes: 1000}}
			case 7:
				if last != "" {
					m.ReactionTo, m.ReactionType = last, 2001
				}
			}
			_, last = f.Insert(m)
		}
	})
	db := open(b, f)
	ctx := context.Background()
	b.ResetTimer()
	for b.Loop() {
		rs, err := db.Rows(ctx, 0, n)
		if err != nil {
			b.Fatal(err)
		}
		if len(rs) != n {
			b.Fatalf("got %d rows", len(rs))
		}
	}
	// The figure the README quotes: rows per second, not ns per 100,000.
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}

// readBacklog reads a backlog from its start, pages of size rows at a
// time.
func readBacklog(t *testing.T, backlog *chatdb.Backlog, size int) []chatdb.Row {
	t.Helper()
	var got []chatdb.Row
	for after := int64(0); ; {
		page, err := backlog.Rows(context.Background(), after, size)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			return got
		}
		got = append(got, page...)
		after = page[len(page)-1].RowID
	}
}

// The Backlog reads its message rows through a connection of its own, not
// database/sql: every kind of row, and the values SQLite keeps as it was
// given them (a date written as a real number of seconds, text written as
// a blob), come out
// as Rows gives them.
func TestBacklogRowsAsRows(t *testing.T) {
	f := chatdbtest.New(t, t.TempDir())
	group := f.GroupChat("iMessage", "Weekend", carol, bob)
	direct := f.DirectChat("iMessage", alice)
	sms := f.DirectChat("SMS", carol)
	_, first := f.Insert(chatdbtest.Msg{Chat: direct, From: alice, Text: "hello", Date: date, Read: date.Add(time.Minute), CallerID: "+15550000009"})
	f.Insert(chatdbtest.Msg{Chat: direct, From: alice, Text: "only in the body", Ventura: true})
	f.Insert(chatdbtest.Msg{Chat: direct, From: alice, ReactionTo: first, ReactionType: 2006, Emoji: "🐸"})
	f.Insert(chatdbtest.Msg{Chat: direct, Text: "a reply", ReplyTo: first, IsSent: true})
	f.Insert(chatdbtest.Msg{Chat: direct, From: alice, IsAudioMessage: true, Text: "a voice memo's words"})
	f.Insert(chatdbtest.Msg{Chat: group, From: bob, Text: "a photo", Attachments: []chatdbtest.FileSpec{{Path: "~/Library/Messages/Attachments/a/b/IMG_1.heic", MimeType: "image/heic", TransferName: "IMG_1.heic", TotalBytes: 1234}}})
	f.Insert(chatdbtest.Msg{Chat: group, From: bob, ItemType: 1, GroupAction: 1, Other: carol})
	f.Insert(chatdbtest.Msg{Chat: sms, Text: "later", Scheduled: true, Date: time.Now().Add(time.Hour)})
	f.Insert(chatdbtest.Msg{Chat: sms, From: carol, Text: "win a prize", Spam: true})
	f.Insert(chatdbtest.Msg{Chat: sms, Text: "failed", Error: 22})
	_, edited := f.Insert(chatdbtest.Msg{Chat: direct, Text: "teh first", IsSent: true})
	f.Edit(edited, "the first", date.Add(2*time.Minute))
	_, parts := f.Insert(chatdbtest.Msg{Chat: direct, Text: "two parts", IsSent: true, Attachments: []chatdbtest.FileSpec{{Path: "~/Library/Messages/Attachments/c/d/a.pdf", MimeType: "application/pdf", TransferName: "a.pdf", TotalBytes: 10}}})
	f.UnsendParts(parts, []int{0}, date.Add(3*time.Minute))
	rowID, _ := f.Insert(chatdbtest.Msg{Chat: direct, From: alice, Text: "a real date and a blob"})
	f.Exec("UPDATE message SET date = date / 1e9 + 0.25, text = CAST(text AS BLOB) WHERE ROWID = ?", rowID)
	f.Insert(chatdbtest.Msg{From: alice, Text: "filed under no chat"})

	db := open(t, f)
	ctx := context.Background()
	want, err := db.Rows(ctx, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	backlog := db.Backlog()
	defer backlog.Close()
	got := readBacklog(t, backlog, 3)
	if len(want) != 14 || len(got) != len(want) {
		t.Fatalf("backlog read %d rows, Rows %d; want 14", len(got), len(want))
	}
	for i := range got {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("row %d:\nbacklog %+v\n   Rows %+v", i, got[i], want[i])
		}
	}
	if r := got[12]; r.Text == nil || *r.Text != "a real date and a blob" || r.Date.IsZero() {
		t.Errorf("the row written as a real and a blob reads %v at %v", r.Text, r.Date)
	}
	if !got[4].IsAudioMessage || got[4].Transcription == nil || *got[4].Transcription != "a voice memo's words" {
		t.Errorf("voice memo: %+v", got[4])
	}
}

// A Backlog reads what Rows reads, page after page, and reads each chat
// once: a group renamed between two pages keeps, in the backlog, the name
// it had when first read.
func TestBacklogReadsChatsOnce(t *testing.T) {
	f := chatdbtest.New(t, t.TempDir())
	group := f.GroupChat("iMessage", "Weekend", carol, bob)
	direct := f.DirectChat("SMS", alice)
	for i := range 10 {
		f.Insert(chatdbtest.Msg{Chat: group, From: bob, Text: fmt.Sprintf("group %d", i)})
		f.Insert(chatdbtest.Msg{Chat: direct, Text: fmt.Sprintf("direct %d", i), IsSent: true})
	}
	db := open(t, f)
	ctx := context.Background()
	backlog := db.Backlog()
	defer backlog.Close()
	first, err := backlog.Rows(ctx, 0, 7)
	if err != nil {
		t.Fatal(err)
	}
	first = slices.Clone(first) // the next page reuses the slice
	f.Rename(group, bob, "Renamed")
	got := readBacklog(t, backlog, 7)
	if len(got) < 7 || !reflect.DeepEqual(first, got[:7]) {
		t.Errorf("the first page read twice differs")
	}
	want, err := db.Rows(ctx, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) || len(got) != 21 {
		t.Fatalf("backlog read %d rows, Rows %d; want 21", len(got), len(want))
	}
	for i := range got {
		if got[i].Chat.RowID == group.RowID {
			if got[i].Chat.DisplayName != "Weekend" {
				t.Errorf("row %d: backlog's group is %q, want the name first read", got[i].RowID, got[i].Chat.DisplayName)
			}
			if want[i].Chat.DisplayName != "Renamed" {
				t.Errorf("row %d: Rows' group is %q, want the name it has now", want[i].RowID, want[i].Chat.DisplayName)
			}
			got[i].Chat.DisplayName = want[i].Chat.DisplayName
		}
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("row %d:\nbacklog %+v\n   Rows %+v", i, got[i], want[i])
		}
	}
}
