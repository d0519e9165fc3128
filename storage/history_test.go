package storage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
)

func ptr[T any](v T) *T { return &v }

// listAll walks a chat's messages, newest first, in pages of size.
func listAll(t *testing.T, db *DB, chatID string, size int) []Message {
	t.Helper()
	var out []Message
	var after []byte
	for {
		page, next, err := db.ListMessages(context.Background(), chatID, after, size)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, page...)
		if next == nil {
			return out
		}
		after = next
	}
}

// openMessagesLine opens a database in a temporary folder with one line
// on the Messages bridge.
func openMessagesLine(t *testing.T) (*DB, Line) {
	t.Helper()
	db, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	lines, err := db.SyncLines(context.Background(), []Line{{Handle: "+15550000001", Service: "imessage", Bridge: "messages"}})
	if err != nil {
		t.Fatal(err)
	}
	return db, lines[0]
}

func sameJSON(t *testing.T, what string, got, want any) {
	t.Helper()
	if reflect.DeepEqual(got, want) {
		return
	}
	g, _ := json.MarshalIndent(got, "", " ")
	w, _ := json.MarshalIndent(want, "", " ")
	t.Fatalf("%s:\ngot  %s\nwant %s", what, g, w)
}

// Imported history is stored compactly and reads back as it was given,
// with IDs its place gives, the same after a reopen; it is found by ID
// and GUID, updated in place, and answers reactions; live messages beside
// it stay JSON.
func TestHistoryCompact(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { db.Close() }()
	lines, err := db.SyncLines(ctx, []Line{{Handle: "+15550000001", Service: "imessage", Bridge: "messages"}})
	if err != nil {
		t.Fatal(err)
	}
	line := lines[0]
	dm := Chat{ID: NewID("cht_"), LineID: line.ID, GUID: "iMessage;-;+15551110001", Identifier: "+15551110001", Service: "imessage"}
	group := Chat{ID: NewID("cht_"), LineID: line.ID, GUID: "iMessage;+;chat42", Identifier: "chat42", Service: "imessage", IsGroup: true,
		Participants: []string{"+15551110001", "+15551110002"}}
	msgs := []Message{
		{GUID: "11111111-2222-4333-8444-555555555555", Sender: "+15551110001", Text: ptr("hello"), Service: "imessage", SentAt: 1000, SyncedAt: 5000},
		{GUID: "11111111-2222-4333-8444-555555555556", Sender: line.Handle, IsFromMe: true, Text: ptr(""), Service: "imessage", SentAt: 1000, SyncedAt: 5000,
			DeliveredAt: 1200, ReadAt: 1300},
		{GUID: "lower-or-odd:guid", Sender: "+15551110001", Service: "sms", SentAt: 2000, SyncedAt: 5000, IsAudioMessage: true,
			Attachments: []Attachment{{Filename: "Audio.caf", MimeType: "audio/x-caf", Size: 42, Transcription: ptr("hi there")}}},
		{GUID: "aaaaaaaa-2222-4333-8444-555555555555", Sender: "+15551110001", Text: ptr("odd service, lower-case GUID"), Service: "rcs", SentAt: 3000,
			SyncedAt: 5000, ReplyToGUID: "11111111-2222-4333-8444-555555555555"},
		{GUID: "22222222-2222-4333-8444-555555555555", Sender: "+15551110002", Text: ptr("in the group ✓"), Service: "imessage", SentAt: 2500, SyncedAt: 5000},
	}
	var in []Inbound
	for i, m := range msgs {
		c := dm
		if i == 4 {
			c = group
		}
		m.ID = NewID("msg_")
		in = append(in, Inbound{Chat: c, Message: m})
	}
	if _, err := db.ImportHistory(ctx, line.ID, in); err != nil {
		t.Fatal(err)
	}
	if err := db.SettleHistory(ctx); err != nil {
		t.Fatal(err)
	}
	// A live message after it: JSON, with its own ID.
	live, err := db.RecordInbound(ctx, Inbound{Chat: dm, Message: Message{ID: NewID("msg_"), GUID: "33333333-2222-4333-8444-555555555555",
		Sender: "+15551110001", Text: ptr("live"), Service: "imessage", SentAt: 4000, SyncedAt: 6000}})
	if err != nil {
		t.Fatal(err)
	}
	stored, err := db.ChatByGUID(ctx, line.ID, dm.GUID)
	if err != nil {
		t.Fatal(err)
	}
	storedGroup, err := db.ChatByGUID(ctx, line.ID, group.GUID)
	if err != nil {
		t.Fatal(err)
	}
	got := listAll(t, db, stored.ID, 2)
	if len(got) != 5 {
		t.Fatalf("listed %d messages, want 5", len(got))
	}
	if got[0].ID != live.Message.ID {
		t.Fatalf("newest is %s, want the live %s", got[0].ID, live.Message.ID)
	}
	// Newest first; the two of the same date in the order imported.
	for i, want := range []int{3, 2, 1, 0} {
		m := got[i+1]
		w := msgs[want]
		w.ID, w.ChatID, w.LineID = m.ID, stored.ID, line.ID
		if w.Attachments == nil {
			w.Attachments = []Attachment{}
		}
		sameJSON(t, fmt.Sprintf("message %d", want), m, w)
		if _, _, _, ok := parseHistoryID([]byte(m.ID)); !ok || !ValidID(m.ID, "msg_") {
			t.Fatalf("message %d has ID %s: not a history ID", want, m.ID)
		}
		byID, err := db.MessageByID(ctx, m.ID)
		if err != nil {
			t.Fatal(err)
		}
		sameJSON(t, "MessageByID", byID, m)
		byGUID, err := db.MessageByGUID(ctx, m.GUID)
		if err != nil {
			t.Fatal(err)
		}
		sameJSON(t, "MessageByGUID", byGUID, m)
	}
	if g := listAll(t, db, storedGroup.ID, 50); len(g) != 1 || g[0].Sender != "+15551110002" || *g[0].Text != "in the group ✓" {
		t.Fatalf("the group's message: %+v", g)
	}
	err = db.bolt.View(func(tx *bolt.Tx) error {
		if n := tx.Bucket(bktMessages).Stats().KeyN; n != 1 {
			t.Errorf("messages index holds %d IDs, want the live one only", n)
		}
		v := tx.Bucket(bktChatMessages).Get(messageKey(tx, []byte(got[4].ID)))
		if v[0] != compactFormat || len(v) > 30 {
			t.Errorf("a short history message is stored in %d bytes: %q", len(v), v)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	// An edit and a reaction on a history message: it stays compact, its
	// ID the same.
	first := got[4]
	edited, events, err := db.UpdateMessage(ctx, line.ID, MessageUpdate{GUID: first.GUID, Text: ptr("hello, edited"), EditedAt: 7000})
	if err != nil || len(events) != 1 || edited.ID != first.ID || *edited.Text != "hello, edited" || edited.EditedAt != 7000 {
		t.Fatalf("edit: %+v %v %v", edited, events, err)
	}
	if _, _, err := db.ApplyReaction(ctx, Reaction{MessageID: first.ID, ChatID: stored.ID, Sender: "+15551110001", Type: "love", Added: true, SentAt: 8000}); err != nil {
		t.Fatalf("a reaction on a history message: %v", err)
	}
	if _, _, err := db.ApplyReaction(ctx, Reaction{MessageID: "msg_" + first.ID[4:10] + "zzzzzzzzzzzzzzzzzzzz", ChatID: stored.ID, Sender: "+1", Type: "love", Added: true, SentAt: 8000}); err == nil {
		t.Fatal("a reaction on a message that does not exist was taken")
	}
	db.Close()
	if db, err = Open(dir); err != nil {
		t.Fatal(err)
	}
	again := listAll(t, db, stored.ID, 50)
	got[4] = edited
	sameJSON(t, "after a reopen", again, got)
}

// A database written by schema 1 (testdata/v1: made by the build before
// compact history, with cmd genv1 as in its README) reads as it did: the
// same chats, messages, IDs and order. History imported after the upgrade
// is compact and falls in order among the old messages; the old ones keep
// their IDs and are found by ID and GUID.
func TestSchema1Upgrade(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	copyTestFile(t, filepath.Join("testdata", "v1", "db.bolt"), filepath.Join(dir, "db.bolt"))
	var want struct {
		Chats    []Chat               `json:"chats"`
		Messages map[string][]Message `json:"messages"`
	}
	data, err := os.ReadFile(filepath.Join("testdata", "v1", "lists.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &want); err != nil {
		t.Fatal(err)
	}
	db, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { db.Close() }()
	lines, err := db.SyncLines(ctx, []Line{{ID: NewID("ln_"), Handle: "+15550000009", Service: "imessage", Bridge: "messages"}})
	if err != nil {
		t.Fatal(err)
	}
	line := lines[0]
	if line.ID != want.Chats[0].LineID {
		t.Fatalf("line %s, want the stored %s", line.ID, want.Chats[0].LineID)
	}
	check := func(what string) {
		t.Helper()
		chats, _, err := db.ListChats(ctx, line.ID, nil, 100)
		if err != nil {
			t.Fatal(err)
		}
		sameJSON(t, what+": chats", chats, want.Chats)
		for _, c := range want.Chats {
			sameJSON(t, what+": messages of "+c.ID, listAll(t, db, c.ID, 7), want.Messages[c.ID])
			for _, m := range want.Messages[c.ID] {
				byID, err := db.MessageByID(ctx, m.ID)
				if err != nil {
					t.Fatalf("%s: MessageByID(%s): %v", what, m.ID, err)
				}
				sameJSON(t, what+": by ID", byID, m)
				byGUID, err := db.MessageByGUID(ctx, m.GUID)
				if err != nil {
					t.Fatalf("%s: MessageByGUID(%s): %v", what, m.GUID, err)
				}
				sameJSON(t, what+": by GUID", byGUID, m)
			}
		}
	}
	check("opened")
	var version uint64
	db.bolt.View(func(tx *bolt.Tx) error {
		version = u64Of(tx.Bucket(bktMeta).Get([]byte("version")))
		return nil
	})
	if version != schemaVersion {
		t.Fatalf("schema version %d after the upgrade, want %d", version, schemaVersion)
	}

	// Importing the old history again stores nothing; new history lands
	// among it, in date order.
	dm := want.Chats[0]
	if dm.IsGroup {
		dm = want.Chats[1]
	}
	var again []Inbound
	for _, m := range want.Messages[dm.ID] {
		m.ID = NewID("msg_")
		again = append(again, Inbound{Chat: dm, Message: m})
	}
	old := want.Messages[dm.ID]
	mid := old[len(old)/2]
	fresh := Message{ID: NewID("msg_"), GUID: "FEEDFACE-0000-4000-8000-000000000001", Sender: dm.Identifier, Text: ptr("imported after the upgrade"),
		Service: "imessage", SentAt: mid.SentAt, SyncedAt: mid.SyncedAt + 1}
	again = append(again, Inbound{Chat: dm, Message: fresh})
	if _, err := db.ImportHistory(ctx, line.ID, again); err != nil {
		t.Fatal(err)
	}
	if err := db.SettleHistory(ctx); err != nil {
		t.Fatal(err)
	}
	got := listAll(t, db, dm.ID, 5)
	if len(got) != len(old)+1 {
		t.Fatalf("%d messages after importing again, want %d", len(got), len(old)+1)
	}
	i := slices.IndexFunc(got, func(m Message) bool { return m.GUID == fresh.GUID })
	if i < 0 || i == 0 || got[i-1].SentAt < fresh.SentAt || i+1 < len(got) && got[i+1].SentAt > fresh.SentAt {
		t.Fatalf("the new message is at %d of %d, out of date order", i, len(got))
	}
	sameJSON(t, "the old messages around the new one", slices.Delete(slices.Clone(got), i, i+1), old)
	db.Close()
	if db, err = Open(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := db.SyncLines(ctx, []Line{line}); err != nil {
		t.Fatal(err)
	}
	sameJSON(t, "after a reopen", listAll(t, db, dm.ID, 50), got)
}

func u64Of(b []byte) uint64 {
	var v uint64
	for _, c := range b {
		v = v<<8 | uint64(c)
	}
	return v
}

func copyTestFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// History IDs say their date, chat number and sequence; a random ID is
// not taken for one unless it carries the mark.
func TestHistoryID(t *testing.T) {
	for _, tc := range []struct {
		at  int64
		num uint32
		seq uint64
	}{{0, 1, 1}, {1_732_945_936_630, 2000, 1_000_000}, {maxHistoryTime, maxHistoryChats, maxHistorySeq}} {
		id := historyID(tc.at, tc.num, tc.seq)
		if !ValidID(id, "msg_") {
			t.Fatalf("%s is not a valid ID", id)
		}
		at, num, seq, ok := parseHistoryID([]byte(id))
		if !ok || at != tc.at || num != tc.num || seq != tc.seq {
			t.Fatalf("parse(%s) = %d %d %d %v, want %+v", id, at, num, seq, ok, tc)
		}
		if got := idFromValue(idValue([]byte(id))); string(got) != id {
			t.Fatalf("index value of %s reads back as %s", id, got)
		}
	}
	marked := 0
	for range 10_000 {
		if _, _, _, ok := parseHistoryID([]byte(NewID("msg_"))); ok {
			marked++
		}
	}
	if marked > 100 { // 1 in 256 expected
		t.Fatalf("%d of 10000 random IDs look like history IDs", marked)
	}
	for _, g := range []string{"11111111-2222-4333-8444-555555555555", "ABCDEF01-0000-4000-8000-000000000001"} {
		b, ok := uuidBytes(g)
		if !ok || uuidString(b[:]) != g {
			t.Fatalf("uuid %s: %v %s", g, ok, uuidString(b[:]))
		}
	}
	for _, g := range []string{"abcdef01-0000-4000-8000-000000000001", "p:0/ABCDEF01-0000-4000-8000-000000000001", "", "ABCDEF01-0000-4000-8000-00000000000G"} {
		if _, ok := uuidBytes(g); ok {
			t.Fatalf("%q taken for a canonical UUID", g)
		}
	}
}

// An import comes back to the same chats batch after batch and keeps them
// from one to the next (importChat); a chat another writer changed in
// between is read again, so that neither change is lost.
func TestImportKeepsOthersChanges(t *testing.T) {
	ctx := context.Background()
	db, line := openMessagesLine(t)
	dm := Chat{ID: NewID("cht_"), LineID: line.ID, GUID: "iMessage;-;+15551110001", Identifier: "+15551110001", Service: "imessage"}
	quiet := Chat{ID: NewID("cht_"), LineID: line.ID, GUID: "iMessage;-;+15551110002", Identifier: "+15551110002", Service: "imessage"}
	n := 0
	batch := func(sentAt ...int64) []Inbound {
		var in []Inbound
		for _, at := range sentAt {
			for _, c := range []Chat{dm, quiet} {
				n++
				in = append(in, Inbound{Chat: c, Message: Message{GUID: fmt.Sprintf("00000000-0000-4000-8000-%012d", n),
					Sender: c.Identifier, Text: ptr("old"), Service: "imessage", SentAt: at, SyncedAt: at}})
			}
		}
		return in
	}
	if _, err := db.ImportHistory(ctx, line.ID, batch(1000, 2000)); err != nil {
		t.Fatal(err)
	}
	// Between two batches, a live message in dm only.
	if _, err := db.RecordInbound(ctx, Inbound{Chat: dm, Message: Message{ID: NewID("msg_"), GUID: "33333333-2222-4333-8444-555555555555",
		Sender: dm.Identifier, Text: ptr("live"), Service: "imessage", SentAt: 9000, SyncedAt: 9000}}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ImportHistory(ctx, line.ID, batch(3000)); err != nil {
		t.Fatal(err)
	}
	for _, want := range []struct {
		chat           Chat
		last           int64
		unread, listed int
	}{{dm, 9000, 4, 4}, {quiet, 3000, 3, 3}} {
		got, err := db.ChatByGUID(ctx, line.ID, want.chat.GUID)
		if err != nil {
			t.Fatal(err)
		}
		if got.LastMessageAt != want.last || got.UnreadCount != want.unread {
			t.Errorf("%s: last message at %d, %d unread; want %d and %d", want.chat.Identifier, got.LastMessageAt, got.UnreadCount, want.last, want.unread)
		}
		if l := listAll(t, db, got.ID, 10); len(l) != want.listed {
			t.Errorf("%s: %d messages listed, want %d", want.chat.Identifier, len(l), want.listed)
		}
	}
}

// Pages streamed into an import are stored in transactions of whole pages
// (importTxSize messages at least): a GUID repeated within a transaction
// or across two is stored once, and an error of the pages ends the import
// with what the transactions before it committed.
func TestImportHistoryPages(t *testing.T) {
	ctx := context.Background()
	db, line := openMessagesLine(t)
	const pageSize = 2000
	pageOf := func(chat string, p int) []Inbound {
		c := Chat{ID: NewID("cht_"), LineID: line.ID, GUID: "iMessage;-;" + chat, Identifier: chat, Service: "imessage"}
		page := make([]Inbound, pageSize)
		for i := range page {
			n := p*pageSize + i
			page[i] = Inbound{Chat: c, Message: Message{GUID: fmt.Sprintf("00000000-0000-4000-8000-%012d", n),
				Sender: chat, Text: ptr("old"), Service: "imessage", SentAt: int64(1000 + n), SyncedAt: 1}}
		}
		return page
	}
	count := func(chat string) int {
		c, err := db.ChatByGUID(ctx, line.ID, "iMessage;-;"+chat)
		if errors.Is(err, ErrNotFound) {
			return 0
		}
		if err != nil {
			t.Fatal(err)
		}
		return len(listAll(t, db, c.ID, 5000))
	}

	// Two transactions; page 4 repeats a message of page 1 (the same
	// transaction), the last page one of page 0 (the first transaction).
	txPages := importTxSize / pageSize
	if txPages < 5 || importTxSize%pageSize != 0 {
		t.Fatalf("importTxSize is %d: make the pages below fit it", importTxSize)
	}
	pages := txPages + 3
	_, err := db.ImportHistoryPages(ctx, line.ID, func(yield func([]Inbound, error) bool) {
		for p := range pages {
			page := pageOf("+15551110001", p)
			switch p {
			case 4:
				page[7].Message.GUID = pageOf("+15551110001", 1)[3].Message.GUID
			case pages - 1:
				page[9].Message.GUID = pageOf("+15551110001", 0)[5].Message.GUID
			}
			if !yield(page, nil) {
				return
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := count("+15551110001"), pages*pageSize-2; got != want {
		t.Errorf("stored %d messages, want %d", got, want)
	}

	// An error after a transaction and a page: the first transaction's
	// pages stay, the page taken by the second does not.
	broken := errors.New("chat.db went away")
	_, err = db.ImportHistoryPages(ctx, line.ID, func(yield func([]Inbound, error) bool) {
		for p := range txPages + 1 {
			if !yield(pageOf("+15551110002", 100+p), nil) {
				return
			}
		}
		yield(nil, broken)
	})
	if !errors.Is(err, broken) {
		t.Fatalf("import ended with %v, want %v", err, broken)
	}
	if got, want := count("+15551110002"), importTxSize; got != want {
		t.Errorf("after the error: %d messages stored, want %d", got, want)
	}
}

// Importing says an import is in progress while its pages are read, and
// its channel is closed when it ends, error or not: the search index waits
// on it.
func TestImporting(t *testing.T) {
	ctx := context.Background()
	db, line := openMessagesLine(t)
	if busy, _ := db.Importing(); busy {
		t.Fatal("importing before any import")
	}
	reading, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := db.ImportHistoryPages(ctx, line.ID, func(yield func([]Inbound, error) bool) {
			close(reading)
			<-release
			yield(nil, errors.New("chat.db went away"))
		})
		done <- err
	}()
	<-reading
	busy, ended := db.Importing()
	if !busy {
		t.Fatal("not importing while the pages are read")
	}
	select {
	case <-ended:
		t.Fatal("the end told before the import ended")
	default:
	}
	close(release)
	<-ended
	if err := <-done; err == nil {
		t.Fatal("the import's error was lost")
	}
	if busy, _ := db.Importing(); busy {
		t.Fatal("importing after the import ended")
	}
}

// An import matching twins (an iCloud replay) stores a message that has
// none, takes the twin's GUID for one that has, and makes the ID of a
// chat it is the first to name.
func TestImportMatchesTwins(t *testing.T) {
	ctx := context.Background()
	db, line := openMessagesLine(t)
	dm := Chat{ID: NewID("cht_"), LineID: line.ID, GUID: "iMessage;-;+15551110001", Identifier: "+15551110001", Service: "imessage"}
	stored := Inbound{Chat: dm, Message: Message{GUID: "00000000-0000-4000-8000-000000000001",
		Sender: dm.Identifier, Text: ptr("see you at six"), Service: "imessage", SentAt: 10_000, SyncedAt: 10_000}}
	if _, err := db.ImportHistory(ctx, line.ID, []Inbound{stored}); err != nil {
		t.Fatal(err)
	}
	fresh := Chat{LineID: line.ID, GUID: "iMessage;-;+15551110002", Identifier: "+15551110002", Service: "imessage"}
	replay := []Inbound{
		{Chat: dm, MatchTwins: true, Message: Message{GUID: "00000000-0000-4000-8000-000000000002",
			Sender: dm.Identifier, Text: ptr("see you at six"), Service: "imessage", SentAt: 10_400, SyncedAt: 20_000}},
		{Chat: dm, MatchTwins: true, Message: Message{GUID: "00000000-0000-4000-8000-000000000003",
			Sender: dm.Identifier, Text: ptr("running late"), Service: "imessage", SentAt: 10_500, SyncedAt: 20_000}},
		{Chat: fresh, MatchTwins: true, Message: Message{GUID: "00000000-0000-4000-8000-000000000004",
			Sender: fresh.Identifier, Text: ptr("hi"), Service: "imessage", SentAt: 10_600, SyncedAt: 20_000}},
	}
	twins, err := db.ImportHistory(ctx, line.ID, replay)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{replay[0].Message.GUID}; !slices.Equal(twins, want) {
		t.Errorf("twins %v, want %v", twins, want)
	}
	if l := listAll(t, db, dm.ID, 10); len(l) != 2 || *l[0].Text != "running late" || *l[1].Text != "see you at six" { // newest first
		t.Errorf("dm holds %d messages, want the stored one and the one without a twin", len(l))
	}
	c, err := db.ChatByGUID(ctx, line.ID, fresh.GUID)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(c.ID, "cht_") || len(listAll(t, db, c.ID, 10)) != 1 {
		t.Errorf("the new chat is %q with %d messages, want a cht_ ID and 1", c.ID, len(listAll(t, db, c.ID, 10)))
	}
	twin, err := db.MessageByGUID(ctx, replay[0].Message.GUID)
	if err != nil || twin.GUID != stored.Message.GUID {
		t.Errorf("the twin's GUID finds %+v (%v), want the stored message", twin, err)
	}
}
