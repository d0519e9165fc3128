package storage

import (
	"context"
	"errors"
	"fmt"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// A history import's GUIDs go through the journal: found at once, never
// stored twice, and moved into the index by SettleHistory or at the next
// open, over several merge transactions when the journal is large.
func TestHistoryGUIDJournal(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { db.Close() }()
	lines, err := db.SyncLines(ctx, []Line{{Handle: "+15550000001", Service: "imessage", Bridge: "sim"}})
	if err != nil {
		t.Fatal(err)
	}
	line := lines[0]
	history := func(from, n int) []Inbound {
		msgs := make([]Inbound, n)
		for i := range msgs {
			who := fmt.Sprintf("+1555111%04d", (from+i)%3)
			text := fmt.Sprint("history ", from+i)
			msgs[i] = Inbound{
				Chat:    Chat{ID: NewID("cht_"), LineID: line.ID, GUID: "iMessage;-;" + who, Identifier: who, Service: "imessage"},
				Message: Message{ID: NewID("msg_"), GUID: NewID("guid_"), Sender: who, Text: &text, SentAt: int64(from + i + 1)},
			}
		}
		return msgs
	}
	count := func(name []byte) (n int) {
		t.Helper()
		err := db.bolt.View(func(tx *bolt.Tx) error {
			b := tx.Bucket(name)
			if string(name) == string(bktGUIDJournal) {
				return b.ForEach(func(k, v []byte) error {
					if v == nil {
						n += b.Bucket(k).Stats().KeyN
					}
					return nil
				})
			}
			n = b.Stats().KeyN
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	findAll := func(msgs []Inbound) {
		t.Helper()
		for _, in := range msgs {
			// An imported message's ID is the one its place gives it.
			m, err := db.MessageByGUID(ctx, in.Message.GUID)
			if err != nil || m.GUID != in.Message.GUID || *m.Text != *in.Message.Text {
				t.Fatalf("MessageByGUID(%s) = %s %s, %v", in.Message.GUID, m.ID, m.GUID, err)
			}
			if _, _, _, ok := parseHistoryID([]byte(m.ID)); !ok {
				t.Fatalf("MessageByGUID(%s) = %s: not a history ID", in.Message.GUID, m.ID)
			}
			if byID, err := db.MessageByID(ctx, m.ID); err != nil || byID.GUID != m.GUID {
				t.Fatalf("MessageByID(%s) = %s, %v; want %s", m.ID, byID.GUID, err, m.GUID)
			}
		}
	}

	// (60,000 GUIDs also grow the journal's filter twice.)
	// One message arrives live first; the import holds it again, and one
	// GUID twice in the same transaction.
	first := history(0, 60_000)
	first = append(first, first[59_999])
	first[59_999].Message.ID, first[60_000].Message.ID = first[60_000].Message.ID, NewID("msg_")
	live, err := db.RecordInbound(ctx, first[7])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ImportHistory(ctx, line.ID, first); err != nil {
		t.Fatal(err)
	}
	if got := count(bktChatMessages); got != 60_000 {
		t.Fatalf("stored %d messages, want 60000", got)
	}
	if j, i := count(bktGUIDJournal), count(bktMessageGUIDs); j != 59_999 || i != 1 {
		t.Fatalf("journal %d, index %d; want 59999 and the live message", j, i)
	}
	if m, err := db.MessageByGUID(ctx, first[7].Message.GUID); err != nil || m.ID != live.Message.ID {
		t.Fatalf("the live message became %s, %v", m.ID, err)
	}
	findAll(first[8:60_000])

	// Journaled GUIDs are known to a live report and to a repeated import.
	if res, err := db.RecordInbound(ctx, first[100]); err != nil || !res.Duplicate {
		t.Fatalf("a journaled GUID arriving live: duplicate %v, %v", res.Duplicate, err)
	}
	if _, err := db.ImportHistory(ctx, line.ID, first[:30_000]); err != nil {
		t.Fatal(err)
	}
	if got := count(bktChatMessages); got != 60_000 {
		t.Fatalf("importing again stored %d messages, want 60000", got)
	}

	// The next open merges what the journal holds.
	db.Close()
	if db, err = Open(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := db.SyncLines(ctx, []Line{line}); err != nil {
		t.Fatal(err)
	}
	if j, i := count(bktGUIDJournal), count(bktMessageGUIDs); j != 0 || i != 60_000 {
		t.Fatalf("after a reopen: journal %d, index %d; want 0 and 60000", j, i)
	}
	findAll(first[8:60_000])

	// SettleHistory merges the next import, into an index already large,
	// in two transactions (60,000 entries > mergeTxEntries).
	second := history(60_000, 60_000)
	if _, err := db.ImportHistory(ctx, line.ID, second); err != nil {
		t.Fatal(err)
	}
	if err := db.SettleHistory(ctx); err != nil {
		t.Fatal(err)
	}
	if j, i := count(bktGUIDJournal), count(bktMessageGUIDs); j != 0 || i != 120_000 {
		t.Fatalf("settled: journal %d, index %d; want 0 and 120000", j, i)
	}
	if db.journal.filter != nil || db.journal.generations != 0 {
		t.Fatalf("settled journal still has a filter (%v) or generations (%d)", db.journal.filter != nil, db.journal.generations)
	}
	findAll(second)
	findAll(first[8:60_000])
	if _, err := db.ImportHistory(ctx, line.ID, second[:10]); err != nil {
		t.Fatal(err)
	}
	if got := count(bktChatMessages); got != 120_000 {
		t.Fatalf("importing settled GUIDs again stored %d messages, want 120000", got)
	}
	if _, err := db.MessageByGUID(ctx, "guid_never"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("an unknown GUID: %v", err)
	}
}

// The filter never forgets a GUID it holds, and rarely claims one it does
// not.
func TestGUIDFilter(t *testing.T) {
	f := newGUIDFilter(1000)
	for i := range 1000 {
		f.add(fmt.Appendf(nil, "guid-%d", i))
	}
	for i := range 1000 {
		if !f.mayContain(fmt.Appendf(nil, "guid-%d", i)) {
			t.Fatalf("guid-%d added but not contained", i)
		}
	}
	falsePositives := 0
	for i := range 100_000 {
		if f.mayContain(fmt.Appendf(nil, "other-%d", i)) {
			falsePositives++
		}
	}
	// 16 bits and 8 probes per GUID: about 0.06 %.
	if falsePositives > 200 {
		t.Fatalf("%d false positives in 100000, want under 200", falsePositives)
	}
}
