package storage

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	bolt "go.etcd.io/bbolt"
)

// Chat is a conversation on one line: one-to-one with a contact, or a group.
type Chat struct {
	ID         string `json:"id"`
	LineID     string `json:"line_id"`
	GUID       string `json:"guid"`       // the network's chat GUID, e.g. "iMessage;-;+15550102000"
	Identifier string `json:"identifier"` // the contact's handle, or the group's "chat…" identifier
	Service    string `json:"service"`
	Name       string `json:"name"`
	IsGroup    bool   `json:"is_group"`
	// Participants are the other members' handles (the line itself excluded).
	Participants       []string `json:"participants"`
	HasReceivedInbound bool     `json:"has_received_inbound"`
	LastMessageAt      int64    `json:"last_message_at"`
	CreatedAt          int64    `json:"created_at"`
	// Filter is where the network files the chat away from the inbox
	// (Messages: "unknown_sender", "junk", "promotion", …), "" for none.
	Filter string `json:"filter,omitempty"`
	// ReadAt is how far the line has read the chat (Unix ms): through the
	// API, or its owner on another device. UnreadCount counts the
	// contacts' messages dated after it.
	ReadAt      int64 `json:"read_at,omitempty"`
	UnreadCount int   `json:"unread_count,omitempty"`
}

// same reports whether c and o are stored alike.
func (c *Chat) same(o *Chat) bool {
	return c.ID == o.ID && c.LineID == o.LineID && c.GUID == o.GUID && c.Identifier == o.Identifier &&
		c.Service == o.Service && c.Name == o.Name && c.IsGroup == o.IsGroup && slices.Equal(c.Participants, o.Participants) &&
		c.HasReceivedInbound == o.HasReceivedInbound && c.LastMessageAt == o.LastMessageAt && c.CreatedAt == o.CreatedAt &&
		c.Filter == o.Filter && c.ReadAt == o.ReadAt && c.UnreadCount == o.UnreadCount
}

// ChatCursorLen is the length of a chat-list cursor: last_message_at ‖ chat ID.
const ChatCursorLen = 8 + len("cht_") + IDLen

// ChatByID returns a chat by ID.
func (db *DB) ChatByID(ctx context.Context, id string) (Chat, error) {
	var c Chat
	err := db.bolt.View(func(tx *bolt.Tx) error {
		return getJSON(tx.Bucket(bktChats), []byte(id), &c)
	})
	return c, err
}

// ChatByIdentifier returns a line's chat by its identifier: the contact's
// handle for a one-to-one chat, "chat…" for a group.
func (db *DB) ChatByIdentifier(ctx context.Context, lineID, identifier string) (Chat, error) {
	var c Chat
	err := db.bolt.View(func(tx *bolt.Tx) error {
		id := tx.Bucket(bktChatIdents).Get(join([]byte(lineID), []byte(identifier)))
		if id == nil {
			return ErrNotFound
		}
		return getJSON(tx.Bucket(bktChats), id, &c)
	})
	return c, err
}

// ChatByGUID returns a line's chat by the network's chat GUID.
func (db *DB) ChatByGUID(ctx context.Context, lineID, guid string) (Chat, error) {
	var c Chat
	err := db.bolt.View(func(tx *bolt.Tx) error {
		id := tx.Bucket(bktChatGUIDs).Get(chatGUIDKey(lineID, guid))
		if id == nil {
			return ErrNotFound
		}
		return getJSON(tx.Bucket(bktChats), id, &c)
	})
	return c, err
}

// ListChats pages through a line's chats, most recent message first. after is
// the cursor returned by the previous page (nil for the first).
func (db *DB) ListChats(ctx context.Context, lineID string, after []byte, limit int) (chats []Chat, next []byte, err error) {
	if after != nil && len(after) != ChatCursorLen {
		return nil, nil, ErrBadCursor
	}
	prefix := []byte(lineID)
	err = db.bolt.View(func(tx *bolt.Tx) error {
		chatsB := tx.Bucket(bktChats)
		var last []byte
		more, err := pageBackward(tx.Bucket(bktChatRecent).Cursor(), prefix, after, limit, func(k, _ []byte) error {
			var c Chat
			if err := getJSON(chatsB, k[len(prefix)+8:], &c); err != nil {
				return fmt.Errorf("chat index points at %s: %w", k[len(prefix)+8:], err)
			}
			chats = append(chats, c)
			last = k
			return nil
		})
		if more {
			next = slices.Clone(last[len(prefix):])
		}
		return err
	})
	return chats, next, err
}

// chatGUIDKey indexes chats by the network's GUID, per line.
func chatGUIDKey(lineID, guid string) []byte { return join([]byte(lineID), []byte(guid)) }

func recentKey(c *Chat) []byte {
	return join([]byte(c.LineID), i64(c.LastMessageAt), []byte(c.ID))
}

// putChat writes a chat and keeps its indexes in step with it. old is the
// chat as stored before, or nil for a new chat.
func putChat(tx *bolt.Tx, old, c *Chat) error {
	if old != nil && old.LastMessageAt != c.LastMessageAt {
		if err := tx.Bucket(bktChatRecent).Delete(recentKey(old)); err != nil {
			return err
		}
	}
	if old == nil || old.LastMessageAt != c.LastMessageAt {
		if err := tx.Bucket(bktChatRecent).Put(recentKey(c), nil); err != nil {
			return err
		}
	}
	if old == nil {
		if err := tx.Bucket(bktChatGUIDs).Put(chatGUIDKey(c.LineID, c.GUID), []byte(c.ID)); err != nil {
			return err
		}
		if err := tx.Bucket(bktChatIdents).Put(join([]byte(c.LineID), []byte(c.Identifier)), []byte(c.ID)); err != nil {
			return err
		}
	}
	data, err := json.Marshal(c)
	if err != nil {
		return err
	}
	return tx.Bucket(bktChats).Put([]byte(c.ID), data)
}
