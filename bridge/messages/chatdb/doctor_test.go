package chatdb_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/blueline-app/blueline/bridge/messages/chatdb"
	"github.com/blueline-app/blueline/bridge/messages/chatdb/chatdbtest"
)

func TestNewestRow(t *testing.T) {
	ctx := context.Background()
	f := chatdbtest.New(t, t.TempDir())
	db := open(t, f)
	id, at, err := db.NewestRow(ctx)
	if err != nil || id != 0 || !at.IsZero() {
		t.Fatalf("empty database: NewestRow = %d, %v, %v; want 0, zero time, nil", id, at, err)
	}
	chat := f.DirectChat("iMessage", alice)
	f.Insert(chatdbtest.Msg{Chat: chat, From: alice, Text: "older", Date: date})
	newest, _ := f.Insert(chatdbtest.Msg{Chat: chat, From: alice, Text: "newer", Date: date.Add(-time.Hour)})
	id, at, err = db.NewestRow(ctx)
	// The newest row is the highest ROWID, whatever its date.
	if err != nil || id != newest || !at.Equal(date.Add(-time.Hour)) {
		t.Errorf("NewestRow = %d, %v, %v; want %d, %v", id, at, err, newest, date.Add(-time.Hour))
	}
	f.Exec("UPDATE message SET date = 0 WHERE ROWID = ?", newest)
	if id, at, err = db.NewestRow(ctx); err != nil || id != newest || !at.IsZero() {
		t.Errorf("undated row: NewestRow = %d, %v, %v; want %d, zero time", id, at, err, newest)
	}
}

func TestCallerIDs(t *testing.T) {
	ctx := context.Background()
	f := chatdbtest.New(t, t.TempDir())
	chat := f.DirectChat("iMessage", alice)
	const me, phone = "me@example.com", "+15559990000"
	f.Insert(chatdbtest.Msg{Chat: chat, From: alice, Text: "old", CallerID: "old@example.com"})
	f.Insert(chatdbtest.Msg{Chat: chat, From: alice, Text: "a", CallerID: phone})
	f.Insert(chatdbtest.Msg{Chat: chat, Text: "b", IsSent: true, CallerID: me})
	f.Insert(chatdbtest.Msg{Chat: chat, From: alice, Text: "c"}) // NULL
	f.Insert(chatdbtest.Msg{Chat: chat, From: alice, Text: "d", CallerID: me})
	db := open(t, f)

	got, err := db.CallerIDs(ctx, 4)
	// The newest four rows: me twice, phone once, one NULL; the oldest
	// row's address is past the limit.
	if want := []string{me, phone}; err != nil || !slices.Equal(got, want) {
		t.Errorf("CallerIDs(4) = %q, %v; want %q", got, err, want)
	}
	got, err = db.CallerIDs(ctx, 100)
	if want := []string{me, "+15559990000", "old@example.com"}; err != nil || !slices.Equal(got, want) {
		t.Errorf("CallerIDs(100) = %q, %v; want %q (ties by address)", got, err, want)
	}

	f.DropColumn("message", "destination_caller_id")
	old := open(t, f)
	if got, err := old.CallerIDs(ctx, 100); err != nil || got != nil {
		t.Errorf("without the column: CallerIDs = %q, %v; want none", got, err)
	}
}

func TestLatestInboundChat(t *testing.T) {
	ctx := context.Background()
	f := chatdbtest.New(t, t.TempDir())
	sms := f.DirectChat("SMS", alice)
	rcs := f.ChatWithGUID("any;-;"+alice, "RCS", alice)
	bobChat := f.DirectChat("iMessage", bob)
	group := f.GroupChat("iMessage", "", alice, bob)
	f.Insert(chatdbtest.Msg{Chat: rcs, From: alice, Text: "older, on RCS", Date: date})
	f.Insert(chatdbtest.Msg{Chat: sms, From: alice, Text: "newer, on SMS", Date: date.Add(time.Minute)})
	// Neither a reply of ours nor a group row counts.
	f.Insert(chatdbtest.Msg{Chat: rcs, Text: "ours, newest", IsSent: true, Date: date.Add(2 * time.Minute)})
	f.Insert(chatdbtest.Msg{Chat: group, From: alice, Text: "in the group", Date: date.Add(3 * time.Minute)})
	f.Insert(chatdbtest.Msg{Chat: bobChat, Text: "only ours", IsSent: true, Date: date})
	db := open(t, f)

	got, ok, err := db.LatestInboundChat(ctx, alice)
	if want := (chatdb.StoredChat{GUID: sms.GUID, ServiceName: "SMS"}); err != nil || !ok || got != want {
		t.Errorf("LatestInboundChat(alice) = %+v, %v, %v; want %+v", got, ok, err, want)
	}
	if got, ok, err := db.LatestInboundChat(ctx, bob); err != nil || ok || got != (chatdb.StoredChat{}) {
		t.Errorf("LatestInboundChat(bob), who never wrote = %+v, %v, %v; want nothing", got, ok, err)
	}
	if _, ok, err := db.LatestInboundChat(ctx, carol); err != nil || ok {
		t.Errorf("LatestInboundChat(unknown) = %v, %v; want false", ok, err)
	}
	f.Insert(chatdbtest.Msg{Chat: rcs, From: alice, Text: "newest, on RCS", Date: date.Add(4 * time.Minute)})
	got, ok, err = db.LatestInboundChat(ctx, alice)
	if want := (chatdb.StoredChat{GUID: "any;-;" + alice, ServiceName: "RCS"}); err != nil || !ok || got != want {
		t.Errorf("after an RCS row: LatestInboundChat(alice) = %+v, %v, %v; want %+v", got, ok, err, want)
	}
}

