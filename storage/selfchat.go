package storage

import (
	"errors"
	"slices"
	"strings"

	bolt "go.etcd.io/bbolt"
)

// The owner's chat with themselves (a one-to-one chat with one of the
// line's SelfHandles) is a control channel for agents: what the owner
// writes there is a message.self event, never message.received (a contact
// writing, which an agent answers) or message.sent. Blueline's own sends
// into it (outbox items) stay message.sent, as every send of the API.
//
// Messages writes a message sent to oneself up to twice: the sent row
// (is_from_me) and, sometimes, a received copy under another GUID whose
// reply_to_guid is the sent row's GUID, possibly under another of the
// owner's handles. The copy is the same message, not news: its GUID is
// made another name of the sent message, with no event. That holds for
// Blueline's own sends too, so an agent's reply written into the chat is
// never fed back to it. The copy is known by the GUID it names and by the
// sent message having no copy yet, never by its text or its time.

// IsSelfChat reports whether chat c of line l is the owner's chat with
// themselves. Messages may keep an e-mail address's case as typed.
func (l Line) IsSelfChat(c Chat) bool {
	return !c.IsGroup && c.Identifier != "" && slices.ContainsFunc(l.SelfHandles, func(h string) bool { return strings.EqualFold(h, c.Identifier) })
}

// selfEcho recognises in as the received copy of a message sent in the
// owner's chat with themselves: it then records in's GUID as another name
// of that message, which it loads into m, and marks the message as
// copied, so that a second copy naming it is news.
func selfEcho(tx *bolt.Tx, line Line, in Inbound, m *Message) (bool, error) {
	if in.Message.IsFromMe || in.EchoOf == "" || !line.IsSelfChat(in.Chat) {
		return false, nil
	}
	key, err := messageKeyByGUID(tx, in.EchoOf, m)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if !m.IsFromMe || m.EchoGUID != "" || m.LineID != line.ID {
		return false, nil
	}
	var c Chat
	if err := getJSON(tx.Bucket(bktChats), []byte(m.ChatID), &c); err != nil {
		return false, err
	}
	if !line.IsSelfChat(c) {
		return false, nil
	}
	m.EchoGUID = in.Message.GUID
	if err := putGUID(tx, in.Message.GUID, m.ID); err != nil {
		return false, err
	}
	return true, storeMessage(tx, key, m)
}

// inSelfChat reports whether chat chatID is line lineID's chat of the
// owner with themselves.
func (db *DB) inSelfChat(tx *bolt.Tx, lineID, chatID string) bool {
	line, ok := db.LineByID(lineID)
	var c Chat
	return ok && chatID != "" && getJSON(tx.Bucket(bktChats), []byte(chatID), &c) == nil && line.IsSelfChat(c)
}
