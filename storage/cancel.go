package storage

import (
	"bytes"
	"context"
	"errors"

	bolt "go.etcd.io/bbolt"

	"github.com/blueline-app/blueline/client/api"
)

// ErrNotPending is CancelOutbox's answer for an item that is no longer
// pending: claimed (being sent), sent or failed.
var ErrNotPending = errors.New("outbox item is not pending")

// Canceled is the error of a cancelled outbox item.
const Canceled = "canceled"

// CancelOutbox cancels a pending outbox item (scheduled, or waiting for a
// retry): it becomes failed with error "canceled" and never reaches the
// network. Claiming and cancelling are transactions of the one writer, so
// an item is either claimed first (ErrNotPending, with the item as it is)
// or cancelled first (and never claimed).
func (db *DB) CancelOutbox(ctx context.Context, id string) (OutboxItem, error) {
	var item OutboxItem
	err := db.bolt.Batch(func(tx *bolt.Tx) error {
		item = OutboxItem{}
		outbox := tx.Bucket(bktOutbox)
		if err := getJSON(outbox, []byte(id), &item); err != nil {
			return err
		}
		if item.Status != StatusPending {
			return ErrNotPending
		}
		if item.Approval == api.ApprovalWaiting {
			// A draft cancelled before the owner answered: it is not
			// waiting any more, and was not approved.
			if err := tx.Bucket(bktApprovals).Delete(approvalKey(item)); err != nil {
				return err
			}
			tx.OnCommit(db.approvals.broadcast)
			item.Approval = api.ApprovalDeclined
		}
		if err := abandonPending(tx, &item, Canceled, nowMillis()); err != nil {
			return err
		}
		return putJSON(outbox, []byte(id), item)
	})
	return item, err
}

// abandonPending makes a pending item failed with reason before it reached
// the network: off the due queue, uncounted by the guard and, for an edit,
// from its message's edits. The caller stores it.
func abandonPending(tx *bolt.Tx, item *OutboxItem, reason string, now int64) error {
	if err := unscheduleDue(tx, item.ID, item.NextAttemptAt); err != nil {
		return err
	}
	if err := guardUncount(tx, *item, now); err != nil {
		return err
	}
	if item.Kind == KindEdit {
		if err := countEdit(tx, item.TargetMessageID, 0, -1); err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
	}
	item.Status, item.Error, item.CompletedAt = StatusFailed, reason, now
	return nil
}

// unscheduleDue removes an item's entry from the due queue, where it was
// scheduled at at. (ClaimDue skips an item that is not pending anyway.)
func unscheduleDue(tx *bolt.Tx, id string, at int64) error {
	b := tx.Bucket(bktOutboxDue)
	prefix := i64(at)
	c := b.Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		if string(v) == id {
			return c.Delete()
		}
	}
	return nil
}
