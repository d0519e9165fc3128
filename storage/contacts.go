package storage

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	bolt "go.etcd.io/bbolt"

	"github.com/blueline-app/blueline/bridge"
	"github.com/blueline-app/blueline/client/api"
)

// Keywords an inbound message may be (Inbound.Keyword), as the line's
// keyword lists recognised it.
const (
	KeywordOptOut = "opt_out"
	KeywordOptIn  = "opt_in"
)

// OptOutReplyAttempts is how many times a line's reply to an opt-out is
// tried: the default of delivery.max_attempts, which storage does not see.
const OptOutReplyAttempts = 5

// Why Enqueue refuses a write to a contact (wrapped in a *ContactError).
var (
	ErrContactOptedOut = errors.New("the contact opted out of the line's messages")
	ErrContactBlocked  = errors.New("the contact is blocked on the line")
)

// ContactError is Enqueue refusing a write to Handle: Err is
// ErrContactOptedOut or ErrContactBlocked.
type ContactError struct {
	Handle string
	Err    error
}

func (e *ContactError) Error() string { return fmt.Sprintf("%s: %v", e.Handle, e.Err) }
func (e *ContactError) Unwrap() error { return e.Err }

// BlockedContact is a contact whose messages a line stores without events
// and to whom it sends nothing.
type BlockedContact struct {
	LineID    string `json:"line_id"`
	Handle    string `json:"handle"`
	CreatedAt int64  `json:"created_at"`
}

// OptOut is a contact having opted out of a line's messages.
type OptOut struct {
	Handle string `json:"handle"`
	At     int64  `json:"at"`
	// Word is the message that opted the contact out, as it wrote it,
	// trimmed; "" for an opt-out stored before it was kept.
	Word string `json:"word,omitempty"`
}

// ContactChange is the subject of the contact.* events: a contact opting
// out of a line's messages or back in.
type ContactChange struct {
	Handle string `json:"handle"`
	At     int64  `json:"at"`
}

// contactKey is the key of a contact of a line in the blocked and
// opt_outs buckets: line ID ‖ 0 ‖ handle, so a line's contacts are in
// handle order.
func contactKey(lineID, handle string) []byte {
	return join([]byte(lineID), []byte{0}, []byte(handle))
}

// refuseContacts is the opt-out and blocked-contact rule of Enqueue: a
// write to a one-to-one chat with a contact who opted out or is blocked,
// a new group with one among its members, or one added to a group. An
// unsend is let through: it takes back what the contact was sent. A
// message to an existing group is not refused: the contact shares it with
// others and can leave it.
func refuseContacts(tx *bolt.Tx, item OutboxItem) error {
	// Most lines block no one and have no opt-outs: two seeks, and the
	// chat is not read.
	if !anyOf(tx, bktBlocked, item.LineID) && !anyOf(tx, bktOptOuts, item.LineID) {
		return nil
	}
	contacts, _, err := recipients(tx, item)
	if err != nil {
		return err
	}
	for _, h := range contacts {
		key := contactKey(item.LineID, h)
		switch {
		case tx.Bucket(bktBlocked).Get(key) != nil:
			return &ContactError{Handle: h, Err: ErrContactBlocked}
		case tx.Bucket(bktOptOuts).Get(key) != nil:
			return &ContactError{Handle: h, Err: ErrContactOptedOut}
		}
	}
	return nil
}

// recipients are the contacts a write reaches whom Enqueue's rules weigh:
// the contact of a one-to-one chat, the members of a new group, a member
// added to a group; and group, the existing group it writes to (nil
// otherwise). An unsend reaches no one.
func recipients(tx *bolt.Tx, item OutboxItem) (contacts []string, group *Chat, err error) {
	switch {
	case item.Kind == KindUnsend:
	case item.Kind == KindGroupCreate:
		contacts = item.Participants
	case item.Kind == KindGroupChange && item.GroupAction == bridge.ChatParticipantAdded:
		contacts = []string{item.Participant}
	case item.ChatID != "":
		var c Chat
		if err := getJSON(tx.Bucket(bktChats), []byte(item.ChatID), &c); err != nil {
			return nil, nil, fmt.Errorf("chat %s: %w", item.ChatID, err)
		}
		if !c.IsGroup {
			contacts = []string{c.Identifier}
		} else {
			group = &c
		}
	}
	return contacts, group, nil
}

// anyOf reports whether bucket holds a contact of line lineID.
func anyOf(tx *bolt.Tx, bucket []byte, lineID string) bool {
	prefix := contactKey(lineID, "")
	k, _ := tx.Bucket(bucket).Cursor().Seek(prefix)
	return k != nil && bytes.HasPrefix(k, prefix)
}

// blocked reports whether handle is blocked on line lineID.
func blocked(tx *bolt.Tx, lineID, handle string) bool {
	return tx.Bucket(bktBlocked).Get(contactKey(lineID, handle)) != nil
}

