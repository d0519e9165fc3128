package chatdb_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/blueline-app/blueline/bridge/messages/chatdb"
	"github.com/blueline-app/blueline/bridge/messages/chatdb/chatdbtest"
	"github.com/blueline-app/blueline/testkit"
)

// traceRun is a trace under way on a fixture.
type traceRun struct {
	t    *testing.T
	buf  testkit.LogBuffer
	stop context.CancelFunc
	done chan traceResult
}

type traceResult struct {
	counts chatdb.TraceCounts
	err    error
}

// startTrace starts tracing db and waits for its start record.
func startTrace(t *testing.T, db *chatdb.DB, opt chatdb.TraceOptions) *traceRun {
	t.Helper()
	ctx, stop := context.WithTimeout(context.Background(), time.Minute)
	tr := &traceRun{t: t, stop: stop, done: make(chan traceResult, 1)}
	go func() {
		c, err := db.Trace(ctx, &tr.buf, opt)
		tr.done <- traceResult{c, err}
	}()
	t.Cleanup(func() {
		stop()
		<-tr.done
	})
	testkit.Eventually(t, 5*time.Second, func() bool { return len(tr.records()) > 0 })
	return tr
}

func (tr *traceRun) records() []chatdb.TraceRecord {
	tr.t.Helper()
	var out []chatdb.TraceRecord
	sc := bufio.NewScanner(strings.NewReader(tr.buf.String()))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var r chatdb.TraceRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			tr.t.Fatalf("trace line %q: %v", sc.Text(), err)
		}
		out = append(out, r)
	}
	return out
}

// find returns the record of op on the row id, and whether there is one.
func (tr *traceRun) find(op string, id int64) (chatdb.TraceRecord, bool) {
	tr.t.Helper()
	recs := tr.records()
	i := slices.IndexFunc(recs, func(r chatdb.TraceRecord) bool {
		return r.Type == chatdb.TraceRow && r.Op == op && r.Message != nil && r.Message.RowID == id
	})
	if i < 0 {
		return chatdb.TraceRecord{}, false
	}
	return recs[i], true
}

// wait waits for the record of op on the row id.
func (tr *traceRun) wait(op string, id int64) chatdb.TraceRecord {
	tr.t.Helper()
	testkit.Eventually(tr.t, 5*time.Second, func() bool { _, ok := tr.find(op, id); return ok })
	r, _ := tr.find(op, id)
	return r
}

// end stops the trace and returns what Trace returned.
func (tr *traceRun) end() traceResult {
	tr.t.Helper()
	tr.stop()
	select {
	case res := <-tr.done:
		tr.done <- res // for the cleanup
		return res
	case <-time.After(10 * time.Second):
		tr.t.Fatal("Trace did not return once its context ended")
	}
	return traceResult{}
}

func textOf(v chatdb.TraceValue) string {
	if v.Text == nil {
		return "<nil>"
	}
	return *v.Text
}

