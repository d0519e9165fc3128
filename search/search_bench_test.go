package search_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/blueline-app/blueline/search"
	"github.com/blueline-app/blueline/storage"
)

// words are what the benchmark's messages are made of: a few common, many
// rare.
var words = []string{"hello", "tomorrow", "dinner", "thanks", "see", "you", "soon", "order", "shipped", "meeting", "call", "later",
	"photo", "address", "invoice", "ticket", "train", "delayed", "birthday", "party", "coffee", "weekend", "plans", "sure"}

// BenchmarkSearch builds the index of 100,000 messages in 200 chats
// imported as history (BLUELINE_BENCH_ROWS changes the count), reporting
// how long the build took and the index's size per message (logged), then times a
// search of a rare word, of two common words, and of a prefix, in the
// line (a page of 20).
func BenchmarkSearch(b *testing.B) {
	n := 100_000
	if v := os.Getenv("BLUELINE_BENCH_ROWS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1000 {
			b.Fatalf("BLUELINE_BENCH_ROWS=%q: want an integer of at least 1000", v)
		}
	}
	f := newFixture(b, b.TempDir())
	t0 := time.Now().Add(-time.Duration(n) * time.Minute).UnixMilli()
	for from := 0; from < n; from += 5000 {
		batch := make([]storage.Inbound, 0, 5000)
		for i := from; i < min(from+5000, n); i++ {
			contact := fmt.Sprintf("+1555222%04d", i%200)
			text := fmt.Sprintf("%s %s %s message %d", words[i%len(words)], words[(i/7)%len(words)], words[(i/31)%len(words)], i)
			chat := storage.Chat{ID: storage.NewID("cht_"), LineID: f.line.ID, GUID: "iMessage;-;" + contact, Identifier: contact, Service: "imessage"}
			batch = append(batch, storage.Inbound{Chat: chat, Message: storage.Message{GUID: fmt.Sprintf("BENCH-%d", i), Sender: contact,
				Text: &text, Service: "imessage", SentAt: t0 + int64(i)*60_000, SyncedAt: time.Now().UnixMilli()}})
		}
		if _, err := f.db.ImportHistory(b.Context(), f.line.ID, batch); err != nil {
			b.Fatal(err)
		}
	}
	if err := f.db.SettleHistory(b.Context()); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	ix, _ := f.index()
	took := time.Since(start)
	var size int64
	for _, name := range []string{"search.db", "search.db-wal"} {
		if fi, err := os.Stat(filepath.Join(f.dir, name)); err == nil {
			size += fi.Size()
		}
	}
	b.Logf("%d messages indexed in %s (%.0f/s); the index (with its log) is %d bytes a message", n, took.Round(time.Millisecond),
		float64(n)/took.Seconds(), size/int64(n))
	for _, q := range []struct{ name, text string }{{"rare", "message 4242"}, {"common", "hello dinner"}, {"prefix", "birth*"}} {
		b.Run(q.name, func(b *testing.B) {
			for b.Loop() {
				hits, _, err := ix.Search(b.Context(), search.Query{LineID: f.line.ID, Text: q.text, Limit: 20})
				if err != nil || len(hits) == 0 {
					b.Fatalf("%q: %d hits, %v", q.text, len(hits), err)
				}
			}
		})
	}
}
