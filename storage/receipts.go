package storage

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	bolt "go.etcd.io/bbolt"
)

// Receipt is how far one member of a chat (a contact, or the line itself)
// has read it. There is one per chat and handle; it only moves forward.
type Receipt struct {
	ID         string `json:"id"`
	ChatID     string `json:"chat_id"`
	Handle     string `json:"handle"`
	LastReadAt int64  `json:"last_read_at"`
	SyncedAt   int64  `json:"synced_at"`
}

// RecordRead records that handle read chat chatID up to readAt (Unix ms).
func (db *DB) RecordRead(ctx context.Context, chatID, handle string, readAt int64) (Receipt, error) {
	var r Receipt
	err := db.bolt.Batch(func(tx *bolt.Tx) error {
		if tx.Bucket(bktChats).Get([]byte(chatID)) == nil {
			return fmt.Errorf("chat %s: %w", chatID, ErrNotFound)
		}
		var err error
		r, err = putReceipt(tx, chatID, handle, readAt, nowMillis())
		return err
	})
	return r, err
}

func putReceipt(tx *bolt.Tx, chatID, handle string, readAt, now int64) (Receipt, error) {
	b := tx.Bucket(bktReceipts)
	key := join([]byte(chatID), []byte(handle))
	var r Receipt
	switch err := getJSON(b, key, &r); err {
	case nil:
		if readAt <= r.LastReadAt {
			return r, nil
		}
	case ErrNotFound:
		r = Receipt{ID: NewID("rcp_"), ChatID: chatID, Handle: handle}
	default:
		return Receipt{}, err
	}
	r.LastReadAt, r.SyncedAt = readAt, now
	return r, putJSON(b, key, r)
}

// Receipts lists a chat's read receipts, most recently read first.
func (db *DB) Receipts(ctx context.Context, chatID string) ([]Receipt, error) {
	out, err := listPrefix[Receipt](db, bktReceipts, chatID)
	slices.SortStableFunc(out, func(a, b Receipt) int { return cmp.Compare(b.LastReadAt, a.LastReadAt) })
	return out, err
}
