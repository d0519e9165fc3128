package storage

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"

	bolt "go.etcd.io/bbolt"

	"github.com/blueline-app/blueline/client/api"
)

// Reaction is one sender's tapback of one type on a message. Each (sender,
// type) pair has one record: removing the tapback sets Added to false, adding
// it again sets it back to true, and neither changes the record's ID. A
// sender has at most one added record per message: adding a tapback removes
// the sender's other one, as Messages replaces it.
type Reaction struct {
	ID        string `json:"id"`
	MessageID string `json:"message_id"`
	ChatID    string `json:"chat_id"`
	LineID    string `json:"line_id"`
	Type      string `json:"type"`
	// Emoji is the emoji of an "emoji" tapback.
	Emoji    string `json:"emoji,omitempty"`
	Sender   string `json:"sender"`
	IsFromMe bool   `json:"is_from_me"`
	Added    bool   `json:"added"`
	SentAt   int64  `json:"sent_at"`
	SyncedAt int64  `json:"synced_at"`
}

func reactionKey(messageID, sender, typ string) []byte {
	return join([]byte(messageID), []byte(sender), []byte{0}, []byte(typ))
}

// ApplyReaction records a tapback the network reported, added or removed
// on message r.MessageID. It returns the record as stored and whether this
// changed it: the same state again, or an event older than the stored one,
// changes nothing. A tapback on an approval prompt answers its draft
// (selfapproval.go).
func (db *DB) ApplyReaction(ctx context.Context, r Reaction) (stored Reaction, changed bool, err error) {
	err = db.bolt.Batch(func(tx *bolt.Tx) error {
		if messageKey(tx, []byte(r.MessageID)) == nil {
			return fmt.Errorf("message %s: %w", r.MessageID, ErrNotFound)
		}
		stored, changed, err = db.applyReaction(tx, r)
		if err == nil {
			// Even when the record was there already: Blueline's own
			// tapback (an agent's) is stored under the same sender.
			err = db.tapbackAnswer(tx, r)
		}
		return err
	})
	return stored, changed, err
}

// applyReaction stores r and, when it changed the record, queues its
// reaction.added or reaction.removed event. An added tapback first removes
// the sender's other added one.
func (db *DB) applyReaction(tx *bolt.Tx, r Reaction) (Reaction, bool, error) {
	b := tx.Bucket(bktReactions)
	key := reactionKey(r.MessageID, r.Sender, r.Type)
	var old Reaction
	switch err := getJSON(b, key, &old); err {
	case nil:
		// A new emoji replaces the current one; a removal is a removal.
		same := old.Added == r.Added && (!r.Added || old.Emoji == r.Emoji)
		if same || r.SentAt < old.SentAt {
			return old, false, nil
		}
		if !r.Added && r.Emoji == "" {
			r.Emoji = old.Emoji
		}
		r.ID = old.ID
	case ErrNotFound:
		r.ID = NewID("rxn_")
	default:
		return Reaction{}, false, err
	}
	if r.Added {
		if err := db.replaceReactions(tx, r); err != nil {
			return Reaction{}, false, err
		}
	}
	if err := putJSON(b, key, r); err != nil {
		return Reaction{}, false, err
	}
	event := api.EventReactionAdded
	if !r.Added {
		event = api.EventReactionRemoved
	}
	return r, true, db.queueEvent(tx, event, r.LineID, r.ChatID, EventSubject{Reaction: &r})
}

// replaceReactions removes the other added tapbacks of r's sender on r's
// message, each with its reaction.removed event.
func (db *DB) replaceReactions(tx *bolt.Tx, r Reaction) error {
	b := tx.Bucket(bktReactions)
	prefix := join([]byte(r.MessageID), []byte(r.Sender), []byte{0})
	var others []Reaction
	c := b.Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		var o Reaction
		if err := json.Unmarshal(v, &o); err != nil {
			return fmt.Errorf("decode reaction %x: %w", k, err)
		}
		if o.Added && o.Type != r.Type && o.Sender == r.Sender {
			others = append(others, o)
		}
	}
	for _, o := range others {
		o.Added, o.SentAt, o.SyncedAt = false, r.SentAt, r.SyncedAt
		if err := putJSON(b, reactionKey(o.MessageID, o.Sender, o.Type), o); err != nil {
			return err
		}
		if err := db.queueEvent(tx, api.EventReactionRemoved, o.LineID, o.ChatID, EventSubject{Reaction: &o}); err != nil {
			return err
		}
	}
	return nil
}

// ReactionsByMessage lists the reaction records of a message, oldest change
// first.
func (db *DB) ReactionsByMessage(ctx context.Context, messageID string) ([]Reaction, error) {
	out, err := listPrefix[Reaction](db, bktReactions, messageID)
	slices.SortStableFunc(out, func(a, b Reaction) int { return cmp.Compare(a.SentAt, b.SentAt) })
	return out, err
}
