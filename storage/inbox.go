package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	bolt "go.etcd.io/bbolt"
)

// TwinWindow is how far apart (ms) a message and its twin may be dated.
// iCloud re-inserts old messages under new GUIDs with their date kept to
// within a second or so.
const TwinWindow = 2000

// findTwin returns the ID of a stored message of chat chatID that m repeats
// under another GUID: the same sender, direction and body, dated within
// TwinWindow of it. It reads the chat's messages in that window only.
func findTwin(tx *bolt.Tx, chatID string, m *Message) ([]byte, error) {
	prefix := []byte(chatID)
	from, to := join(prefix, i64(max(0, m.SentAt-TwinWindow))), join(prefix, i64(m.SentAt+TwinWindow+1))
	c := tx.Bucket(bktChatMessages).Cursor()
	r := msgReader{tx: tx}
	for k, v := c.Seek(from); k != nil && bytes.Compare(k, to) < 0; k, v = c.Next() {
		var s Message
		if err := r.decode(k, v, &s); err != nil {
			return nil, err
		}
		if s.GUID != m.GUID && s.UnsentAt == 0 && s.Sender == m.Sender && s.IsFromMe == m.IsFromMe && sameBody(&s, m) {
			return []byte(s.ID), nil
		}
	}
	return nil, nil
}

// sameBody reports whether two messages carry the same text and files (by
// name).
func sameBody(a, b *Message) bool {
	if (a.Text == nil) != (b.Text == nil) || a.Text != nil && *a.Text != *b.Text {
		return false
	}
	return slices.EqualFunc(a.Attachments, b.Attachments, func(x, y Attachment) bool { return x.Filename == y.Filename })
}

// chatNews is what a message recorded from the network says of its chat.
type chatNews struct {
	// opens is a contact's message the line may answer (contact-first).
	opens  bool
	sender string // a contact's handle, "" for the line's own
	// filter is where the network files the chat, when filed says it
	// does (not the line's own sends, nor group changes). Not a pointer
	// into the Inbound: that moved every recorded message to the heap.
	filter string
	filed  bool
}

// readByLine moves chat c's read mark (how far the line's owner has read
// it) forward to at, and says whether it moved; the caller recounts its
// unread messages.
func readByLine(c *Chat, at int64) bool {
	if at <= c.ReadAt {
		return false
	}
	c.ReadAt = at
	return true
}

// errStopWalk ends a walk over keys early.
var errStopWalk = errors.New("stop")

// countUnread counts the contacts' messages of chat c dated after its read
// mark, newest first: what stays unread is the end of the chat, so the walk
// stops at the mark.
func countUnread(tx *bolt.Tx, c *Chat) error {
	prefix := []byte(c.ID)
	n := 0
	cur := tx.Bucket(bktChatMessages).Cursor()
	r := msgReader{tx: tx}
	_, err := pageBackward(cur, prefix, nil, -1, func(k, v []byte) error {
		if sentAt := int64(binary.BigEndian.Uint64(k[len(prefix):])); sentAt <= c.ReadAt {
			return errStopWalk
		}
		var m Message
		if err := r.decode(k, v, &m); err != nil {
			return err
		}
		if !m.IsFromMe && m.UnsentAt == 0 {
			n++
		}
		return nil
	})
	if err != nil && !errors.Is(err, errStopWalk) {
		return err
	}
	c.UnreadCount = n
	return nil
}

// twinOf returns the ID of the stored message that in repeats under another
// GUID (see findTwin), nil when there is none. In a history import, the
// messages the transaction holds back are written first, so that a twin
// within one batch is found too.
func (db *DB) twinOf(tx *bolt.Tx, h *historyTx, in Inbound) ([]byte, error) {
	id := tx.Bucket(bktChatGUIDs).Get(chatGUIDKey(in.Chat.LineID, in.Chat.GUID))
	if id == nil {
		return nil, nil
	}
	if h != nil && len(h.msgs) > 0 {
		if err := h.flush(); err != nil {
			return nil, err
		}
	}
	return findTwin(tx, string(id), &in.Message)
}

// lineRead records that the line read chat chatID up to at (Unix ms):
// through the API, or its owner on another device. It moves the line's
// receipt and the chat's read mark, and recounts what is left unread.
func lineRead(tx *bolt.Tx, chatID, lineHandle string, at, now int64) error {
	if _, _, err := putReceipt(tx, chatID, lineHandle, at, now); err != nil {
		return err
	}
	var c Chat
	if err := getJSON(tx.Bucket(bktChats), []byte(chatID), &c); err != nil {
		return fmt.Errorf("chat %s: %w", chatID, err)
	}
	old := c
	if !readByLine(&c, at) {
		return nil
	}
	if err := countUnread(tx, &c); err != nil {
		return err
	}
	return putChat(tx, &old, &c)
}