// The trace records each row's shape: texts hashed by kind with the parts
// that say what they refer to kept, equal values hashed alike, the columns
// that name a service or a file type kept, blobs reduced to structure, and
// the rows it refers to.
func TestTraceRecordsShapes(t *testing.T) {
	const secret = "meet me at the old mill"
	f := chatdbtest.New(t, t.TempDir())
	dm := f.DirectChat("iMessage", alice)
	group := f.GroupChat("iMessage", "Book club", alice, bob)
	_, target := f.Insert(chatdbtest.Msg{Chat: dm, From: alice, Text: "before the trace", Date: time.Now().Add(-time.Minute)})
	db := open(t, f)
	tr := startTrace(t, db, chatdb.TraceOptions{Poll: 5 * time.Millisecond, MacOS: "15.5"})

	start := tr.records()[0]
	maxID, err := db.MaxRowID(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if start.Type != chatdb.TraceStart || start.Version != chatdb.TraceVersion || start.MacOS != "15.5" || start.Started == 0 || start.LastRowID != maxID {
		t.Errorf("start record %+v, want version %d, macOS 15.5, last ROWID %d", start, chatdb.TraceVersion, maxID)
	}

	msgID, msg := f.Insert(chatdbtest.Msg{Chat: dm, From: alice, Text: secret, Ventura: true, CallerID: "me@example.com"})
	rec := tr.wait(chatdb.TraceInsert, msgID)
	if rec.SeenAt == 0 {
		t.Error("insert record without seen_at")
	}
	cols := rec.Message.Columns
	if g := cols["guid"]; g.Kind != chatdb.KindUUID || len(g.Hash) != 16 || g.Chars != len(msg) {
		t.Errorf("guid %+v, want a 16-digit hash of kind uuid, %d chars", g, len(msg))
	}
	if s := cols["service"]; textOf(s) != "iMessage" {
		t.Errorf("service %+v, want kept as iMessage", s)
	}
	if c := cols["destination_caller_id"]; c.Kind != chatdb.KindEmail || c.Hash == "" {
		t.Errorf("destination_caller_id %+v, want a hashed email", c)
	}
	if v := cols["text"]; !v.IsNull() {
		t.Errorf("text of a Ventura row %+v, want NULL", v)
	}
	if v := cols["is_from_me"]; v.Int == nil || *v.Int != 0 {
		t.Errorf("is_from_me %+v, want the integer 0", v)
	}
	body := cols["attributedBody"].Blob
	if body == nil || body.Format != "typedstream" || body.Bytes == 0 || body.Text == nil ||
		body.Text.Kind != chatdb.KindText || body.Text.Chars != len(secret) {
		t.Errorf("attributedBody %+v, want a typedstream whose text has %d chars", body, len(secret))
	}
	if len(rec.Chats) != 1 || rec.Chats[0].RowID != dm.RowID || len(rec.Chats[0].Members) != 1 {
		t.Fatalf("chats %+v, want the direct chat %d with its member", rec.Chats, dm.RowID)
	}
	chat := rec.Chats[0].Columns
	if g := chat["guid"]; g.Prefix != "iMessage;-;" || g.Kind != chatdb.KindPhone {
		t.Errorf("chat guid %+v, want prefix iMessage;-; and a phone", g)
	}
	if len(rec.Handles) != 1 || rec.Handles[0].RowID != rec.Chats[0].Members[0] {
		t.Fatalf("handles %+v, want the chat's member", rec.Handles)
	}
	// The same address hashes alike wherever it is.
	hid := rec.Handles[0].Columns["id"]
	if hid.Kind != chatdb.KindPhone || hid.Hash != chat["chat_identifier"].Hash || hid.Hash != chat["guid"].Hash {
		t.Errorf("handle id %+v, chat identifier %+v, chat guid %+v: want one phone hash", hid, chat["chat_identifier"], chat["guid"])
	}

	// A tapback keeps its "p:0/" and hashes its target as the target's GUID.
	tapID, _ := f.Insert(chatdbtest.Msg{Chat: dm, From: alice, ReactionTo: target, ReactionType: 2001})
	tap := tr.wait(chatdb.TraceInsert, tapID)
	var targetID int64
	if err := f.QueryRow("SELECT ROWID FROM message WHERE guid = ?", target).Scan(&targetID); err != nil {
		t.Fatal(err)
	}
	a := tap.Message.Columns["associated_message_guid"]
	if a.Prefix != "p:0/" || a.Kind != chatdb.KindUUID || a.Hash == "" {
		t.Errorf("associated_message_guid %+v, want p:0/ and a uuid hash", a)
	}
	if v := tap.Message.Columns["associated_message_type"]; v.Int == nil || *v.Int != 2001 {
		t.Errorf("associated_message_type %+v, want 2001", v)
	}

	// Files: a joined one with its columns, one named only in the body,
	// a voice memo's user_info as a property list's structure.
	picID, _ := f.Insert(chatdbtest.Msg{Chat: group, From: bob, Text: "look", Attachments: []chatdbtest.FileSpec{
		{Path: "~/Library/Messages/Attachments/ab/cd/IMG_0042.heic", MimeType: "image/heic", UTI: "public.heic", TransferName: "IMG_0042.heic", TotalBytes: 1234},
		{Path: "~/Library/Messages/Attachments/ab/ce/Report.pdf", MimeType: "application/pdf", TransferName: "Report.pdf", TotalBytes: 99, BodyOnly: true},
	}})
	pic := tr.wait(chatdb.TraceInsert, picID)
	if len(pic.Chats) != 1 || len(pic.Chats[0].Members) != 2 || len(pic.Handles) != 2 {
		t.Errorf("group row: chats %+v, handles %d; want one chat of two members and both handles", pic.Chats, len(pic.Handles))
	}
	if len(pic.Attachments) != 2 {
		t.Fatalf("attachments %+v, want two", pic.Attachments)
	}
	joined, bodyOnly := pic.Attachments[0], pic.Attachments[1]
	if joined.BodyOnly || !bodyOnly.BodyOnly {
		t.Errorf("body_only: joined %v, body-only %v", joined.BodyOnly, bodyOnly.BodyOnly)
	}
	fn := joined.Columns["filename"]
	if fn.Prefix != "~/" || fn.Suffix != ".heic" || fn.Hash == "" || textOf(joined.Columns["mime_type"]) != "image/heic" ||
		textOf(joined.Columns["uti"]) != "public.heic" || joined.Columns["total_bytes"].Int == nil || *joined.Columns["total_bytes"].Int != 1234 {
		t.Errorf("joined attachment %+v", joined.Columns)
	}
	if tn := bodyOnly.Columns["transfer_name"]; tn.Suffix != ".pdf" || tn.Prefix != "" {
		t.Errorf("body-only transfer_name %+v, want suffix .pdf, no prefix", tn)
	}
	// The body names both files, by GUIDs hashed as attachment.guid is,
	// and the attributes that carry them by name.
	b := pic.Message.Columns["attributedBody"].Blob
	if b == nil || len(b.Files) != 2 || b.Files[0] != joined.Columns["guid"] || b.Files[1] != bodyOnly.Columns["guid"] ||
		!slices.Contains(b.Attributes, "__kIMFileTransferGUIDAttributeName") {
		t.Errorf("attributedBody %+v: want the files' GUIDs %+v, %+v and the transfer attribute", b, joined.Columns["guid"], bodyOnly.Columns["guid"])
	}
	if g := joined.Columns["guid"]; g.Prefix != "at_0_" || g.Kind != chatdb.KindUUID {
		t.Errorf("attachment guid %+v, want prefix at_0_ and a uuid", g)
	}

	memoID, _ := f.Insert(chatdbtest.Msg{Chat: dm, From: alice, IsAudioMessage: true, Text: "call me back"})
	memo := tr.wait(chatdb.TraceInsert, memoID)
	if len(memo.Attachments) != 1 {
		t.Fatalf("voice memo attachments %+v", memo.Attachments)
	}
	info := memo.Attachments[0].Columns["user_info"].Blob
	if info == nil || info.Format != "bplist" || info.Plist == nil {
		t.Fatalf("user_info %+v, want a bplist's structure", info)
	}
	plist, _ := json.Marshal(info.Plist)
	if !bytes.Contains(plist, []byte(`"dict"`)) || !bytes.Contains(plist, []byte(`"string"`)) {
		t.Errorf("user_info structure %s, want a dictionary with a string", plist)
	}

	res := tr.end()
	if res.err != nil {
		t.Fatal(res.err)
	}
	raw := tr.buf.String()
	for _, s := range []string{secret, "old mill", alice, "15551230001", bob, "me@example.com", "Book club", "IMG_0042", "Report", "call me back", msg, target} {
		if strings.Contains(raw, s) {
			t.Errorf("the trace holds %q", s)
		}
	}
	recs := tr.records()
	last := recs[len(recs)-1]
	want := chatdb.TraceCounts{Inserts: 4}
	if last.Type != chatdb.TraceEnd || last.Ended == 0 || last.Counts == nil || *last.Counts != want || res.counts != want {
		t.Errorf("end record %+v (counts %+v), returned %+v; want %+v", last, last.Counts, res.counts, want)
	}
}

// Updates and deletes: a change to any column, a chat or a file of a
// watched row is an update; a row gone is a delete; a row dated before the
// window is not watched; a row that only left the window is not deleted.
func TestTraceUpdatesAndDeletes(t *testing.T) {
	f := chatdbtest.New(t, t.TempDir())
	dm := f.DirectChat("iMessage", alice)
	group := f.GroupChat("iMessage", "", alice, bob)
	now := time.Now().Truncate(time.Millisecond)
	_, old := f.Insert(chatdbtest.Msg{Chat: dm, From: alice, Text: "last month", Date: now.Add(-30 * 24 * time.Hour)})
	recentID, recent := f.Insert(chatdbtest.Msg{Chat: dm, From: alice, Text: "an hour ago", Date: now.Add(-time.Hour)})
	db := open(t, f)
	tr := startTrace(t, db, chatdb.TraceOptions{Poll: 5 * time.Millisecond, Window: 24 * time.Hour})

	f.MarkRead(recent, now)
	upd := tr.wait(chatdb.TraceUpdate, recentID)
	if v := upd.Message.Columns["is_read"]; v.Int == nil || *v.Int != 1 {
		t.Errorf("update of the read row: is_read %+v, want 1", v)
	}
	// Outside the window: not watched. A row inserted after it shows the
	// look that would have seen it is done.
	f.MarkRead(old, now)
	sentID, sent := f.Insert(chatdbtest.Msg{Chat: dm, Text: "sent", IsSent: true, FilesPending: true})
	tr.wait(chatdb.TraceInsert, sentID)
	var oldID int64
	if err := f.QueryRow("SELECT ROWID FROM message WHERE guid = ?", old).Scan(&oldID); err != nil {
		t.Fatal(err)
	}
	if r, ok := tr.find(chatdb.TraceUpdate, oldID); ok {
		t.Errorf("a row before the window recorded: %+v", r)
	}

	f.AddAttachment(sent, chatdbtest.FileSpec{Path: "~/Library/Messages/Attachments/x/y/a.png", MimeType: "image/png", TransferName: "a.png", TotalBytes: 7})
	if r := tr.wait(chatdb.TraceUpdate, sentID); len(r.Attachments) != 1 || textOf(r.Attachments[0].Columns["mime_type"]) != "image/png" {
		t.Errorf("update on a file added: attachments %+v", r.Attachments)
	}
	f.AddToChat(sent, group)
	testkit.Eventually(t, 5*time.Second, func() bool {
		return slices.ContainsFunc(tr.records(), func(r chatdb.TraceRecord) bool {
			return r.Op == chatdb.TraceUpdate && r.Message.RowID == sentID && len(r.Chats) == 2
		})
	})

	// A row moved out of the window is not gone; a row deleted is.
	f.Exec("UPDATE message SET date = ? WHERE ROWID = ?", chatdbtest.AppleNanos(now.Add(-48*time.Hour)), recentID)
	f.DeleteMessage(sent)
	del := tr.wait(chatdb.TraceDelete, sentID)
	if len(del.Message.Columns) != 0 || del.Chats != nil || del.SeenAt == 0 {
		t.Errorf("delete record %+v, want the ROWID alone", del)
	}
	res := tr.end()
	if res.err != nil {
		t.Fatal(res.err)
	}
	if r, ok := tr.find(chatdb.TraceDelete, recentID); ok {
		t.Errorf("a row that left the window recorded as deleted: %+v", r)
	}
	// The read, the file and the chat; the row moved out of the window is
	// no longer watched, so neither updated nor deleted.
	if want := (chatdb.TraceCounts{Inserts: 1, Updates: 3, Deletes: 1}); res.counts != want {
		t.Errorf("counts %+v, want %+v", res.counts, want)
	}
}

// A flood of new rows is read in batches of a thousand, every row once.
func TestTraceBatches(t *testing.T) {
	f := chatdbtest.New(t, t.TempDir())
	dm := f.DirectChat("iMessage", alice)
	db := open(t, f)
	tr := startTrace(t, db, chatdb.TraceOptions{Poll: 5 * time.Millisecond})
	const n = 1001 // one past a batch
	f.Batch(func() {
		for i := range n {
			f.Insert(chatdbtest.Msg{Chat: dm, From: alice, Text: "x", Date: time.Now().Add(time.Duration(i) * time.Millisecond)})
		}
	})
	// The start record and a line per row (counted, not parsed: this is
	// slow under the race detector).
	testkit.Eventually(t, 30*time.Second, func() bool { return strings.Count(tr.buf.String(), "\n") >= 1+n })
	res := tr.end()
	if res.err != nil || res.counts != (chatdb.TraceCounts{Inserts: n}) {
		t.Fatalf("Trace = %+v, %v; want %d inserts", res.counts, res.err, n)
	}
	seen := map[int64]int{}
	for _, r := range tr.records() {
		if r.Type == chatdb.TraceRow {
			seen[r.Message.RowID]++
		}
	}
	if len(seen) != n {
		t.Errorf("%d rows recorded, want %d", len(seen), n)
	}
	for id, c := range seen {
		if c != 1 {
			t.Errorf("row %d recorded %d times", id, c)
		}
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestTraceWriteError(t *testing.T) {
	f := chatdbtest.New(t, t.TempDir())
	db := open(t, f)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := db.Trace(ctx, failingWriter{}, chatdb.TraceOptions{})
	if err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("Trace to a failing writer: %v, want its error", err)
	}
}

// Trace on a closed database fails at once rather than tracing nothing.
func TestTraceClosed(t *testing.T) {
	f := chatdbtest.New(t, t.TempDir())
	db := open(t, f)
	db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var buf bytes.Buffer
	if _, err := db.Trace(ctx, &buf, chatdb.TraceOptions{}); err == nil || buf.Len() != 0 {
		t.Errorf("Trace on a closed database: %v, wrote %q; want an error and nothing", err, buf.String())
	}
}
