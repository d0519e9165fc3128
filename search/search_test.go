package search_test

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/blueline-app/blueline/search"
	"github.com/blueline-app/blueline/storage"
	"github.com/blueline-app/blueline/testkit"
)

const (
	lineHandle = "+15550000001"
	alice      = "+15551110001"
)

type fixture struct {
	t    testing.TB
	dir  string
	db   *storage.DB
	line storage.Line
	chat storage.Chat
	n    int
}

func newFixture(t testing.TB, dir string) *fixture {
	t.Helper()
	db, err := storage.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	lines, err := db.SyncLines(t.Context(), []storage.Line{{Handle: lineHandle, Service: "imessage", Bridge: "sim"}})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, dir: dir, db: db, line: lines[0]}
	f.chat = storage.Chat{ID: storage.NewID("cht_"), LineID: f.line.ID, GUID: "iMessage;-;" + alice, Identifier: alice, Service: "imessage"}
	return f
}

// inbound records a live message from alice.
func (f *fixture) inbound(text string) storage.Message {
	f.t.Helper()
	f.n++
	res, err := f.db.RecordInbound(f.t.Context(), storage.Inbound{Chat: f.chat, Message: storage.Message{ID: storage.NewID("msg_"),
		GUID: fmt.Sprintf("GUID-%d-%d", time.Now().UnixNano(), f.n), Sender: alice, Text: &text, Service: "imessage",
		SentAt: time.Now().UnixMilli() + int64(f.n), SyncedAt: time.Now().UnixMilli()}})
	if err != nil {
		f.t.Fatal(err)
	}
	f.chat.ID = res.Chat.ID
	return res.Message
}

// index opens the index of the fixture's folder and runs it until the
// test ends or stop is called.
func (f *fixture) index() (ix *search.Index, stop func()) {
	f.t.Helper()
	ix, err := search.Open(f.t.Context(), filepath.Join(f.dir, "search.db"), f.db, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		f.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { ix.Run(ctx); close(done) }()
	var once bool
	stop = func() {
		if !once {
			once = true
			cancel()
			<-done
			ix.Close()
		}
	}
	f.t.Cleanup(stop)
	select {
	case <-ix.Caught():
	case <-time.After(30 * time.Second):
		f.t.Fatal("the index did not catch up")
	}
	return ix, stop
}

func (f *fixture) find(ix *search.Index, text string) []string {
	f.t.Helper()
	hits, _, err := ix.Search(f.t.Context(), search.Query{LineID: f.line.ID, Text: text, Limit: 100})
	if err != nil {
		f.t.Fatal(err)
	}
	var ids []string
	for _, h := range hits {
		ids = append(ids, h.MessageID)
	}
	return ids
}

// TestFollowsStorage: what is stored is found, an edit replaces what a
// message is found by, an unsend removes it, and the feed is trimmed once
// applied.
func TestFollowsStorage(t *testing.T) {
	f := newFixture(t, t.TempDir())
	before := f.inbound("Is the café open on Sunday?")
	ix, _ := f.index()
	if got := f.find(ix, "cafe sunday"); !slices.Equal(got, []string{before.ID}) {
		t.Fatalf("café, case and accents folded: %v", got)
	}
	live := f.inbound("the blue bicycle is ready")
	testkit.Eventually(t, 10*time.Second, func() bool { return slices.Equal(f.find(ix, "bicycle"), []string{live.ID}) })

	edit := "the red bicycle is ready"
	if _, _, err := f.db.UpdateMessage(t.Context(), f.line.ID, storage.MessageUpdate{GUID: live.GUID, Text: &edit, EditedAt: time.Now().UnixMilli()}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, func() bool { return len(f.find(ix, "blue")) == 0 && len(f.find(ix, "red")) == 1 })
	if _, _, err := f.db.UpdateMessage(t.Context(), f.line.ID, storage.MessageUpdate{GUID: live.GUID, UnsentAt: time.Now().UnixMilli()}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, func() bool { return len(f.find(ix, "bicycle")) == 0 })
	testkit.Eventually(t, 10*time.Second, func() bool {
		left, err := f.db.MessageChanges(t.Context(), 0, 10)
		return err == nil && len(left) == 0
	})
	// Another line's search finds nothing of this one.
	if hits, _, err := ix.Search(t.Context(), search.Query{LineID: "ln_other", Text: "cafe", Limit: 10}); err != nil || len(hits) != 0 {
		t.Errorf("another line: %v %v", hits, err)
	}
}

// TestCatchesUp: messages stored while the index is closed (a crash, a
// stop) are found once it runs again; history imported before an index
// existed is scanned into it, and history imported while it runs is
// followed.
func TestCatchesUp(t *testing.T) {
	f := newFixture(t, t.TempDir())
	text := "an old message about lanterns"
	if _, err := f.db.ImportHistory(t.Context(), f.line.ID, []storage.Inbound{{Chat: f.chat, Message: storage.Message{
		GUID: "HISTORY-1", Sender: alice, Text: &text, Service: "imessage", SentAt: 1_600_000_000_000, SyncedAt: time.Now().UnixMilli()}}}); err != nil {
		t.Fatal(err)
	}
	ix, stop := f.index()
	if got := f.find(ix, "lanterns"); len(got) != 1 {
		t.Fatalf("history: %v", got)
	}
	// History imported while it runs comes through the feed, a chat's
	// messages in one entry.
	var batch []storage.Inbound
	for i, who := range []string{alice, "+15551110002", alice} {
		text := fmt.Sprintf("imported kayak %d", i)
		chat := storage.Chat{ID: storage.NewID("cht_"), LineID: f.line.ID, GUID: "iMessage;-;" + who, Identifier: who, Service: "imessage"}
		batch = append(batch, storage.Inbound{Chat: chat, Message: storage.Message{GUID: fmt.Sprintf("HISTORY-KAYAK-%d", i), Sender: who,
			Text: &text, Service: "imessage", SentAt: 1_600_000_000_000 + int64(i), SyncedAt: time.Now().UnixMilli()}})
	}
	if _, err := f.db.ImportHistory(t.Context(), f.line.ID, batch); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, func() bool { return len(f.find(ix, "kayak")) == 3 })
	stop()
	missed := f.inbound("written while the index was down: umbrellas")
	ix, _ = f.index()
	if got := f.find(ix, "umbrellas"); !slices.Equal(got, []string{missed.ID}) {
		t.Fatalf("after a restart: %v", got)
	}
}