// LastRowID keeps the highest ROWID handed out when the newest rows are
// deleted, where MaxRowID falls back.
func TestLastRowID(t *testing.T) {
	ctx := context.Background()
	f := chatdbtest.New(t, t.TempDir())
	db := open(t, f)
	if id, err := db.LastRowID(ctx); err != nil || id != 0 {
		t.Errorf("empty database: LastRowID = %d, %v; want 0", id, err)
	}
	chat := f.DirectChat("iMessage", alice)
	kept, _ := f.Insert(chatdbtest.Msg{Chat: chat, From: alice, Text: "kept"})
	lastID, last := f.Insert(chatdbtest.Msg{Chat: chat, From: alice, Text: "deleted"})
	f.DeleteMessage(last)
	maxID, err := db.MaxRowID(ctx)
	if err != nil || maxID != kept {
		t.Fatalf("MaxRowID = %d, %v; want %d", maxID, err, kept)
	}
	if id, err := db.LastRowID(ctx); err != nil || id != lastID {
		t.Errorf("LastRowID = %d, %v; want %d (the deleted row's)", id, err, lastID)
	}
	// Without sqlite_sequence's record, MaxRowID.
	f.Exec("DELETE FROM sqlite_sequence WHERE name = 'message'")
	if id, err := db.LastRowID(ctx); err != nil || id != kept {
		t.Errorf("without a sequence: LastRowID = %d, %v; want %d", id, err, kept)
	}
}

// Changed cannot tell once the database is closed: it answers true, so
// that the caller reads, with the error.
func TestChangedClosed(t *testing.T) {
	ctx := context.Background()
	f := chatdbtest.New(t, t.TempDir())
	db := open(t, f)
	if got, err := db.Changed(ctx); err != nil || !got {
		t.Fatalf("first call: Changed = %v, %v; want true", got, err)
	}
	db.Close()
	if got, err := db.Changed(ctx); err == nil || !got {
		t.Errorf("closed: Changed = %v, %v; want true and an error", got, err)
	}
	// It keeps answering so, never reusing a dead connection.
	if got, err := db.Changed(ctx); err == nil || !got {
		t.Errorf("closed, again: Changed = %v, %v; want true and an error", got, err)
	}
}

func TestFilters(t *testing.T) {
	f := chatdbtest.New(t, t.TempDir())
	type setting struct {
		filtered           int
		blackholed, review bool
		spam               bool
		chat, row          string
	}
	for i, s := range []setting{
		{chat: "", row: ""},
		{spam: true, chat: "", row: chatdb.FilterJunk},
		{filtered: 1, chat: chatdb.FilterUnknownSender, row: chatdb.FilterUnknownSender},
		{filtered: 1, spam: true, chat: chatdb.FilterUnknownSender, row: chatdb.FilterJunk},
		{filtered: 1, review: true, chat: chatdb.FilterPendingReview, row: chatdb.FilterPendingReview},
		{review: true, spam: true, chat: chatdb.FilterPendingReview, row: chatdb.FilterJunk},
		{filtered: 2, chat: chatdb.FilterJunk, row: chatdb.FilterJunk},
		{filtered: 1, blackholed: true, chat: chatdb.FilterBlocked, row: chatdb.FilterBlocked},
		{filtered: 3, spam: true, chat: chatdb.FilterPromotion, row: chatdb.FilterPromotion},
		{filtered: 4, chat: chatdb.FilterTransaction, row: chatdb.FilterTransaction},
		{filtered: 36, chat: chatdb.FilterTransaction, row: chatdb.FilterTransaction},
		{filtered: 52, chat: chatdb.FilterTransaction, row: chatdb.FilterTransaction},
		{filtered: 5, chat: chatdb.FilterOther, row: chatdb.FilterOther},
	} {
		addr := "+1555000" + string(rune('A'+i))
		chat := f.DirectChat("SMS", addr)
		f.SetFilter(chat, s.filtered, s.blackholed, s.review)
		_, g := f.Insert(chatdbtest.Msg{Chat: chat, From: addr, Text: "hello", Spam: s.spam})
		r := byGUID(t, open(t, f), g)
		if r.Chat.Filter != s.chat || r.Filter() != s.row {
			t.Errorf("%+v: chat filter %q, row filter %q", s, r.Chat.Filter, r.Filter())
		}
	}
}

func TestKindString(t *testing.T) {
	for k, want := range map[chatdb.Kind]string{
		chatdb.KindMessage: "message", chatdb.KindReaction: "reaction", chatdb.KindGroupChange: "group change",
		chatdb.KindOther: "other", chatdb.Kind(99): "other",
	} {
		if got := k.String(); got != want {
			t.Errorf("Kind(%d).String() = %q, want %q", k, got, want)
		}
	}
}
