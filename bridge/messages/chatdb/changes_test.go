package chatdb_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/blueline-app/blueline/bridge/messages/chatdb"
	"github.com/blueline-app/blueline/bridge/messages/chatdb/chatdbtest"
)

func TestEditAndUnsend(t *testing.T) {
	f := chatdbtest.New(t, t.TempDir())
	chat := f.DirectChat("iMessage", alice)
	_, edited := f.Insert(chatdbtest.Msg{Chat: chat, From: alice, Text: "see you at 5", Ventura: true})
	_, retracted := f.Insert(chatdbtest.Msg{Chat: chat, From: alice, Text: "oops", Attachments: []chatdbtest.FileSpec{
		{Path: "~/Library/Messages/Attachments/a/b/c/pic.jpeg", MimeType: "image/jpeg", TransferName: "pic.jpeg", TotalBytes: 10}}})
	_, emptied := f.Insert(chatdbtest.Msg{Chat: chat, From: alice, Text: "wrong chat"})
	db := open(t, f)

	at := time.Now().Add(-time.Minute).Truncate(time.Microsecond)
	f.Edit(edited, "see you at 6", at)
	f.Unsend(retracted, at.Add(time.Second))
	f.UnsendAsEdit(emptied, at.Add(2*time.Second))

	r := byGUID(t, db, edited)
	if r.Text == nil || *r.Text != "see you at 6" || !r.DateEdited.Equal(at) || r.Kind() != chatdb.KindMessage {
		t.Errorf("edited: text %v, edited %v, kind %v", str(r.Text), r.DateEdited, r.Kind())
	}
	if _, unsent := r.Unsent(); unsent {
		t.Error("an edit with a body counts as an unsend")
	}
	for _, tc := range []struct {
		name, guid string
		at         time.Time
	}{{"date_retracted", retracted, at.Add(time.Second)}, {"an edit that empties the body", emptied, at.Add(2 * time.Second)}} {
		r := byGUID(t, db, tc.guid)
		when, unsent := r.Unsent()
		if !unsent || !when.Equal(tc.at) || r.Text != nil || len(r.Attachments) != 0 {
			t.Errorf("unsent by %s: Unsent() = %v, %v; text %v, %d attachments", tc.name, when, unsent, str(r.Text), len(r.Attachments))
		}
	}
}

func TestBodyOnlyAttachment(t *testing.T) {
	f := chatdbtest.New(t, t.TempDir())
	chat := f.DirectChat("iMessage", alice)
	_, g := f.Insert(chatdbtest.Msg{Chat: chat, From: alice, Text: "two files", Attachments: []chatdbtest.FileSpec{
		{Path: "~/Library/Messages/Attachments/a/b/c/one.jpeg", MimeType: "image/jpeg", TransferName: "one.jpeg", TotalBytes: 1},
		{Path: "~/Library/Messages/Attachments/a/b/d/two.pdf", MimeType: "application/pdf", TransferName: "two.pdf", TotalBytes: 2, BodyOnly: true},
	}})
	var joins int
	if err := f.QueryRow("SELECT COUNT(*) FROM message_attachment_join").Scan(&joins); err != nil || joins != 1 {
		t.Fatalf("join rows = %d, %v; want 1", joins, err)
	}
	db := open(t, f)
	for _, read := range []func() chatdb.Row{
		func() chatdb.Row { return byGUID(t, db, g) },
		func() chatdb.Row {
			rows, err := db.Rows(context.Background(), 0, 10)
			if err != nil || len(rows) != 1 {
				t.Fatalf("Rows = %d rows, %v", len(rows), err)
			}
			return rows[0]
		},
	} {
		r := read()
		if len(r.Attachments) != 2 || r.Attachments[0].TransferName != "one.jpeg" || r.Attachments[1].TransferName != "two.pdf" ||
			r.Attachments[1].MimeType != "application/pdf" || r.Attachments[1].TotalBytes != 2 {
			t.Errorf("attachments = %+v, want one.jpeg then two.pdf", r.Attachments)
		}
	}
}

