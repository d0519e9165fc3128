package storage

import (
	"context"
	"fmt"
	"slices"

	bolt "go.etcd.io/bbolt"

	"github.com/blueline-app/blueline/bridge"
	"github.com/blueline-app/blueline/client/api"
)

// MessageUpdate is what the network recorded about a stored message after
// it was stored. Times are Unix ms; 0 means not (yet).
type MessageUpdate struct {
	GUID string
	// Text is the body after the edit at EditedAt.
	Text        *string
	EditedAt    int64
	UnsentAt    int64
	DeliveredAt int64
	ReadAt      int64
	// UnsentParts are the parts the sender took back of a message that
	// keeps the others, numbered as bridge.MessageUpdate's (see
	// Message.UnsendParts).
	UnsentParts []int
	// ReadByLineAt is, for a contact's message, when the line's owner read
	// it on another device: the line's receipt and the chat's read mark
	// move there.
	ReadByLineAt int64
	// Attachments complete the files the message lacks (see
	// fillAttachments); that changes no event.
	Attachments []Attachment
}

// UpdateMessage applies an update to the message of line lineID with
// u.GUID, and queues an event for each thing that is new: message.unsent,
// message.edited, message.delivered, and receipt.read when the contact's
// receipt of a one-to-one chat moved forward. What is already stored is
// kept, so giving the same update again changes nothing. It returns the
// message as stored and the events queued (none when nothing was new), or
// ErrNotFound.
func (db *DB) UpdateMessage(ctx context.Context, lineID string, u MessageUpdate) (Message, []string, error) {
	var m Message
	var events []string
	changed := false
	line, _ := db.LineByID(lineID)
	// Most updates repeat what is stored: a read transaction tells.
	err := db.bolt.View(func(tx *bolt.Tx) error {
		if _, err := messageKeyByGUID(tx, u.GUID, &m); err != nil {
			return err
		}
		if m.LineID != lineID {
			return ErrNotFound
		}
		events, changed = messageChanges(&m, u)
		if !changed && !m.IsFromMe && u.ReadByLineAt != 0 {
			var c Chat
			if err := getJSON(tx.Bucket(bktChats), []byte(m.ChatID), &c); err != nil {
				return fmt.Errorf("chat of message %s: %w", m.ID, err)
			}
			changed = u.ReadByLineAt > c.ReadAt
		}
		return nil
	})
	if err != nil || !changed {
		return m, nil, err
	}
	err = db.bolt.Batch(func(tx *bolt.Tx) error {
		m = Message{} // decoding leaves alone what the JSON omits
		key, err := messageKeyByGUID(tx, u.GUID, &m)
		if err != nil {
			return err
		}
		if events, changed = messageChanges(&m, u); changed {
			if err := storeMessage(tx, key, &m); err != nil {
				return err
			}
		}
		if !m.IsFromMe && u.ReadByLineAt != 0 {
			if err := lineRead(tx, m.ChatID, line.Handle, u.ReadByLineAt, nowMillis()); err != nil {
				return err
			}
		}
		var c Chat
		if err := getJSON(tx.Bucket(bktChats), []byte(m.ChatID), &c); err != nil {
			return fmt.Errorf("chat of message %s: %w", m.ID, err)
		}
		for _, e := range events {
			if e == api.EventReceiptRead {
				// A group has no receipt per member: a read date on a
				// group message names no reader.
				if c.IsGroup {
					continue
				}
				if _, err := db.contactRead(tx, c, c.Identifier, m.ReadAt); err != nil {
					return err
				}
				continue
			}
			if err := db.queueEvent(tx, e, m.LineID, m.ChatID, EventSubject{Message: &m}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return Message{}, nil, fmt.Errorf("update message %s: %w", u.GUID, err)
	}
	return m, events, nil
}

// messageChanges applies u to m, reports whether that changed m, and names
// the events it calls for. An unsent message takes no edit and no file; a
// part taken back raises message.unsent too, the message keeping the rest.
func messageChanges(m *Message, u MessageUpdate) (events []string, changed bool) {
	switch {
	case u.UnsentAt != 0 && m.UnsentAt == 0:
		m.UnsentAt, m.Text, m.Attachments, m.UnsentParts = u.UnsentAt, nil, []Attachment{}, nil
		events = append(events, api.EventMessageUnsent)
	case m.UnsentAt == 0:
		if m.UnsendParts(u.UnsentParts) {
			events = append(events, api.EventMessageUnsent)
		}
		if edited(m, u) {
			m.EditedAt, m.Text = u.EditedAt, u.Text
			events = append(events, api.EventMessageEdited)
		}
	}
	changed, _ = fillFiles(m, u.Attachments)
	if !m.IsFromMe {
		return events, changed || len(events) > 0
	}
	if u.DeliveredAt != 0 && m.DeliveredAt == 0 {
		m.DeliveredAt = u.DeliveredAt
		events = append(events, api.EventMessageDelivered)
	}
	if u.ReadAt > m.ReadAt {
		m.ReadAt = u.ReadAt
		events = append(events, api.EventReceiptRead)
	}
	return events, changed || len(events) > 0
}

// edited reports whether u edits the text of m. Taking back a part moves
// the edit date as well: beside parts taken back, only a text that changed
// is an edit, and a text taken back takes none.
func edited(m *Message, u MessageUpdate) bool {
	switch {
	case u.EditedAt <= m.EditedAt || u.Text == nil:
		return false
	case len(u.UnsentParts) == 0:
		return true
	}
	return m.Text != nil && *m.Text != *u.Text
}

// UnsendParts removes from m the parts its sender took back that it still
// has, records them in m.UnsentParts, and reports whether that changed m.
// parts are numbered as the network numbers a message of files and text:
// 0 to N-1 the N attachments m arrived with, in order, N its text (the
// order Messages writes them in). A part m does not have changes nothing.
func (m *Message) UnsendParts(parts []int) bool {
	if m.UnsentAt != 0 || len(parts) == 0 {
		return false
	}
	var was UnsentParts
	if m.UnsentParts != nil {
		was = *m.UnsentParts
	}
	// The attachments m arrived with: those it has, and those taken back.
	n := len(m.Attachments) + len(was.Attachments)
	now := UnsentParts{Text: was.Text, Attachments: slices.Clone(was.Attachments)}
	for _, p := range parts {
		switch {
		case p >= 0 && p < n && !slices.Contains(now.Attachments, p):
			now.Attachments = append(now.Attachments, p)
		case p == n && m.Text != nil:
			now.Text = true
		}
	}
	if now.Text == was.Text && len(now.Attachments) == len(was.Attachments) {
		return false
	}
	slices.Sort(now.Attachments)
	kept := make([]Attachment, 0, len(m.Attachments))
	i := 0 // the index of a among the attachments m arrived with
	for _, a := range m.Attachments {
		for slices.Contains(was.Attachments, i) {
			i++
		}
		if !slices.Contains(now.Attachments, i) {
			kept = append(kept, a)
		}
		i++
	}
	m.Attachments = kept
	if now.Text {
		m.Text = nil
	}
	m.UnsentParts = &now
	return true
}

// ChatUpdate is a change to a group chat, with the chat as it left it: the
// subject of a chat.updated event.
type ChatUpdate struct {
	Chat Chat `json:"chat"`
	// Action is one of the bridge's Chat… changes.
	Action string `json:"action"`
	// Participant is the member added, removed or gone.
	Participant string `json:"participant,omitempty"`
	// Name is the new name of a renamed chat.
	Name string `json:"name,omitempty"`
	// By is who made the change ("" when the network does not say).
	By       string `json:"by,omitempty"`
	IsFromMe bool   `json:"is_from_me"`
	At       int64  `json:"at"`
}

var chatActions = []string{bridge.ChatParticipantAdded, bridge.ChatParticipantRemoved, bridge.ChatParticipantLeft,
	bridge.ChatRenamed, bridge.ChatPhotoChanged, bridge.ChatPhotoRemoved}

// ApplyChatUpdate applies a change to a group chat of line want.LineID,
// identified on the network by guid, and queues its chat.updated event. A
// chat not stored yet is created from want (its ID is used only then). A
// change whose guid was applied before changes nothing: applied is false.
func (db *DB) ApplyChatUpdate(ctx context.Context, guid string, want Chat, u ChatUpdate) (_ ChatUpdate, applied bool, err error) {
	if !slices.Contains(chatActions, u.Action) {
		return u, false, fmt.Errorf("chat update: unknown action %q", u.Action)
	}
	err = db.bolt.Batch(func(tx *bolt.Tx) error {
		applied = false
		seen := tx.Bucket(bktChatUpdates)
		key := join([]byte(want.LineID), []byte(guid))
		if seen.Get(key) != nil {
			return nil
		}
		// A stored chat takes the change alone: want may be older than
		// the changes applied before it.
		var c Chat
		if id := tx.Bucket(bktChatGUIDs).Get(chatGUIDKey(want.LineID, want.GUID)); id != nil {
			if err := getJSON(tx.Bucket(bktChats), id, &c); err != nil {
				return err
			}
		} else if c, err = upsertChat(tx, want, chatNews{}); err != nil {
			return err
		}
		old := c
		switch u.Action {
		case bridge.ChatParticipantAdded:
			if u.Participant != "" && !slices.Contains(c.Participants, u.Participant) {
				c.Participants = append(slices.Clone(c.Participants), u.Participant)
			}
		case bridge.ChatParticipantRemoved, bridge.ChatParticipantLeft:
			c.Participants = slices.DeleteFunc(slices.Clone(c.Participants), func(p string) bool { return p == u.Participant })
		case bridge.ChatRenamed:
			c.Name = u.Name
		}
		if err := putChat(tx, &old, &c); err != nil {
			return err
		}
		if err := seen.Put(key, nil); err != nil {
			return err
		}
		u.Chat, applied = c, true
		return db.queueEvent(tx, api.EventChatUpdated, c.LineID, c.ID, EventSubject{ChatUpdate: &u})
	})
	if err != nil {
		return u, false, fmt.Errorf("chat update %s: %w", guid, err)
	}
	return u, applied, nil
}
