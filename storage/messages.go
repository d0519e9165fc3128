package storage

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	bolt "go.etcd.io/bbolt"
)

// Message is one message in a chat, inbound or sent by the line.
type Message struct {
	ID             string       `json:"id"`
	LineID         string       `json:"line_id"`
	ChatID         string       `json:"chat_id"`
	GUID           string       `json:"guid"`
	Sender         string       `json:"sender"`
	Text           *string      `json:"text"`
	Attachments    []Attachment `json:"attachments"`
	Service        string       `json:"service"`
	IsFromMe       bool         `json:"is_from_me"`
	IsAudioMessage bool         `json:"is_audio_message"`
	SentAt         int64        `json:"sent_at"`
	SyncedAt       int64        `json:"synced_at"`
	OutboxID       string       `json:"outbox_id,omitempty"`
	ReplyToGUID    string       `json:"reply_to_guid,omitempty"`
	// FailedAt and Error are set when the network failed a message of ours
	// after it was sent (Unix ms; a late "Not Delivered").
	FailedAt int64  `json:"failed_at,omitempty"`
	Error    string `json:"error,omitempty"`
}

// Attachment is a file carried by a message.
type Attachment struct {
	FileID        string  `json:"file_id"`
	Filename      string  `json:"filename"`
	MimeType      string  `json:"mime_type"`
	Size          int64   `json:"size"`
	Transcription *string `json:"transcription"`
}

// MessageCursorLen is the length of a message-list cursor: sent_at ‖ seq.
const MessageCursorLen = 16

// MessageByID returns a message by its msg_ ID.
func (db *DB) MessageByID(ctx context.Context, id string) (Message, error) {
	var m Message
	err := db.bolt.View(func(tx *bolt.Tx) error { return getMessage(tx, []byte(id), &m) })
	return m, err
}

// MessageByGUID returns a message by its network GUID.
func (db *DB) MessageByGUID(ctx context.Context, guid string) (Message, error) {
	var m Message
	err := db.bolt.View(func(tx *bolt.Tx) error {
		_, err := messageKeyByGUID(tx, guid, &m)
		return err
	})
	return m, err
}

// messageKeyByGUID loads the message with a network GUID into m and returns
// its key in the chat-messages bucket, or ErrNotFound.
func messageKeyByGUID(tx *bolt.Tx, guid string, m *Message) ([]byte, error) {
	id := tx.Bucket(bktMessageGUIDs).Get([]byte(guid))
	if id == nil {
		return nil, ErrNotFound
	}
	key := tx.Bucket(bktMessages).Get(id)
	if key == nil {
		return nil, ErrNotFound
	}
	return key, getJSON(tx.Bucket(bktChatMessages), key, m)
}

func getMessage(tx *bolt.Tx, id []byte, m *Message) error {
	key := tx.Bucket(bktMessages).Get(id)
	if key == nil {
		return ErrNotFound
	}
	return getJSON(tx.Bucket(bktChatMessages), key, m)
}

// ListMessages pages through a chat's messages, most recent first. after is
// the cursor returned by the previous page (nil for the first). Messages that
// arrive during a walk sort before its cursor, so the walk neither skips nor
// repeats one.
func (db *DB) ListMessages(ctx context.Context, chatID string, after []byte, limit int) (msgs []Message, next []byte, err error) {
	if after != nil && len(after) != MessageCursorLen {
		return nil, nil, ErrBadCursor
	}
	prefix := []byte(chatID)
	msgs = make([]Message, 0, limit)
	err = db.bolt.View(func(tx *bolt.Tx) error {
		var last []byte
		more, err := pageBackward(tx.Bucket(bktChatMessages).Cursor(), prefix, after, limit, func(k, v []byte) error {
			var m Message
			if err := json.Unmarshal(v, &m); err != nil {
				return fmt.Errorf("decode message %x: %w", k, err)
			}
			msgs = append(msgs, m)
			last = k
			return nil
		})
		if more {
			next = slices.Clone(last[len(prefix):])
		}
		return err
	})
	return msgs, next, err
}

// putMessage stores a new message in chat c and moves the chat's
// last_message_at forward. The caller has loaded c in the same transaction;
// saved is c as stored, which putMessage keeps up to date.
func putMessage(tx *bolt.Tx, saved, c *Chat, m *Message) error {
	cm := appendOnly(tx, bktChatMessages)
	seq, err := cm.NextSequence()
	if err != nil {
		return err
	}
	key := join([]byte(m.ChatID), i64(m.SentAt), u64(seq))
	data, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if err := cm.Put(key, data); err != nil {
		return err
	}
	if err := appendOnly(tx, bktMessages).Put([]byte(m.ID), key); err != nil {
		return err
	}
	if err := tx.Bucket(bktMessageGUIDs).Put([]byte(m.GUID), []byte(m.ID)); err != nil {
		return err
	}
	if m.SentAt <= c.LastMessageAt {
		return nil
	}
	c.LastMessageAt = m.SentAt
	if err := putChat(tx, saved, c); err != nil {
		return err
	}
	*saved = *c
	return nil
}

// Inbound is a message the network delivered to a line (or one the line's
// owner sent from another device). Chat describes the conversation as the
// network knows it; its ID is used only if the chat is new.
type Inbound struct {
	Chat    Chat
	Message Message
}