// TestOtherDatabase: an index that has seen more of the feed than the
// database ever held (a backup put back) is built again from it.
func TestOtherDatabase(t *testing.T) {
	dir := t.TempDir()
	f := newFixture(t, dir)
	for i := range 3 {
		f.inbound("first database " + strconv.Itoa(i))
	}
	_, stop := f.index()
	stop()
	f.db.Close()
	for _, name := range []string{"db.bolt", "db.bolt-lock"} {
		os.Remove(filepath.Join(dir, name))
	}
	g := newFixture(t, dir) // a new database, the same index file
	kept := g.inbound("second database")
	ix, _ := g.index()
	if got := g.find(ix, "database"); !slices.Equal(got, []string{kept.ID}) {
		t.Errorf("after the database changed: %v", got)
	}
}

// TestQueries: what a person types is words, never FTS5 syntax; pages
// go on from a cursor; a query without words is refused.
func TestQueries(t *testing.T) {
	f := newFixture(t, t.TempDir())
	var ids []string
	for i := range 5 {
		ids = append(ids, f.inbound(fmt.Sprintf("order %d shipped", i)).ID)
	}
	ids = append(ids, f.inbound(`he said "NEAR(order shipped)" AND OR -`).ID)
	ix, _ := f.index()
	for _, q := range []string{`"NEAR(`, `order AND`, `ship*`, `-order`, `order:`, `"order`} {
		if _, _, err := ix.Search(t.Context(), search.Query{LineID: f.line.ID, Text: q, Limit: 10}); err != nil {
			t.Errorf("%q: %v", q, err)
		}
	}
	if got := f.find(ix, "ship*"); len(got) != 6 {
		t.Errorf("prefix: %v", got)
	}
	if _, _, err := ix.Search(t.Context(), search.Query{LineID: f.line.ID, Text: ` ** " `, Limit: 10}); err != search.ErrNoWords {
		t.Errorf("no words: %v", err)
	}
	var got []string
	q := search.Query{LineID: f.line.ID, ChatID: f.chat.ID, Text: "shipped order", Limit: 2}
	for {
		hits, more, err := ix.Search(t.Context(), q)
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range hits {
			got = append(got, h.MessageID)
		}
		if !more {
			break
		}
		q.Before = hits[len(hits)-1].Cursor
	}
	slices.Reverse(ids)
	if !slices.Equal(got, ids) {
		t.Errorf("pages %v, want most recent first %v", got, ids)
	}
	if _, _, err := ix.Search(t.Context(), search.Query{LineID: f.line.ID, Text: "order", Limit: 2, Before: "x"}); err != search.ErrBadCursor {
		t.Errorf("a bad cursor: %v", err)
	}
}

// countingSource is the store, with the messages its feed hands the index
// counted.
type countingSource struct {
	*storage.DB
	fed atomic.Int64
}

func (s *countingSource) MessageChanges(ctx context.Context, after uint64, max int) ([]storage.MessageChange, error) {
	changes, err := s.DB.MessageChanges(ctx, after, max)
	s.fed.Add(int64(len(changes)))
	return changes, err
}

