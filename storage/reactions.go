package storage

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	bolt "go.etcd.io/bbolt"
)

// Reaction is one sender's tapback of one type on a message. Each (sender,
// type) pair has one record: removing the tapback sets Added to false, adding
// it again sets it back to true, and neither changes the record's ID.
type Reaction struct {
	ID        string `json:"id"`
	MessageID string `json:"message_id"`
	ChatID    string `json:"chat_id"`
	LineID    string `json:"line_id"`
	Type      string `json:"type"`
	Sender    string `json:"sender"`
	IsFromMe  bool   `json:"is_from_me"`
	Added     bool   `json:"added"`
	SentAt    int64  `json:"sent_at"`
	SyncedAt  int64  `json:"synced_at"`
}

func reactionKey(messageID, sender, typ string) []byte {
	return join([]byte(messageID), []byte(sender), []byte{0}, []byte(typ))
}

// ApplyReaction records a tapback added or removed on message r.MessageID.
// It returns the record as stored and whether this changed it: the same
// state again, or an event older than the stored one, changes nothing.
func (db *DB) ApplyReaction(ctx context.Context, r Reaction) (stored Reaction, changed bool, err error) {
	err = db.bolt.Batch(func(tx *bolt.Tx) error {
		if tx.Bucket(bktMessages).Get([]byte(r.MessageID)) == nil {
			return fmt.Errorf("message %s: %w", r.MessageID, ErrNotFound)
		}
		stored, changed, err = db.applyReaction(tx, r)
		return err
	})
	return stored, changed, err
}

// applyReaction stores r and, when it changed the record, queues its
// reaction.added or reaction.removed event.
func (db *DB) applyReaction(tx *bolt.Tx, r Reaction) (Reaction, bool, error) {
	b := tx.Bucket(bktReactions)
	key := reactionKey(r.MessageID, r.Sender, r.Type)
	var old Reaction
	switch err := getJSON(b, key, &old); err {
	case nil:
		if old.Added == r.Added || r.SentAt < old.SentAt {
			return old, false, nil
		}
		r.ID = old.ID
	case ErrNotFound:
		r.ID = NewID("rxn_")
	default:
		return Reaction{}, false, err
	}
	if err := putJSON(b, key, r); err != nil {
		return Reaction{}, false, err
	}
	event := EventReactionAdded
	if !r.Added {
		event = EventReactionRemoved
	}
	return r, true, db.queueEvent(tx, event, r.LineID, r.ChatID, nil, &r)
}

// ReactionsByMessage lists the reaction records of a message, oldest change
// first.
func (db *DB) ReactionsByMessage(ctx context.Context, messageID string) ([]Reaction, error) {
	out, err := listPrefix[Reaction](db, bktReactions, messageID)
	slices.SortStableFunc(out, func(a, b Reaction) int { return cmp.Compare(a.SentAt, b.SentAt) })
	return out, err
}