func TestRowStates(t *testing.T) {
	f := chatdbtest.New(t, t.TempDir())
	chat := f.DirectChat("iMessage", alice)
	old := time.Now().Add(-30 * 24 * time.Hour)
	f.Insert(chatdbtest.Msg{Chat: chat, Text: "long ago", IsSent: true, Date: old})
	_, plain := f.Insert(chatdbtest.Msg{Chat: chat, From: alice, Text: "plain inbound"})
	_, ours := f.Insert(chatdbtest.Msg{Chat: chat, Text: "ours", IsSent: true})
	_, file := f.Insert(chatdbtest.Msg{Chat: chat, From: alice, Attachments: []chatdbtest.FileSpec{{MimeType: "image/jpeg", TransferName: "p.jpeg"}}})
	f.Insert(chatdbtest.Msg{Chat: chat, From: alice, ReactionTo: plain, ReactionType: 2000, Text: "Loved “plain inbound”"})
	db := open(t, f)
	ctx := context.Background()
	since := time.Now().Add(-7 * 24 * time.Hour)

	states := func() map[string]chatdb.RowState {
		t.Helper()
		list, err := db.RowStates(ctx, since)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]chatdb.RowState{}
		for _, s := range list {
			out[s.GUID] = s
		}
		return out
	}
	// Rows of ours, rows with files and contacts' rows the owner has not
	// read; not tapbacks or rows older than the window.
	f.MarkRead(plain, time.Now().Add(-8*24*time.Hour)) // read long ago: out
	first := states()
	if len(first) != 2 || first[ours].GUID == "" || first[file].GUID == "" {
		t.Fatalf("states = %+v, want the row of ours and the row with a file", first)
	}
	f.MarkUnread(plain)
	if unread := states(); len(unread) != 3 || unread[plain].IsRead {
		t.Fatalf("states = %+v, want the unread inbound row too", unread)
	}
	f.MarkRead(plain, time.Now()) // read now, on the owner's iPhone: still in, with its new state
	if read := states(); len(read) != 3 || !read[plain].IsRead || read[plain].Read == 0 {
		t.Fatalf("states = %+v, want the inbound row read", read)
	}
	f.Edit(plain, "plain, edited", time.Now())
	f.MarkDelivered(ours, time.Now())
	f.FinishTransfer(file, "~/Library/Messages/Attachments/x/p.jpeg")
	second := states()
	if len(second) != 3 || second[plain].Edited == 0 {
		t.Errorf("after an edit: %+v, want the edited row too", second)
	}
	if second[ours] == first[ours] || second[ours].Delivered == 0 {
		t.Errorf("delivered row: state %+v, was %+v", second[ours], first[ours])
	}
	if second[file] == first[file] {
		t.Errorf("finished transfer: state unchanged %+v", second[file])
	}
	if again := states(); again[ours] != second[ours] || again[file] != second[file] {
		t.Error("the same rows read twice give different states")
	}

	// The window is found through the date index, never by reading the
	// whole table.
	plan, err := db.RowStatesPlan(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(plan, "SEARCH m USING INDEX message_idx_date (date>?)") || strings.Contains(plan, "SCAN m") {
		t.Errorf("RowStates plan:\n%s", plan)
	}
}

// Changed must see every commit Messages makes, through checkpoints that
// truncate the write-ahead log and a log deleted and started anew, and
// nothing when nothing was committed.
func TestChanged(t *testing.T) {
	f := chatdbtest.New(t, t.TempDir())
	chat := f.DirectChat("iMessage", alice)
	f.Insert(chatdbtest.Msg{Chat: chat, From: alice, Text: "one"})
	db := open(t, f)
	ctx := context.Background()
	changed := func() bool {
		t.Helper()
		c, err := db.Changed(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	if !changed() {
		t.Error("first call: not changed")
	}
	if changed() {
		t.Error("changed with no commit")
	}
	_, g := f.Insert(chatdbtest.Msg{Chat: chat, From: alice, Text: "two"})
	if !changed() {
		t.Error("a new row: not changed")
	}
	f.Checkpoint()
	if fi, err := os.Stat(f.Path() + "-wal"); err != nil || fi.Size() != 0 {
		t.Fatalf("after a checkpoint the log is %v, %v; want empty", fi, err)
	}
	f.MarkRead(g, time.Now())
	if !changed() {
		t.Error("an update after a checkpoint: not changed")
	}
	if changed() {
		t.Error("changed with no commit after a checkpoint")
	}
	f.Reopen()
	_, three := f.Insert(chatdbtest.Msg{Chat: chat, From: alice, Text: "three"})
	if !changed() {
		t.Error("a row after the writer reopened: not changed")
	}
	if r := byGUID(t, db, three); str(r.Text) != "three" {
		t.Errorf("row after reopen: %q", str(r.Text))
	}
}
