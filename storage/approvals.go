package storage

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/blueline-app/blueline/client/api"
)

// The errors of a draft that does not go out.
const (
	Declined        = "declined"
	ApprovalTimeout = "approval_expired"
)

// Errors of ApproveOutbox and DeclineOutbox.
var (
	// ErrNoApproval is an item that never waited for approval.
	ErrNoApproval = errors.New("outbox item does not wait for approval")
	// ErrApprovalAnswered is a draft approved, declined or cancelled
	// already (the item says which).
	ErrApprovalAnswered = errors.New("outbox item was answered already")
	// ErrApprovalExpired is a draft whose time ran out, failed now if it
	// was not already.
	ErrApprovalExpired = errors.New("outbox item's approval expired")
)

// ApprovalCheck says when an agent key's message waits for the owner's
// approval: always when Required (the key or the line asks for it), or,
// when HoldHumanActive, instead of the 409 of a chat the owner took over.
// A draft expires at ExpiresAt (Unix ms).
type ApprovalCheck struct {
	Required        bool
	HoldHumanActive bool
	ExpiresAt       int64
}

// draft is item as it waits for approval, and its encoding; nothing when
// c cannot make it wait.
func (c *ApprovalCheck) draft(item OutboxItem) (OutboxItem, []byte, error) {
	if c == nil || !c.Required && !c.HoldHumanActive {
		return OutboxItem{}, nil, nil
	}
	item.Approval, item.ApprovalExpiresAt = api.ApprovalWaiting, c.ExpiresAt
	data, err := json.Marshal(item)
	return item, data, err
}

// waits decides, from the agent check's refusal (nil for none), whether
// the write waits for approval; a refusal it does not turn into a draft is
// returned.
func (c *ApprovalCheck) waits(refusal error) (bool, error) {
	if _, ok := errors.AsType[*ErrHumanActive](refusal); ok && c != nil && c.HoldHumanActive {
		return true, nil
	}
	if refusal != nil {
		return false, refusal
	}
	return c != nil && c.Required, nil
}

func approvalKey(item OutboxItem) []byte {
	return join(i64(item.ApprovalExpiresAt), []byte(item.ID))
}

// awaitApproval records draft item among those waiting, in the
// transaction that stores it.
func awaitApproval(db *DB, tx *bolt.Tx, item OutboxItem) error {
	tx.OnCommit(db.approvals.broadcast)
	return tx.Bucket(bktApprovals).Put(approvalKey(item), []byte(item.LineID))
}

// ApprovalsChanged is closed after the next commit in which a draft starts
// waiting for approval or stops (approved, declined, cancelled, expired).
// Take it before reading WaitingApprovals, so that nothing committed in
// between is missed.
func (db *DB) ApprovalsChanged() <-chan struct{} { return db.approvals.wait() }

// WaitingApprovals lists the drafts waiting for approval on line lineID
// ("" for every line), the soonest to expire first. One whose time ran out
// is listed until ExpireApprovals fails it.
func (db *DB) WaitingApprovals(ctx context.Context, lineID string) ([]OutboxItem, error) {
	items := []OutboxItem{}
	err := db.bolt.View(func(tx *bolt.Tx) error {
		outbox := tx.Bucket(bktOutbox)
		return tx.Bucket(bktApprovals).ForEach(func(k, v []byte) error {
			if lineID != "" && string(v) != lineID {
				return nil
			}
			var item OutboxItem
			if err := getJSON(outbox, k[8:], &item); err != nil {
				return fmt.Errorf("draft %s: %w", k[8:], err)
			}
			items = append(items, item)
			return nil
		})
	})
	return items, err
}

// ApproveOutbox sends a draft waiting for approval: it becomes due at once
// (or at its send_at), with text instead of its own when text is not nil.
// by says who approved it. A draft answered already is
// ErrApprovalAnswered; one past its expiry at now (Unix ms) is failed
// (approval_expired) and ErrApprovalExpired. The item is returned as it is
// after the call, whatever the error.
func (db *DB) ApproveOutbox(ctx context.Context, id, by string, text *string, now int64) (OutboxItem, error) {
	item, err := db.answerApproval(id, now, approveDraft(by, text, now))
	if err == nil {
		db.signalOutbox()
	}
	return item, err
}