// applyKeyword records what an inbound one-to-one message in chat c
// says by its keyword (Inbound.Keyword): an opt-out or an opt-in, with its
// event, when it changes the contact's standing; and, for an opt-out, the
// line's reply as an outbox item, which no rule of Enqueue sees.
func (db *DB) applyKeyword(tx *bolt.Tx, line Line, c Chat, kw string, m Message) error {
	b := tx.Bucket(bktOptOuts)
	key := contactKey(line.ID, c.Identifier)
	optedOut := b.Get(key) != nil
	change := ContactChange{Handle: c.Identifier, At: nowMillis()}
	switch {
	case kw == KeywordOptOut && !optedOut:
		o := OptOut{Handle: c.Identifier, At: change.At}
		if m.Text != nil {
			o.Word = strings.TrimSpace(*m.Text)
		}
		if err := putJSON(b, key, o); err != nil {
			return err
		}
		if err := db.queueEvent(tx, api.EventContactOptedOut, line.ID, c.ID, EventSubject{Contact: &change}); err != nil {
			return err
		}
		if line.OptOutReply == "" {
			return nil
		}
		return db.putReply(tx, line, c, line.OptOutReply, "")
	case kw == KeywordOptIn && optedOut:
		if err := b.Delete(key); err != nil {
			return err
		}
		return db.queueEvent(tx, api.EventContactOptedIn, line.ID, c.ID, EventSubject{Contact: &change})
	}
	return nil
}

// putReply puts a message of the line's own to chat c in the outbox, in
// the transaction of what it answers; promptFor is the draft it asks the
// owner to approve, if any.
func (db *DB) putReply(tx *bolt.Tx, line Line, c Chat, text, promptFor string) error {
	now := nowMillis()
	payload, err := json.Marshal(map[string]string{"from": line.Handle, "to": c.Identifier, "text": text})
	if err != nil {
		return err
	}
	item := OutboxItem{ID: NewID("obx_"), LineID: line.ID, Kind: KindMessage, Status: StatusPending, Payload: payload,
		MaxAttempts: OptOutReplyAttempts, CreatedAt: now, NextAttemptAt: now, ChatID: c.ID, Text: &text, PromptFor: promptFor}
	if err := guardCount(tx, &item, nil, now); err != nil {
		return err
	}
	if err := putJSON(appendOnly(tx, bktOutbox), []byte(item.ID), item); err != nil {
		return err
	}
	if err := scheduleDue(tx, item.ID, item.NextAttemptAt); err != nil {
		return err
	}
	tx.OnCommit(db.signalOutbox)
	return nil
}

// OptedOut returns the opt-out of handle on line lineID, or ErrNotFound
// when the contact has not opted out.
func (db *DB) OptedOut(ctx context.Context, lineID, handle string) (OptOut, error) {
	var o OptOut
	err := db.bolt.View(func(tx *bolt.Tx) error { return getJSON(tx.Bucket(bktOptOuts), contactKey(lineID, handle), &o) })
	return o, err
}

// BlockContacts blocks handles on line lineID, in one transaction, and
// returns how many were not blocked before.
func (db *DB) BlockContacts(ctx context.Context, lineID string, handles ...string) (added int, err error) {
	now := nowMillis()
	err = db.bolt.Update(func(tx *bolt.Tx) error {
		added = 0
		b := tx.Bucket(bktBlocked)
		for _, h := range handles {
			key := contactKey(lineID, h)
			if b.Get(key) != nil {
				continue
			}
			if err := putJSON(b, key, BlockedContact{LineID: lineID, Handle: h, CreatedAt: now}); err != nil {
				return err
			}
			added++
		}
		return nil
	})
	return added, err
}

// BlockedContact returns a blocked contact of line lineID, or ErrNotFound.
func (db *DB) BlockedContact(ctx context.Context, lineID, handle string) (BlockedContact, error) {
	var bc BlockedContact
	err := db.bolt.View(func(tx *bolt.Tx) error { return getJSON(tx.Bucket(bktBlocked), contactKey(lineID, handle), &bc) })
	return bc, err
}

// UnblockContact unblocks handle on line lineID; ErrNotFound when it was
// not blocked.
func (db *DB) UnblockContact(ctx context.Context, lineID, handle string) error {
	return db.bolt.Update(func(tx *bolt.Tx) error {
		b, key := tx.Bucket(bktBlocked), contactKey(lineID, handle)
		if b.Get(key) == nil {
			return ErrNotFound
		}
		return b.Delete(key)
	})
}

// BlockedContacts pages through the blocked contacts of line lineID in
// handle order, from just after the handle after ("" for the first page).
// next is the last handle of a page that has more after it, else "".
func (db *DB) BlockedContacts(ctx context.Context, lineID, after string, limit int) (out []BlockedContact, next string, err error) {
	return pageContacts(db, bktBlocked, lineID, after, limit, func(bc BlockedContact) string { return bc.Handle })
}

// OptedOutContacts pages through the contacts opted out of line lineID's
// messages, as BlockedContacts pages through its blocked ones.
func (db *DB) OptedOutContacts(ctx context.Context, lineID, after string, limit int) (out []OptOut, next string, err error) {
	return pageContacts(db, bktOptOuts, lineID, after, limit, func(o OptOut) string { return o.Handle })
}

// pageContacts pages through a line's contacts in bucket (keyed by
// contactKey) in handle order, from just after the handle after.
func pageContacts[T any](db *DB, bucket []byte, lineID, after string, limit int, handleOf func(T) string) (out []T, next string, err error) {
	prefix := contactKey(lineID, "")
	out = []T{}
	err = db.bolt.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucket).Cursor()
		k, v := c.Seek(contactKey(lineID, after))
		if after != "" && bytes.Equal(k, contactKey(lineID, after)) {
			k, v = c.Next()
		}
		for ; k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			if len(out) == limit {
				next = handleOf(out[len(out)-1])
				return nil
			}
			var e T
			if err := json.Unmarshal(v, &e); err != nil {
				return fmt.Errorf("decode %s contact %q: %w", bucket, k, err)
			}
			out = append(out, e)
		}
		return nil
	})
	return slices.Clip(out), next, err
}