// TestFirstStartIndexedOnce: on a first start the index is made before the
// history import, which it waits for. Its scan then reads every message,
// and the feed, which holds the imported messages too, does not hand them
// over again; what is stored after comes through the feed.
func TestFirstStartIndexedOnce(t *testing.T) {
	f := newFixture(t, t.TempDir())
	page := func(from, to int) []storage.Inbound {
		var msgs []storage.Inbound
		for i := from; i < to; i++ {
			text := fmt.Sprintf("history lighthouse %d", i)
			msgs = append(msgs, storage.Inbound{Chat: f.chat, Message: storage.Message{GUID: fmt.Sprintf("HISTORY-%d", i), Sender: alice,
				Text: &text, Service: "imessage", SentAt: 1_600_000_000_000 + int64(i), SyncedAt: time.Now().UnixMilli()}})
		}
		return msgs
	}
	release, imported := make(chan struct{}), make(chan error, 1)
	go func() {
		_, err := f.db.ImportHistoryPages(t.Context(), f.line.ID, func(yield func([]storage.Inbound, error) bool) {
			if yield(page(0, 30), nil) {
				<-release
				yield(page(30, 60), nil)
			}
		})
		imported <- err
	}()
	testkit.Eventually(t, 10*time.Second, func() bool { busy, _ := f.db.Importing(); return busy })

	path := filepath.Join(f.dir, "search.db")
	src := &countingSource{DB: f.db}
	ix, err := search.Open(t.Context(), path, src, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { ix.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done; ix.Close() })
	// The index has noted where the feed was, and waits for the import.
	peek, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer peek.Close()
	testkit.Eventually(t, 10*time.Second, func() bool {
		var n int
		return peek.QueryRow(`SELECT COUNT(*) FROM meta WHERE k = 'cursor'`).Scan(&n) == nil && n == 1
	})
	close(release)
	if err := <-imported; err != nil {
		t.Fatal(err)
	}
	select {
	case <-ix.Caught():
	case <-time.After(30 * time.Second):
		t.Fatal("the index did not catch up")
	}
	if got := f.find(ix, "lighthouse"); len(got) != 60 {
		t.Fatalf("found %d of the 60 imported messages", len(got))
	}
	if n := src.fed.Load(); n != 0 {
		t.Errorf("the feed handed over %d messages the scan had read", n)
	}
	live := f.inbound("a live lighthouse")
	testkit.Eventually(t, 10*time.Second, func() bool { return slices.Contains(f.find(ix, "live"), live.ID) })
	if n := src.fed.Load(); n != 1 {
		t.Errorf("the feed handed over %d messages, want the live one", n)
	}
}

// TestOldLayoutRebuilt: an index of the first layout (message IDs as text,
// an index by chat) is dropped and built again from the store.
func TestOldLayoutRebuilt(t *testing.T) {
	f := newFixture(t, t.TempDir())
	kept := f.inbound("stored before the upgrade: marmalade")
	path := filepath.Join(f.dir, "search.db")
	old, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`CREATE TABLE meta (k TEXT PRIMARY KEY, v BLOB NOT NULL)`,
		`CREATE TABLE msgs (id INTEGER PRIMARY KEY, msg_id TEXT NOT NULL UNIQUE, line_id TEXT NOT NULL, chat_id TEXT NOT NULL, sent_at INTEGER NOT NULL)`,
		`CREATE INDEX msgs_chat ON msgs (chat_id, sent_at)`,
		`CREATE VIRTUAL TABLE fts USING fts5(body, content = '', contentless_delete = 1, tokenize = 'unicode61 remove_diacritics 2')`,
		`INSERT INTO meta VALUES ('cursor', '1'), ('scanned', '1')`,
		`INSERT INTO msgs VALUES (1, 'msg_gone', 'lin_x', 'cht_x', 1)`,
		`INSERT INTO fts (rowid, body) VALUES (1, 'marmalade from a stale index')`,
	} {
		if _, err := old.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	old.Close()
	ix, _ := f.index()
	if got := f.find(ix, "marmalade"); !slices.Equal(got, []string{kept.ID}) {
		t.Fatalf("after the upgrade: %v, want %s", got, kept.ID)
	}
	peek, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer peek.Close()
	var version, lineCols int
	if err := peek.QueryRow(`PRAGMA user_version`).Scan(&version); err != nil {
		t.Fatal(err)
	}
	if err := peek.QueryRow(`SELECT COUNT(*) FROM pragma_table_info('msgs') WHERE name = 'line_id'`).Scan(&lineCols); err != nil {
		t.Fatal(err)
	}
	if version != 2 || lineCols != 0 {
		t.Errorf("layout %d with %d line_id columns, want 2 and none", version, lineCols)
	}
}

// TestNothingToFindBy: a message with no words (a file alone) is not
// indexed, and does not hold up the messages after it.
func TestNothingToFindBy(t *testing.T) {
	f := newFixture(t, t.TempDir())
	ix, _ := f.index()
	res, err := f.db.RecordInbound(t.Context(), storage.Inbound{Chat: f.chat, Message: storage.Message{ID: storage.NewID("msg_"),
		GUID: "GUID-FILE-ALONE", Sender: alice, Service: "imessage", Attachments: []storage.Attachment{{Filename: "IMG_0001.heic", MimeType: "image/heic", Size: 1024}},
		SentAt: time.Now().UnixMilli(), SyncedAt: time.Now().UnixMilli()}})
	if err != nil {
		t.Fatal(err)
	}
	f.chat.ID = res.Chat.ID
	after := f.inbound("the photo above is of the harbour")
	testkit.Eventually(t, 10*time.Second, func() bool { return slices.Equal(f.find(ix, "harbour"), []string{after.ID}) })
}