// InboundResult is what RecordInbound stored.
type InboundResult struct {
	Message Message
	Chat    Chat
	// Duplicate is true when a message with the same GUID was already
	// stored; Message is then the stored one, with any transcription it
	// lacked filled in from the new report.
	Duplicate bool
	// Transcribed is true when a duplicate brought a missing transcription.
	Transcribed bool
	// SandboxActivated is true when this message activated the sandbox line.
	SandboxActivated bool
}

// RecordInbound stores an inbound message, creating or updating its chat, in
// one durable transaction, with its webhook event. A GUID seen before is not
// stored twice.
func (db *DB) RecordInbound(ctx context.Context, in Inbound) (InboundResult, error) {
	line, ok := db.LineByID(in.Chat.LineID)
	if !ok {
		return InboundResult{}, fmt.Errorf("record inbound: line %s: %w", in.Chat.LineID, ErrNotFound)
	}
	var res InboundResult
	err := db.bolt.Batch(func(tx *bolt.Tx) (err error) {
		res, err = db.recordInbound(tx, line, in, true)
		return err
	})
	if err != nil {
		return InboundResult{}, fmt.Errorf("record inbound: %w", err)
	}
	return res, nil
}

// ImportHistory stores messages that were on the network before the line
// was connected: in few transactions, and without webhook events, since
// nothing new happened. GUIDs seen before are skipped.
func (db *DB) ImportHistory(ctx context.Context, lineID string, msgs []Inbound) error {
	line, ok := db.LineByID(lineID)
	if !ok {
		return fmt.Errorf("import history: line %s: %w", lineID, ErrNotFound)
	}
	const chunk = 5000
	for len(msgs) > 0 {
		n := min(chunk, len(msgs))
		err := db.bolt.Update(func(tx *bolt.Tx) error {
			for _, in := range msgs[:n] {
				if _, err := db.recordInbound(tx, line, in, false); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("import history: %w", err)
		}
		msgs = msgs[n:]
	}
	return nil
}

func (db *DB) recordInbound(tx *bolt.Tx, line Line, in Inbound, events bool) (res InboundResult, err error) {
	if id := tx.Bucket(bktMessageGUIDs).Get([]byte(in.Message.GUID)); id != nil {
		res.Duplicate = true
		if err := getMessage(tx, id, &res.Message); err != nil {
			return res, err
		}
		if res.Transcribed, err = fillTranscriptions(tx, &res.Message, in.Message.Attachments); err != nil {
			return res, err
		}
		return res, getJSON(tx.Bucket(bktChats), []byte(res.Message.ChatID), &res.Chat)
	}
	c, err := upsertChat(tx, in.Chat, !in.Message.IsFromMe, in.Message.Sender)
	if err != nil {
		return res, err
	}
	m := in.Message
	m.ChatID, m.LineID = c.ID, c.LineID
	if m.Attachments == nil {
		m.Attachments = []Attachment{}
	}
	saved := c
	if err := putMessage(tx, &saved, &c, &m); err != nil {
		return res, err
	}
	if events {
		event := EventMessageReceived
		if m.IsFromMe {
			event = EventMessageSent // sent from the owner's other devices
		}
		if err := db.queueEvent(tx, event, c.LineID, c.ID, &m, nil); err != nil {
			return res, err
		}
	}
	if line.IsSandbox && !m.IsFromMe && m.Text != nil {
		if res.SandboxActivated, err = activateSandbox(tx, *m.Text, m.Sender); err != nil {
			return res, err
		}
	}
	res.Message, res.Chat = m, c
	return res, nil
}

// fillTranscriptions copies transcriptions from a new report of message m
// into the attachments that have none yet, and stores m if that changed it.
func fillTranscriptions(tx *bolt.Tx, m *Message, report []Attachment) (bool, error) {
	changed := false
	for i := range min(len(m.Attachments), len(report)) {
		if m.Attachments[i].Transcription == nil && report[i].Transcription != nil {
			m.Attachments[i].Transcription = report[i].Transcription
			changed = true
		}
	}
	if !changed {
		return false, nil
	}
	key := tx.Bucket(bktMessages).Get([]byte(m.ID))
	if key == nil {
		return false, fmt.Errorf("message %s: %w", m.ID, ErrNotFound)
	}
	return true, putJSON(tx.Bucket(bktChatMessages), key, m)
}

// upsertChat finds the chat by its network GUID or creates it from want.
func upsertChat(tx *bolt.Tx, want Chat, inbound bool, sender string) (Chat, error) {
	members := slices.Clone(want.Participants)
	if inbound && sender != "" {
		members = append(members, sender)
	}
	var c Chat
	id := tx.Bucket(bktChatGUIDs).Get(chatGUIDKey(want.LineID, want.GUID))
	if id == nil {
		c = want
		c.CreatedAt = nowMillis()
		c.HasReceivedInbound = inbound
		c.Participants = []string{}
		for _, p := range members {
			if p != "" && !slices.Contains(c.Participants, p) {
				c.Participants = append(c.Participants, p)
			}
		}
		return c, putChat(tx, nil, &c)
	}
	if err := getJSON(tx.Bucket(bktChats), id, &c); err != nil {
		return Chat{}, err
	}
	old := c
	changed := false
	if inbound && !c.HasReceivedInbound {
		c.HasReceivedInbound, changed = true, true
	}
	if c.IsGroup {
		for _, p := range members {
			if p != "" && !slices.Contains(c.Participants, p) {
				c.Participants = append(c.Participants, p)
				changed = true
			}
		}
		if want.Name != "" && want.Name != c.Name {
			c.Name, changed = want.Name, true
		}
	}
	if !changed {
		return c, nil
	}
	return c, putChat(tx, &old, &c)
}