// approveDraft is ApproveOutbox's answer to a draft.
func approveDraft(by string, text *string, now int64) func(*bolt.Tx, *OutboxItem) error {
	return func(tx *bolt.Tx, item *OutboxItem) error {
		item.Approval, item.ApprovalBy = api.ApprovalApproved, by
		if text != nil {
			item.Text = text
		}
		item.NextAttemptAt = max(now, item.SendAt)
		return scheduleDue(tx, item.ID, item.NextAttemptAt)
	}
}

// DeclineOutbox declines a draft waiting for approval: it becomes failed
// with error "declined" and never reaches the network. Its errors are
// ApproveOutbox's.
func (db *DB) DeclineOutbox(ctx context.Context, id, by string, now int64) (OutboxItem, error) {
	return db.answerApproval(id, now, declineDraft(by, now))
}

// declineDraft is DeclineOutbox's answer to a draft.
func declineDraft(by string, now int64) func(*bolt.Tx, *OutboxItem) error {
	return func(tx *bolt.Tx, item *OutboxItem) error {
		item.Approval, item.ApprovalBy = api.ApprovalDeclined, by
		return abandonPending(tx, item, Declined, now)
	}
}

// answerApproval applies answer to draft id, which is taken off the
// waiting list, in one transaction. Claiming cannot race it: a draft is
// not in the due queue until answer puts it there.
func (db *DB) answerApproval(id string, now int64, answer func(*bolt.Tx, *OutboxItem) error) (OutboxItem, error) {
	var item OutboxItem
	var expired bool
	err := db.bolt.Update(func(tx *bolt.Tx) (err error) {
		item, expired, err = db.answerApprovalTx(tx, id, now, answer)
		return err
	})
	if err == nil && expired {
		err = ErrApprovalExpired
	}
	return item, err
}

// answerApprovalTx is answerApproval in transaction tx; expired reports
// a draft failed now because its time had run out.
func (db *DB) answerApprovalTx(tx *bolt.Tx, id string, now int64, answer func(*bolt.Tx, *OutboxItem) error) (item OutboxItem, expired bool, err error) {
	if err := getJSON(tx.Bucket(bktOutbox), []byte(id), &item); err != nil {
		return item, false, err
	}
	switch {
	case item.Approval == "":
		return item, false, ErrNoApproval
	case item.Approval == api.ApprovalExpired:
		return item, false, ErrApprovalExpired
	case item.Approval != api.ApprovalWaiting || item.Status != StatusPending:
		return item, false, ErrApprovalAnswered
	}
	if err := tx.Bucket(bktApprovals).Delete(approvalKey(item)); err != nil {
		return item, false, err
	}
	tx.OnCommit(db.approvals.broadcast)
	if item.ApprovalExpiresAt <= now {
		// Its time ran out before ExpireApprovals came by: failed now,
		// as it would have been.
		return item, true, expireDraft(tx, &item, now)
	}
	if err := answer(tx, &item); err != nil {
		return item, false, err
	}
	return item, false, putJSON(tx.Bucket(bktOutbox), []byte(id), item)
}

// expireDraft fails a draft whose approval ran out, and stores it.
func expireDraft(tx *bolt.Tx, item *OutboxItem, now int64) error {
	item.Approval = api.ApprovalExpired
	if err := abandonPending(tx, item, ApprovalTimeout, now); err != nil {
		return err
	}
	return putJSON(tx.Bucket(bktOutbox), []byte(item.ID), *item)
}

// ExpireApprovals fails the drafts whose approval ran out at now (Unix
// ms), with error approval_expired, and returns how many. The list is in
// bbolt, so a draft that ran out while the daemon was stopped is failed by
// the first call after it starts.
func (db *DB) ExpireApprovals(ctx context.Context, now int64) (int, error) {
	var n int
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		n = 0
		b := tx.Bucket(bktApprovals)
		var due [][]byte
		c := b.Cursor()
		for k, _ := c.First(); k != nil && int64(binary.BigEndian.Uint64(k[:8])) <= now; k, _ = c.Next() {
			due = append(due, bytes.Clone(k))
		}
		if err := deleteKeys(b, due); err != nil {
			return err
		}
		for _, k := range due {
			var item OutboxItem
			if err := getJSON(tx.Bucket(bktOutbox), k[8:], &item); err != nil {
				return fmt.Errorf("draft %s: %w", k[8:], err)
			}
			if item.Approval != api.ApprovalWaiting || item.Status != StatusPending {
				continue
			}
			if err := expireDraft(tx, &item, now); err != nil {
				return err
			}
			n++
		}
		if len(due) > 0 {
			tx.OnCommit(db.approvals.broadcast)
		}
		return nil
	})
	return n, err
}
