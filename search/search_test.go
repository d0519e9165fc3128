package search_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
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
