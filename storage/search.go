package storage

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"

	bolt "go.etcd.io/bbolt"
)

// The search index (package search) lives outside bbolt and follows it:
// every write that stores a message or changes one (an edit, an unsend, a
// transcription, a delivery) adds the message's key to the feed in its own
// transaction, so that nothing stored can be missing from the feed; the
// index applies the feed in order, records how far it got with what it
// applied, and only then trims it.

// A feed entry is the chat_messages key of one message, or, for the
// messages of one chat a history import stores together, feedPacked, the
// chat's ID (its length in a byte first) and each message's sent_at ‖ seq:
// 16 bytes a message rather than a whole key and an entry each, which a
// first start's million messages would otherwise leave in the file.
const feedPacked = 0x01

// noteMessage adds the message stored under key to the search feed.
func noteMessage(tx *bolt.Tx, key []byte) error {
	return putFeed(tx, key)
}

func putFeed(tx *bolt.Tx, v []byte) error {
	b := appendOnly(tx, bktSearchFeed)
	seq, err := b.NextSequence()
	if err != nil {
		return err
	}
	return b.Put(u64(seq), v)
}

// noteHistory adds the messages an import stores to the search feed, an
// entry a chat; msgs are sorted by key.
func noteHistory(tx *bolt.Tx, msgs []*heldMessage) error {
	for i := 0; i < len(msgs); {
		chat := keyChatID(msgs[i].key)
		j := i
		for j < len(msgs) && bytes.Equal(keyChatID(msgs[j].key), chat) {
			j++
		}
		if len(chat) > 255 { // not one of our chat IDs: a key an entry
			for _, m := range msgs[i:j] {
				if err := putFeed(tx, m.key); err != nil {
					return err
				}
			}
			i = j
			continue
		}
		v := make([]byte, 0, 2+len(chat)+16*(j-i))
		v = append(append(v, feedPacked, byte(len(chat))), chat...)
		for _, m := range msgs[i:j] {
			v = append(v, m.key[len(chat):]...)
		}
		if err := putFeed(tx, v); err != nil {
			return err
		}
		i = j
	}
	return nil
}

// feedKeys are the chat_messages keys of a feed entry.
func feedKeys(v []byte) ([][]byte, error) {
	if len(v) == 0 || v[0] != feedPacked {
		return [][]byte{v}, nil
	}
	if len(v) < 2 || (len(v)-2-int(v[1]))%16 != 0 || len(v) < 2+int(v[1]) {
		return nil, errors.New("search feed: a packed entry of a wrong length")
	}
	chat, rest := v[2:2+int(v[1])], v[2+int(v[1]):]
	keys := make([][]byte, 0, len(rest)/16)
	for ; len(rest) > 0; rest = rest[16:] {
		keys = append(keys, join(chat, rest[:16]))
	}
	return keys, nil
}

// MessageChange is a message stored or changed, as the search feed holds
// it: its place in the feed and the message as it is now.
type MessageChange struct {
	Seq     uint64
	Message Message
}

// MessageChanges returns the feed's changes after the one numbered after,
// oldest first, about max of them (an entry of a history import is
// returned whole: its messages share its number); a message changed
// several times comes as it is now each time.
func (db *DB) MessageChanges(ctx context.Context, after uint64, max int) ([]MessageChange, error) {
	var out []MessageChange
	err := db.bolt.View(func(tx *bolt.Tx) error {
		r := msgReader{tx: tx}
		cm := tx.Bucket(bktChatMessages)
		c := tx.Bucket(bktSearchFeed).Cursor()
		for k, entry := c.Seek(u64(after + 1)); k != nil && len(out) < max; k, entry = c.Next() {
			keys, err := feedKeys(entry)
			if err != nil {
				return err
			}
			for _, key := range keys {
				ch := MessageChange{Seq: binary.BigEndian.Uint64(k)}
				v := cm.Get(key)
				if v == nil {
					return errors.New("search feed: a message that is not stored")
				}
				if err := r.decode(key, v, &ch.Message); err != nil {
					return err
				}
				out = append(out, ch)
			}
		}
		return nil
	})
	return out, err
}

// MessageChangesSeq is the number of the feed's latest change, 0 when
// there has been none: it only grows, trimmed or not, so an index that has
// seen more has followed another database (a backup put back).
func (db *DB) MessageChangesSeq(ctx context.Context) (uint64, error) {
	var seq uint64
	err := db.bolt.View(func(tx *bolt.Tx) error {
		seq = tx.Bucket(bktSearchFeed).Sequence()
		return nil
	})
	return seq, err
}

// TrimMessageChanges forgets the feed's changes up to the one numbered
// upTo, which the index has recorded.
func (db *DB) TrimMessageChanges(ctx context.Context, upTo uint64) error {
	return db.bolt.Update(func(tx *bolt.Tx) error {
		c := tx.Bucket(bktSearchFeed).Cursor()
		for k, _ := c.First(); k != nil && binary.BigEndian.Uint64(k) <= upTo; k, _ = c.First() {
			if err := c.Delete(); err != nil {
				return err
			}
		}
		return nil
	})
}

// AllMessages pages through every stored message in storage order, for
// an index built afresh: after is the previous page's next (nil for the
// first); next is nil after the last page.
func (db *DB) AllMessages(ctx context.Context, after []byte, max int) (msgs []Message, next []byte, err error) {
	err = db.bolt.View(func(tx *bolt.Tx) error {
		r := msgReader{tx: tx}
		c := tx.Bucket(bktChatMessages).Cursor()
		k, v := c.First()
		if after != nil {
			if k, v = c.Seek(after); k != nil && bytes.Equal(k, after) {
				k, v = c.Next()
			}
		}
		for ; k != nil; k, v = c.Next() {
			if len(msgs) == max {
				next = bytes.Clone(after)
				return nil
			}
			var m Message
			if err := r.decode(k, v, &m); err != nil {
				return err
			}
			msgs = append(msgs, m)
			after = k
		}
		return nil
	})
	return msgs, next, err
}
