package chatdbtest_test

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/blueline-app/blueline/bridge/messages/chatdb"
	"github.com/blueline-app/blueline/bridge/messages/chatdb/chatdbtest"
	"github.com/blueline-app/blueline/testkit"
)

func records(t *testing.T, trace []byte) []chatdb.TraceRecord {
	t.Helper()
	var out []chatdb.TraceRecord
	sc := bufio.NewScanner(bytes.NewReader(trace))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var r chatdb.TraceRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("trace line %q: %v", sc.Text(), err)
		}
		out = append(out, r)
	}
	return out
}

// A trace of what Messages writes, made on the fixture itself, holds none
// of what was written, and replays into a fixture with the same shape: the
// same rows with the same integers (flags, dates, ROWIDs), the same columns
// set, the same relations (chats, senders, a tapback's target, files).
func TestTraceReplaysWithTheSameShape(t *testing.T) {
	ctx := context.Background()
	const alice, bob = "+15551110001", "bob@example.com"
	src := chatdbtest.New(t, t.TempDir())
	t0 := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	dm := src.DirectChat("iMessage", alice)
	_, before := src.Insert(chatdbtest.Msg{Chat: dm, From: alice, Text: "written before the trace", Date: t0.Add(-time.Hour)})
	src.Insert(chatdbtest.Msg{Chat: dm, From: alice, Text: "never touched", Date: t0.Add(-time.Hour)})

	db, err := chatdb.Open(ctx, src.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var trace testkit.LogBuffer
	tctx, stop := context.WithCancel(ctx)
	type result struct {
		counts chatdb.TraceCounts
		err    error
	}
	done := make(chan result, 1)
	go func() {
		c, err := db.Trace(tctx, &trace, chatdb.TraceOptions{Poll: 5 * time.Millisecond, MacOS: "26.0.1"})
		done <- result{c, err}
	}()
	// saw waits until the trace has recorded op on the row with ROWID id.
	saw := func(op string, id int64) {
		t.Helper()
		testkit.Eventually(t, 5*time.Second, func() bool {
			return slices.ContainsFunc(records(t, []byte(trace.String())), func(r chatdb.TraceRecord) bool {
				return r.Type == chatdb.TraceRow && r.Op == op && r.Message.RowID == id
			})
		})
	}
	testkit.Eventually(t, 5*time.Second, func() bool { return len([]byte(trace.String())) > 0 })

	// What Messages writes while the trace runs, each change waited for,
	// so that none is folded into the insert of its row.
	hiID, hi := src.Insert(chatdbtest.Msg{Chat: dm, From: alice, Text: "hi there 👋", Date: t0})
	saw(chatdb.TraceInsert, hiID)
	replyID, reply := src.Insert(chatdbtest.Msg{Chat: dm, Text: "hello, Alice", IsSent: true, Date: t0.Add(time.Second)})
	saw(chatdb.TraceInsert, replyID)
	src.MarkDelivered(reply, t0.Add(2*time.Second))
	saw(chatdb.TraceUpdate, replyID)
	src.Edit(hi, "hi there, changed my mind", t0.Add(3*time.Second))
	saw(chatdb.TraceUpdate, hiID)
	src.MarkRead(before, t0.Add(4*time.Second)) // the read, of a row written before the trace
	var beforeID int64
	if err := src.QueryRow("SELECT ROWID FROM message WHERE guid = ?", before).Scan(&beforeID); err != nil {
		t.Fatal(err)
	}
	saw(chatdb.TraceUpdate, beforeID)
	group := src.GroupChat("iMessage", "Weekend trip", alice, bob)
	picID, pic := src.Insert(chatdbtest.Msg{Chat: group, From: bob, Text: "look at this", Date: t0.Add(5 * time.Second),
		Attachments: []chatdbtest.FileSpec{{Path: "~/Library/Messages/Attachments/ab/cd/IMG_0001.heic", MimeType: "image/heic",
			TransferName: "IMG_0001.heic", UTI: "public.heic", TotalBytes: 123456}}})
	saw(chatdb.TraceInsert, picID)
	tapID, _ := src.Insert(chatdbtest.Msg{Chat: group, From: alice, ReactionTo: pic, ReactionType: 2000, Date: t0.Add(6 * time.Second)})
	saw(chatdb.TraceInsert, tapID)
	lateID, late := src.Insert(chatdbtest.Msg{Chat: group, Text: "a file follows", IsSent: true, FilesPending: true, Date: t0.Add(7 * time.Second)})
	saw(chatdb.TraceInsert, lateID)
	src.AddAttachment(late, chatdbtest.FileSpec{Path: "~/Library/Messages/Attachments/ef/01/notes.pdf", MimeType: "application/pdf",
		TransferName: "notes.pdf", UTI: "com.adobe.pdf", TotalBytes: 4096})
	saw(chatdb.TraceUpdate, lateID)
	memoID, _ := src.Insert(chatdbtest.Msg{Chat: dm, From: alice, IsAudioMessage: true, Text: "call me back", Date: t0.Add(8 * time.Second)})
	saw(chatdb.TraceInsert, memoID)
	goneID, gone := src.Insert(chatdbtest.Msg{Chat: group, From: bob, ReactionTo: pic, ReactionType: 2001, Date: t0.Add(9 * time.Second)})
	saw(chatdb.TraceInsert, goneID)
	src.DeleteMessage(gone) // a tapback replaced
	saw(chatdb.TraceDelete, goneID)
	stop()
	res := <-done
	if res.err != nil {
		t.Fatal(res.err)
	}
	raw := []byte(trace.String())
	if testing.Verbose() {
		t.Logf("%s", raw)
	}

	// Nothing that was written is in the trace.
	for _, secret := range []string{alice, "15551110001", bob, "hi there", "changed my mind", "hello", "Alice", "look at this", "IMG_0001",
		"notes", "Weekend", "call me back", "before the trace", "me@example.com", hi, reply, pic, late, gone, dm.GUID} {
		if bytes.Contains(raw, []byte(secret)) {
			t.Errorf("the trace holds %q", secret)
		}
	}

	recs := records(t, raw)
	first, last := recs[0], recs[len(recs)-1]
	if first.Type != chatdb.TraceStart || first.Version != chatdb.TraceVersion || first.MacOS != "26.0.1" || first.Started == 0 {
		t.Errorf("start record %+v", first)
	}
	want := chatdb.TraceCounts{Inserts: 7, Updates: 4, Deletes: 1}
	if last.Type != chatdb.TraceEnd || last.Counts == nil || *last.Counts != want || res.counts != want {
		t.Errorf("end record %+v (counts %+v), Trace returned %+v; want counts %+v", last, last.Counts, res.counts, want)
	}

	dst := chatdbtest.New(t, t.TempDir())
	got := dst.Replay(bytes.NewReader(raw))
	if got.TraceCounts != want || len(got.Skipped) != 0 {
		t.Errorf("replayed %+v, want %+v and nothing skipped", got, want)
	}

	traced := []int64{beforeID, hiID, replyID, picID, tapID, lateID, memoID}
	srcRows, dstRows := readRows(t, src.Path(), traced), readRows(t, dst.Path(), nil)
	if len(dstRows) != len(traced) {
		var ids []int64
		for _, r := range dstRows {
			ids = append(ids, r.RowID)
		}
		t.Fatalf("replayed rows %v, want %v", ids, traced)
	}
	for i, want := range shapes(srcRows) {
		if got := shapes(dstRows)[i]; !reflect.DeepEqual(got, want) {
			t.Errorf("row %d replayed as\n%+v\nwant\n%+v", want.RowID, got, want)
		}
	}
	for table, q := range map[string]string{
		"message":    "SELECT * FROM message WHERE ROWID IN (%s) ORDER BY ROWID",
		"attachment": "SELECT a.* FROM attachment a JOIN message_attachment_join j ON j.attachment_id = a.ROWID WHERE j.message_id IN (%s) ORDER BY a.ROWID",
		"chat":       "SELECT * FROM chat WHERE ROWID IN (SELECT chat_id FROM chat_message_join WHERE message_id IN (%s)) ORDER BY ROWID",
	} {
		q = fmt.Sprintf(q, strings.Trim(strings.Join(strings.Fields(fmt.Sprint(traced)), ","), "[]"))
		want, got := columnShapes(t, src.Path(), q), columnShapes(t, dst.Path(), q)
		if len(got) != len(want) {
			t.Errorf("%s: %d rows replayed, want %d", table, len(got), len(want))
			continue
		}
		for i := range want {
			for col, v := range want[i] {
				if got[i][col] != v {
					t.Errorf("%s %s: %s = %s replayed, want %s", table, want[i]["ROWID"], col, got[i][col], v)
				}
			}
		}
	}
}

// readRows reads the rows with the given ROWIDs (all when nil) as the
// bridge does.
func readRows(t *testing.T, path string, ids []int64) []chatdb.Row {
	t.Helper()
	db, err := chatdb.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Rows(context.Background(), 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if ids == nil {
		return rows
	}
	return slices.DeleteFunc(rows, func(r chatdb.Row) bool { return !slices.Contains(ids, r.RowID) })
}

// rowShape is what a replay must keep of a row as the bridge reads it:
// everything but what the trace hashed, which is kept as relations (the
// index of the first row with the same value) and lengths.
type rowShape struct {
	RowID                                 int64
	FromMe, Sent, Delivered, Read         bool
	Date, DateRead, DateDelivered, Edited time.Time
	Service, ChatService                  string
	TextChars                             int
	SameSenderAs, SameChatAs, TargetIs    int
	Group                                 bool
	Participants, Attachments             int
	AttachmentTypes                       []string
	AssociatedType, ItemType              int
}

func shapes(rows []chatdb.Row) []rowShape {
	first := func(i int, same func(a, b chatdb.Row) bool) int {
		return slices.IndexFunc(rows[:i+1], func(r chatdb.Row) bool { return same(r, rows[i]) })
	}
	out := make([]rowShape, len(rows))
	for i, r := range rows {
		s := rowShape{RowID: r.RowID, FromMe: r.IsFromMe, Sent: r.IsSent, Delivered: r.IsDelivered, Read: r.IsRead,
			Date: r.Date, DateRead: r.DateRead, DateDelivered: r.DateDelivered, Edited: r.DateEdited,
			Service: r.Service, ChatService: r.Chat.Service, Group: r.Chat.IsGroup, Participants: len(r.Chat.Participants),
			Attachments: len(r.Attachments), AssociatedType: r.AssociatedType, ItemType: r.ItemType, TargetIs: -1}
		if r.Text != nil {
			s.TextChars = len([]rune(*r.Text))
		}
		for _, a := range r.Attachments {
			s.AttachmentTypes = append(s.AttachmentTypes, a.MimeType)
		}
		s.SameSenderAs = first(i, func(a, b chatdb.Row) bool { return a.Sender == b.Sender })
		s.SameChatAs = first(i, func(a, b chatdb.Row) bool {
			return a.Chat.GUID == b.Chat.GUID && a.Chat.Identifier == b.Chat.Identifier
		})
		if r.AssociatedGUID != "" {
			s.TargetIs = slices.IndexFunc(rows, func(o chatdb.Row) bool { return o.GUID == r.AssociatedGUID })
		}
		out[i] = s
	}
	return out
}

// columnShapes reads what query selects: per row, each column's integer
// value, or whether it is NULL, text or a blob.
func columnShapes(t *testing.T, path, query string) []map[string]string {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rs, err := db.Query(query)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	cols, _ := rs.Columns()
	var out []map[string]string
	for rs.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rs.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		row := map[string]string{}
		for i, c := range cols {
			switch v := vals[i].(type) {
			case nil:
				row[c] = "NULL"
			case int64:
				row[c] = fmt.Sprint(v)
			case string:
				row[c] = "text"
			case []byte:
				row[c] = "blob"
			default:
				row[c] = fmt.Sprintf("%T", v)
			}
		}
		out = append(out, row)
	}
	if err := rs.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
