package storage

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	bolt "go.etcd.io/bbolt"

	"github.com/blueline-app/blueline/client/api"
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

// RecordRead records that a contact (handle) read chat chatID up to readAt
// (Unix ms). When that moves the contact's receipt forward, it queues the
// receipt.read event.
func (db *DB) RecordRead(ctx context.Context, chatID, handle string, readAt int64) (Receipt, error) {
	var r Receipt
	err := db.bolt.Batch(func(tx *bolt.Tx) error {
		var c Chat
		if err := getJSON(tx.Bucket(bktChats), []byte(chatID), &c); err != nil {
			return fmt.Errorf("chat %s: %w", chatID, err)
		}
		var err error
		r, err = db.contactRead(tx, c, handle, readAt)
		return err
	})
	return r, err
}

// contactRead moves a contact's receipt in chat c forward to readAt and
// queues receipt.read when it moved.
func (db *DB) contactRead(tx *bolt.Tx, c Chat, handle string, readAt int64) (Receipt, error) {
	r, moved, err := putReceipt(tx, c.ID, handle, readAt, nowMillis())
	if err != nil || !moved {
		return r, err
	}
	return r, db.queueEvent(tx, api.EventReceiptRead, c.LineID, c.ID, EventSubject{Receipt: &r})
}

// putReceipt moves a receipt forward to readAt; moved is false when it was
// there already.
func putReceipt(tx *bolt.Tx, chatID, handle string, readAt, now int64) (r Receipt, moved bool, err error) {
	b := tx.Bucket(bktReceipts)
	key := join([]byte(chatID), []byte(handle))
	switch err := getJSON(b, key, &r); err {
	case nil:
		if readAt <= r.LastReadAt {
			return r, false, nil
		}
	case ErrNotFound:
		r = Receipt{ID: NewID("rcp_"), ChatID: chatID, Handle: handle}
	default:
		return Receipt{}, false, err
	}
	r.LastReadAt, r.SyncedAt = readAt, now
	return r, true, putJSON(b, key, r)
}

// Receipts lists a chat's read receipts, most recently read first.
func (db *DB) Receipts(ctx context.Context, chatID string) ([]Receipt, error) {
	out, err := listPrefix[Receipt](db, bktReceipts, chatID)
	slices.SortStableFunc(out, func(a, b Receipt) int { return cmp.Compare(b.LastReadAt, a.LastReadAt) })
	return out, err
}
