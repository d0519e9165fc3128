package storage

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// BenchmarkListHistory pages through one chat whose 1,000,000 messages
// were imported as history (BLUELINE_BENCH_ROWS changes the count): the
// newest page of 50, and the oldest, at the end of a walk, whose cursor it
// takes from the bucket. It reports ms per page for each, and the
// database's size per message.
func BenchmarkListHistory(b *testing.B) {
	n := 1_000_000
	if v := os.Getenv("BLUELINE_BENCH_ROWS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 100 {
			b.Fatalf("BLUELINE_BENCH_ROWS=%q: want an integer of at least 100", v)
		}
	}
	ctx := context.Background()
	dir := b.TempDir()
	db, err := Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	lines, err := db.SyncLines(ctx, []Line{{Handle: "+15550000001", Service: "imessage", Bridge: "messages"}})
	if err != nil {
		b.Fatal(err)
	}
	line := lines[0]
	chat := Chat{ID: NewID("cht_"), LineID: line.ID, GUID: "iMessage;-;+15551110001", Identifier: "+15551110001", Service: "imessage"}
	start := time.Now()
	t0 := time.Now().Add(-time.Duration(n) * time.Minute).UnixMilli()
	for from := 0; from < n; from += 5000 {
		batch := make([]Inbound, 0, 5000)
		for i := from; i < min(from+5000, n); i++ {
			text := fmt.Sprintf("message %d, see you soon", i)
			sender := chat.Identifier
			if i%3 == 0 {
				sender = line.Handle
			}
			batch = append(batch, Inbound{Chat: chat, Message: Message{
				GUID: fmt.Sprintf("%08X-0000-4000-8000-%012X", i, i), Sender: sender, IsFromMe: sender == line.Handle,
				Text: &text, Service: "imessage", SentAt: t0 + int64(i)*60_000, SyncedAt: time.Now().UnixMilli()}})
		}
		if _, err := db.ImportHistory(ctx, line.ID, batch); err != nil {
			b.Fatal(err)
		}
	}
	if err := db.SettleHistory(ctx); err != nil {
		b.Fatal(err)
	}
	b.Logf("%d messages imported in %s", n, time.Since(start).Round(time.Millisecond))
	stored, err := db.ChatByGUID(ctx, line.ID, chat.GUID)
	if err != nil {
		b.Fatal(err)
	}
	// The cursor of the oldest page: the 51st oldest message's place.
	var last []byte
	db.bolt.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bktChatMessages).Cursor()
		k, _ := c.Seek([]byte(stored.ID))
		for range 50 {
			k, _ = c.Next()
		}
		last = append([]byte(nil), k[len(stored.ID):]...)
		return nil
	})
	fi, err := os.Stat(db.Path())
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		after []byte
	}{{"newest", nil}, {"oldest", last}} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				page, next, err := db.ListMessages(ctx, stored.ID, tc.after, 50)
				if err != nil || len(page) != 50 || (tc.after != nil) != (next == nil) {
					b.Fatalf("page of %d, next %x, %v", len(page), next, err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/page")
			b.ReportMetric(float64(fi.Size())/float64(n), "file-bytes/msg")
		})
	}
}
