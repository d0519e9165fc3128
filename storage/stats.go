package storage

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

// QueueStats is the depth of the queues, as metrics report it.
type QueueStats struct {
	OutboxPending int // items waiting for an attempt (due now or later)
	OutboxClaimed int // items being sent
	// OldestDue is when the earliest pending item fell (or falls) due, and
	// OldestClaimed when the oldest item being sent was accepted (Unix ms;
	// 0 when there is none).
	OldestDue     int64
	OldestClaimed int64
	// WebhookDeliveries counts webhook deliveries waiting for an attempt.
	WebhookDeliveries int
}

// QueueStats counts the queues from their index buckets (outbox_due,
// outbox_claimed, deliveries_due) without reading the items themselves.
func (db *DB) QueueStats(ctx context.Context) (QueueStats, error) {
	var s QueueStats
	err := db.bolt.View(func(tx *bolt.Tx) error {
		due, claimed := tx.Bucket(bktOutboxDue), tx.Bucket(bktOutboxClaimed)
		s.OutboxPending = due.Stats().KeyN
		s.OutboxClaimed = claimed.Stats().KeyN
		s.WebhookDeliveries = tx.Bucket(bktDeliveriesDue).Stats().KeyN
		if k, _ := due.Cursor().First(); len(k) >= 8 {
			s.OldestDue = int64(binary.BigEndian.Uint64(k[:8]))
		}
		if k, _ := claimed.Cursor().First(); k != nil {
			s.OldestClaimed = idTime(string(k))
		}
		return nil
	})
	return s, err
}

// WaitingDeliveries counts the deliveries waiting for an attempt of the
// given webhooks, as QueueStats' WebhookDeliveries does for all.
func (db *DB) WaitingDeliveries(ctx context.Context, webhookIDs ...string) (int, error) {
	n := 0
	err := db.bolt.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bktDeliveriesDue).Cursor()
		for _, id := range webhookIDs {
			prefix := []byte(id)
			for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
				n++
			}
		}
		return nil
	})
	return n, err
}

// idTime is the creation time (Unix ms) an ID leads with, 0 if it has none.
func idTime(id string) int64 {
	_, body, ok := strings.Cut(id, "_")
	if !ok || len(body) != IDLen {
		return 0
	}
	b, err := idEncoding.DecodeString(body)
	if err != nil || len(b) < 8 {
		return 0
	}
	return int64(binary.BigEndian.Uint64(b[:8]) >> 16)
}

// BoltStats are the storage engine's counters.
type BoltStats struct {
	ReadTx     int           // read transactions started
	OpenReadTx int           // read transactions open now
	FreePages  int           // pages free for reuse, or pending release
	PageWrites int64         // pages written by commits
	WriteTime  time.Duration // spent writing pages to disk
}

// BoltStats returns the engine's counters (cheap: no transaction).
func (db *DB) BoltStats() BoltStats {
	s := db.bolt.Stats()
	return BoltStats{ReadTx: s.TxN, OpenReadTx: s.OpenTxN, FreePages: s.FreePageN + s.PendingPageN,
		PageWrites: s.TxStats.GetWrite(), WriteTime: s.TxStats.GetWriteTime()}
}

// Ping checks that the database answers a read.
func (db *DB) Ping(ctx context.Context) error {
	return db.bolt.View(func(tx *bolt.Tx) error {
		if tx.Bucket(bktMeta).Get([]byte("version")) == nil {
			return fmt.Errorf("no schema version")
		}
		return nil
	})
}
