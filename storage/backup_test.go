package storage_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/storage"
)

// A backup taken while writers commit is a consistent database holding at
// least every write committed before it began.
func TestBackupUnderWrites(t *testing.T) {
	db, line := openDB(t)
	chat := inbound(t, db, line, "+15551110001", 1).Chat
	text := "hello"
	enqueue := func() string {
		item, _, err := db.Enqueue(ctx, storage.EnqueueRequest{Item: storage.OutboxItem{
			ID: storage.NewID("obx_"), LineID: line.ID, Kind: storage.KindMessage, MaxAttempts: 3, ChatID: chat.ID, Text: &text,
		}})
		if err != nil {
			t.Error(err)
		}
		return item.ID
	}
	var before []string
	for range 200 {
		before = append(before, enqueue())
	}

	stop := make(chan struct{})
	var writers sync.WaitGroup
	for range 8 {
		writers.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
					enqueue()
				}
			}
		})
	}
	var buf bytes.Buffer
	n, err := db.Backup(ctx, &buf)
	close(stop)
	writers.Wait()
	if err != nil || n != int64(buf.Len()) || n == 0 {
		t.Fatalf("backup: %d bytes (buffer %d): %v", n, buf.Len(), err)
	}

	dir := t.TempDir()
	path := filepath.Join(dir, "db.bolt")
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := storage.CheckBackup(path); err != nil {
		t.Fatal(err)
	}
	// Every page is reachable once and only once.
	b, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var problems []error
	err = b.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			problems = append(problems, err)
		}
		return nil
	})
	b.Close()
	if err != nil || len(problems) > 0 {
		t.Fatalf("the backup is inconsistent: %v %v", err, problems)
	}
	copyDB, err := storage.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer copyDB.Close()
	for _, id := range before {
		if item, err := copyDB.OutboxItemByID(ctx, id); err != nil || item.Status != storage.StatusPending {
			t.Fatalf("item %s in the backup: %+v %v", id, item, err)
		}
	}
}

func TestCheckBackup(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	boltFile := func(name string, fill func(tx *bolt.Tx) error) string {
		p := filepath.Join(dir, name)
		b, err := bolt.Open(p, 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Update(fill); err != nil {
			t.Fatal(err)
		}
		b.Close()
		return p
	}
	version := func(v byte) func(tx *bolt.Tx) error {
		return func(tx *bolt.Tx) error {
			m, err := tx.CreateBucket([]byte("meta"))
			if err != nil {
				return err
			}
			return m.Put([]byte("version"), []byte{0, 0, 0, 0, 0, 0, 0, v})
		}
	}
	ours, err := storage.Open(filepath.Join(dir, "ours"))
	if err != nil {
		t.Fatal(err)
	}
	ours.Close()

	for _, tc := range []struct {
		name, path, want string
	}{
		{"ours", filepath.Join(dir, "ours", "db.bolt"), ""},
		{"missing", filepath.Join(dir, "nothing"), "no such file"},
		{"folder", dir, "not a regular file"},
		{"empty", write("empty", nil), "empty"},
		{"junk", write("junk", bytes.Repeat([]byte("not bolt "), 2000)), "not a Blueline database"},
		{"other bolt", boltFile("other", func(tx *bolt.Tx) error { _, err := tx.CreateBucket([]byte("x")); return err }), "no \"meta\" bucket"},
		{"newer schema", boltFile("newer", version(99)), "newer than this build"},
		{"schema 0", boltFile("zero", version(0)), "invalid schema version"},
	} {
		err := storage.CheckBackup(tc.path)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: got %v, want an error with %q", tc.name, err, tc.want)
		}
	}
}

// Restore keeps the database it replaces, and refuses a database that is
// held open.
func TestRestore(t *testing.T) {
	src, _ := openDB(t)
	if err := src.CreateKey(ctx, storage.Key{ID: "key_backup", Hash: bytes.Repeat([]byte{1}, 32)}); err != nil {
		t.Fatal(err)
	}
	backup := filepath.Join(t.TempDir(), "backup.bolt")
	f, err := os.Create(backup)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := src.Backup(ctx, f); err != nil {
		t.Fatal(err)
	}
	f.Close()

	dir := t.TempDir()
	live, err := storage.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := live.CreateKey(ctx, storage.Key{ID: "key_live", Hash: bytes.Repeat([]byte{2}, 32)}); err != nil {
		t.Fatal(err)
	}
	if _, err := storage.Restore(dir, backup, time.Now()); err == nil || !strings.Contains(err.Error(), "locked") {
		t.Fatalf("restore over an open database: %v", err)
	}
	live.Close()
	if _, err := storage.Restore(dir, filepath.Join(dir, "db.bolt"), time.Now()); err == nil {
		t.Fatal("the database was restored onto itself")
	}

	res, err := storage.Restore(dir, backup, time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	if res.Path != filepath.Join(dir, "db.bolt") || res.Previous != res.Path+".before-restore-20300102T030405.000Z" || res.Size == 0 {
		t.Fatalf("restored: %+v", res)
	}
	if _, err := os.Stat(res.Path + ".restore-tmp"); !os.IsNotExist(err) {
		t.Fatalf("temporary file left: %v", err)
	}
	keyIDs := func(dir string) []string {
		db, err := storage.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		keys, err := db.Keys(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, k := range keys {
			ids = append(ids, k.ID)
		}
		return ids
	}
	if ids := keyIDs(dir); len(ids) != 1 || ids[0] != "key_backup" {
		t.Fatalf("keys after restore: %v", ids)
	}
	prev := t.TempDir()
	if err := os.Rename(res.Previous, filepath.Join(prev, "db.bolt")); err != nil {
		t.Fatal(err)
	}
	if ids := keyIDs(prev); len(ids) != 1 || ids[0] != "key_live" {
		t.Fatalf("keys of the kept database: %v", ids)
	}

	// Into a data folder that does not exist yet: nothing to keep.
	fresh := filepath.Join(t.TempDir(), "new", "data")
	res, err = storage.Restore(fresh, backup, time.Now())
	if err != nil || res.Previous != "" {
		t.Fatalf("restore into a new folder: %+v %v", res, err)
	}
}

func TestQueueStats(t *testing.T) {
	db, line := openDB(t)
	chat := inbound(t, db, line, "+15551110001", 1).Chat
	createWebhook(t, db, line, api.EventMessageReceived)
	s, err := db.QueueStats(ctx)
	if err != nil || s != (storage.QueueStats{}) {
		t.Fatalf("empty queues: %+v %v", s, err)
	}
	inbound(t, db, line, "+15551110001", 2) // queues one webhook delivery
	text := "hi"
	start := time.Now().UnixMilli()
	for range 3 {
		if _, _, err := db.Enqueue(ctx, storage.EnqueueRequest{Item: storage.OutboxItem{
			ID: storage.NewID("obx_"), LineID: line.ID, Kind: storage.KindMessage, MaxAttempts: 3, ChatID: chat.ID, Text: &text,
		}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := db.ClaimDue(ctx, 1<<62, 1); err != nil {
		t.Fatal(err)
	}
	s, err = db.QueueStats(ctx)
	end := time.Now().UnixMilli()
	if err != nil || s.OutboxPending != 2 || s.OutboxClaimed != 1 || s.WebhookDeliveries != 1 ||
		s.OldestDue < start || s.OldestDue > end || s.OldestClaimed < start || s.OldestClaimed > end {
		t.Fatalf("stats %+v (between %d and %d): %v", s, start, end, err)
	}
}
