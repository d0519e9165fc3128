package storage

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"slices"

	bolt "go.etcd.io/bbolt"

	"github.com/blueline-app/blueline/client/api"
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
	// What the network recorded later (Unix ms, 0 for not (yet)): the last
	// edit; the unsend, after which Text and Attachments are empty; and,
	// for the line's own messages, delivery to and reading by the contact.
	EditedAt    int64 `json:"edited_at,omitempty"`
	UnsentAt    int64 `json:"unsent_at,omitempty"`
	DeliveredAt int64 `json:"delivered_at,omitempty"`
	ReadAt      int64 `json:"read_at,omitempty"`
	// UnsentParts says what the sender took back of a message that keeps
	// the rest (see UnsendParts); nil when nothing, and once the whole
	// message is unsent.
	UnsentParts *UnsentParts `json:"unsent_parts,omitempty"`
	// EditRequests counts the line's accepted edits of its own message
	// that did not fail: what Messages' limit on edits is checked against.
	EditRequests int `json:"edit_requests,omitempty"`
	// EchoGUID is, for a message of the owner's chat with themselves, the
	// GUID of the received copy the network wrote of it (selfchat.go).
	EchoGUID string `json:"echo_guid,omitempty"`
}

// UnsentParts are the parts of a message its sender took back.
type UnsentParts struct {
	// Text is set when the text was taken back.
	Text bool `json:"text"`
	// Attachments are the indexes of the attachments taken back among
	// the message's attachments as it arrived, in order.
	Attachments []int `json:"attachments"`
}

// Attachment is a file carried by a message.
type Attachment struct {
	FileID        string  `json:"file_id"`
	Filename      string  `json:"filename"`
	MimeType      string  `json:"mime_type"`
	Size          int64   `json:"size"`
	Transcription *string `json:"transcription"`
	// Inline marks an emoji image (Genmoji, inline sticker) whose stand-in
	// the text carries.
	Inline bool `json:"inline,omitempty"`
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
	id := lookupGUID(tx, []byte(guid))
	if id == nil {
		return nil, ErrNotFound
	}
	key := messageKey(tx, id)
	if key == nil {
		return nil, ErrNotFound
	}
	return key, loadMessage(tx, key, m)
}

func getMessage(tx *bolt.Tx, id []byte, m *Message) error {
	key := messageKey(tx, id)
	if key == nil {
		return ErrNotFound
	}
	return loadMessage(tx, key, m)
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
		r := msgReader{tx: tx}
		more, err := pageBackward(tx.Bucket(bktChatMessages).Cursor(), prefix, after, limit, func(k, v []byte) error {
			var m Message
			if err := r.decode(k, v, &m); err != nil {
				return err
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
	if err := noteMessage(tx, key); err != nil {
		return err
	}
	if err := appendOnly(tx, bktMessages).Put([]byte(m.ID), key); err != nil {
		return err
	}
	if err := putGUID(tx, m.GUID, m.ID); err != nil {
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
	// Screened is a message the network filed away from the inbox (junk,
	// an unknown sender held back): its sender does not become a contact
	// the line may write to.
	Screened bool
	// MatchTwins looks for the message under other GUIDs: the network may
	// write one again under a new GUID (iCloud replaying history), and a
	// stored message of the same chat with the same sender, direction and
	// body, dated within TwinWindow, is then this one.
	MatchTwins bool
	// ReadByLineAt is, for a contact's message, when the line's owner read
	// it (Unix ms, 0 for not yet): the chat's read mark moves there.
	ReadByLineAt int64
	// Keyword is KeywordOptOut or KeywordOptIn when the message is one of
	// the line's keywords; it counts only for a contact's message in a
	// one-to-one chat, and not in history.
	Keyword string
	// EchoOf is, for a received message, the GUID of the message the
	// network says it follows (chat.db's reply_to_guid): in the owner's
	// chat with themselves, the received copy of a sent message names
	// that message (selfchat.go).
	EchoOf string
	// CatchUp is news the network reported late (bridge.Inbound.CatchUp):
	// its event's arrival is catch_up.
	CatchUp bool
}

// news is what in says of its chat.
func (in *Inbound) news() chatNews {
	n := chatNews{opens: !in.Message.IsFromMe && !in.Screened, filter: in.Chat.Filter, filed: true}
	if !in.Message.IsFromMe {
		n.sender = in.Message.Sender
	}
	return n
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
	// Twin is true when the message (asked with MatchTwins) repeats a
	// stored one under another GUID: Message is the stored one, and
	// Duplicate is set too.
	Twin bool
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
		res, err = db.recordInbound(tx, line, in)
		return err
	})
	if err != nil {
		return InboundResult{}, fmt.Errorf("record inbound: %w", err)
	}
	return res, nil
}

// ImportHistory stores messages that are not news: those that were on the
// network before the line was connected, and old ones the network writes
// again. It writes them in few transactions, and without webhook events,
// since nothing new happened. Their IDs are given here (a message's ID
// says where it is stored: history.go); Message.ID is used only for one
// that cannot be stored compactly, and made when empty. GUIDs seen before
// are skipped, and so are twins of stored messages (Inbound.MatchTwins):
// it returns their GUIDs. A new chat's ID is made when Chat.ID is empty.
// The messages are the import's: each is given its ID and chat where it
// is, not copied.
func (db *DB) ImportHistory(ctx context.Context, lineID string, msgs []Inbound) (twins []string, err error) {
	return db.ImportHistoryPages(ctx, lineID, func(yield func([]Inbound, error) bool) {
		for len(msgs) > 0 {
			n := min(importTxSize, len(msgs))
			if !yield(msgs[:n], nil) {
				return
			}
			msgs = msgs[n:]
		}
	})
}

// Importing reports whether a history import is in progress, and a channel
// closed when one ends. A reader beside a first start's import (the search
// index) would take the cores it needs, and its read transactions would
// keep the import from reusing the pages it frees: on 1,000,000 messages
// (MessagesFirstStart) the import took 9.8–10.1 s instead of 8.2–9.0, at
// 308 bytes a message instead of 244.
func (db *DB) Importing() (bool, <-chan struct{}) {
	ended := db.importsEnded.wait() // before the count: an end between is told
	return db.imports.Load() > 0, ended
}

// importTxSize is how many messages an import stores in one transaction, at
// least: each transaction rewrites a page of every chat it adds to, and
// with 2,000 chats 10,000 messages brought each only five. Measured on
// 1,000,000 messages in 2,000 chats (MessagesFirstStart): the import's CPU
// 21.6 s at 10,000 messages, 17.6 s at 20,000, 16.4 s at 40,000. A
// transaction's writes are in memory until it commits (bbolt's nodes and
// page buffers, 30 MiB at 40,000), which the GC lets double: with the
// import's garbage cut, 40,000 took 10.5–11.3 s of CPU and an anonymous
// peak of 141–149 MiB, 30,000 10.7–11.6 s and 133–137 MiB (the goal is
// under 150).
const importTxSize = 30_000

// ImportHistoryPages is ImportHistory for pages that come as they are read
// (a first start's): a transaction takes whole pages until it holds
// importTxSize messages, and asks for the next page while it is open, so
// that the reader goes on reading while the pages before are stored, and
// no more than a page waits in memory. The first error of pages ends the
// import: what was committed before it stays.
func (db *DB) ImportHistoryPages(ctx context.Context, lineID string, pages iter.Seq2[[]Inbound, error]) (twins []string, err error) {
	line, ok := db.LineByID(lineID)
	if !ok {
		return nil, fmt.Errorf("import history: line %s: %w", lineID, ErrNotFound)
	}
	db.imports.Add(1)
	defer func() {
		db.imports.Add(-1)
		db.importsEnded.broadcast()
	}()
	next, stop := iter.Pull2(pages)
	defer stop()
	for done := false; !done; {
		db.journal.mu.Lock()
		var batchTwins []string
		var stored []importedChat
		err := db.bolt.Update(func(tx *bolt.Tx) error {
			h := db.newHistoryTx(tx)
			for n := 0; n < importTxSize; {
				page, err, ok := next()
				if !ok {
					done = true
					break
				}
				if err != nil {
					return err
				}
				keys := h.lookUp(page)
				for i := range page {
					twin, err := db.recordHistory(tx, line, &page[i], keys[i], h)
					if err != nil {
						return err
					}
					if twin {
						batchTwins = append(batchTwins, page[i].Message.GUID)
					}
				}
				n += len(page)
			}
			if err := h.flush(); err != nil {
				return err
			}
			stored = h.storedChats()
			return nil
		})
		if err == nil {
			db.rememberImportChats(stored)
		}
		full := db.journal.generations >= journalMergeAt
		db.journal.mu.Unlock()
		if err == nil && full {
			err = db.mergeGUIDJournal(ctx)
		}
		if err != nil {
			return twins, fmt.Errorf("import history: %w", err)
		}
		twins = append(twins, batchTwins...)
	}
	return twins, nil
}

// historyTx is one transaction of a history import. It holds its writes
// back and makes them at its end, each index in key order, and each chat
// once: a long history moves a chat's last_message_at thousands of times,
// and a batch's GUIDs (random) and message IDs (made in the same
// millisecond, random after it) come in no order, so that writing them as
// they come makes bbolt shift a page's elements on nearly every insert.
type historyTx struct {
	db *DB
	tx *bolt.Tx
	// stored are the batch's GUIDs that were stored before the
	// transaction, with their message IDs; added those it stored.
	stored map[string][]byte
	added  map[string]bool
	chats  map[string]*historyChat // by chatGUIDKey
	order  []*historyChat          // in the order first touched
	msgs   []*heldMessage          // not written yet (pointers: sorted three times)
}

// historyChat is a chat as stored, and as the transaction left it;
// recount is set when its read mark moved, so that its unread messages are
// counted once its messages are written. num is its number in history IDs,
// 0 until the first of its messages is put.
type historyChat struct {
	key      string // its chatGUIDKey
	saved, c Chat
	recount  bool
	num      uint32
}

// heldMessage is a message's entry in each index: its chat_messages key
// and value, its ID (nil for a history ID, which its key gives) and its
// GUID index key and value.
type heldMessage struct{ key, data, id, guid, idValue []byte }

// newHistoryTx starts a transaction of an import. The caller holds
// db.journal.mu.
func (db *DB) newHistoryTx(tx *bolt.Tx) *historyTx {
	return &historyTx{db: db, tx: tx, stored: map[string][]byte{}, added: map[string]bool{}, chats: map[string]*historyChat{}}
}

// lookUp looks the GUIDs of a page up, in key order (neighbours in the
// index), before its messages are recorded, and returns their index keys
// in the page's order.
func (h *historyTx) lookUp(page []Inbound) (keys [][]byte) {
	type guid struct{ key, raw []byte }
	guids := make([]guid, len(page))
	keys = make([][]byte, len(page))
	for i, in := range page {
		raw := []byte(in.Message.GUID)
		keys[i] = guidKey(raw)
		guids[i] = guid{keys[i], raw}
	}
	slices.SortFunc(guids, func(a, b guid) int { return bytes.Compare(a.key, b.key) })
	b := h.tx.Bucket(bktMessageGUIDs)
	for _, g := range guids {
		id := b.Get(g.key)
		if id == nil && h.db.mayBeJournaled(g.key) {
			id = lookupJournal(h.tx, g.key)
		}
		if id == nil && len(g.key) != len(g.raw) {
			id = b.Get(g.raw) // schema 1's string keys
		}
		if id != nil {
			h.stored[string(g.raw)] = idFromValue(id)
		}
	}
	return keys
}

// storedID is the ID of the message with guid, nil when there is none.
func (h *historyTx) storedID(guid string) ([]byte, error) {
	if !h.added[guid] {
		return h.stored[guid], nil
	}
	// The batch holds the GUID twice: the first one is read back.
	if err := h.flush(); err != nil {
		return nil, err
	}
	return lookupGUID(h.tx, []byte(guid)), nil
}

// chat finds or creates the chat of a message, as upsertChat does.
func (h *historyTx) chat(want Chat, news chatNews) (*historyChat, error) {
	key := string(chatGUIDKey(want.LineID, want.GUID))
	if hc, ok := h.chats[key]; ok {
		mergeChat(&hc.c, want, news)
		return hc, nil
	}
	c, err := h.db.importChat(h.tx, key, want, news)
	if err != nil {
		return nil, err
	}
	hc := &historyChat{key: key, saved: c, c: c}
	hc.saved.Participants = slices.Clone(c.Participants)
	h.chats[key] = hc
	h.order = append(h.order, hc)
	return hc, nil
}

// importedChat is a chat as a history import's last transaction stored
// it: its record, and the chat decoded from it.
type importedChat struct {
	key  string // its chatGUIDKey
	data []byte
	chat Chat
}

// maxImportChats bounds importChats: past it, the chats of older
// transactions are read again.
const maxImportChats = 50_000

// importChat is upsertChat for an import, which comes back to the same
// chats transaction after transaction (each of 40,000 messages brought
// 2,000 chats twenty each): a chat whose record is still the one the import
// stored last is not decoded again. Any other writer's change to it shows
// in its record, and it is then read as upsertChat reads it. The caller
// holds db.journal.mu.
func (db *DB) importChat(tx *bolt.Tx, key string, want Chat, news chatNews) (Chat, error) {
	known, ok := db.importChats[key]
	if !ok || !bytes.Equal(tx.Bucket(bktChats).Get([]byte(known.chat.ID)), known.data) {
		return upsertChat(tx, want, news)
	}
	c := known.chat
	c.Participants = slices.Clone(c.Participants)
	old := c
	if !mergeChat(&c, want, news) {
		return c, nil
	}
	return c, putChat(tx, &old, &c)
}

// storedChats are the transaction's chats as it stored them, for
// importChat, once it has committed. Called after flush.
func (h *historyTx) storedChats() []importedChat {
	b := h.tx.Bucket(bktChats)
	out := make([]importedChat, 0, len(h.order))
	for _, hc := range h.order {
		c := hc.c
		c.Participants = slices.Clone(c.Participants)
		out = append(out, importedChat{key: hc.key, data: bytes.Clone(b.Get([]byte(c.ID))), chat: c})
	}
	return out
}

// rememberImportChats keeps the chats a committed import transaction
// stored (see importChat). The caller holds db.journal.mu.
func (db *DB) rememberImportChats(chats []importedChat) {
	if db.importChats == nil || len(db.importChats)+len(chats) > maxImportChats {
		db.importChats = make(map[string]importedChat, len(chats))
	}
	for _, c := range chats {
		db.importChats[c.key] = c
	}
}

// put stores a new message of chat hc, as putMessage does, and holds its
// writes back; guid is its GUID's index key (lookUp's).
func (h *historyTx) put(hc *historyChat, m *Message, guid []byte) error {
	seq, err := h.tx.Bucket(bktChatMessages).NextSequence()
	if err != nil {
		return err
	}
	held := &heldMessage{key: join([]byte(m.ChatID), i64(m.SentAt), u64(seq)), guid: guid}
	if hc.num == 0 && m.SentAt >= 0 && m.SentAt <= maxHistoryTime && seq <= maxHistorySeq {
		switch hc.num, err = historyChatNum(h.tx, hc.c.ID); {
		case errors.Is(err, errTooManyChats):
			hc.num = 0 // stored as JSON
		case err != nil:
			return err
		}
	}
	if hc.num != 0 && m.SentAt >= 0 && m.SentAt <= maxHistoryTime && seq <= maxHistorySeq {
		// Compact, its ID given by its key.
		b := historyIDBytes(m.SentAt, hc.num, seq)
		m.ID = "msg_" + idEncoding.EncodeToString(b[:])
		held.data = encodeHistory(m, &hc.c)
		held.idValue = b[:]
	} else {
		if m.ID == "" {
			m.ID = NewID("msg_")
		}
		if held.data, err = json.Marshal(m); err != nil {
			return err
		}
		held.id = []byte(m.ID)
		held.idValue = idValue(held.id)
	}
	h.msgs = append(h.msgs, held)
	h.added[m.GUID] = true
	hc.c.LastMessageAt = max(hc.c.LastMessageAt, m.SentAt)
	return nil
}

// flush makes the writes held back.
func (h *historyTx) flush() error {
	put := func(b *bolt.Bucket, cmp func(a, b *heldMessage) int, kv func(m *heldMessage) (k, v []byte)) error {
		slices.SortFunc(h.msgs, cmp)
		for _, m := range h.msgs {
			if err := b.Put(kv(m)); err != nil {
				return err
			}
		}
		return nil
	}
	err := put(appendOnly(h.tx, bktChatMessages), func(a, b *heldMessage) int { return bytes.Compare(a.key, b.key) },
		func(m *heldMessage) ([]byte, []byte) { return m.key, m.data })
	if err == nil {
		err = noteHistory(h.tx, h.msgs) // sorted by key: a chat's together
	}
	if err == nil {
		slices.SortFunc(h.msgs, func(a, b *heldMessage) int { return bytes.Compare(a.id, b.id) })
		b := appendOnly(h.tx, bktMessages)
		for _, m := range h.msgs {
			if m.id == nil {
				continue // a history ID: its key says where it is
			}
			if err = b.Put(m.id, m.key); err != nil {
				break
			}
		}
	}
	if err == nil {
		slices.SortFunc(h.msgs, func(a, b *heldMessage) int { return bytes.Compare(a.guid, b.guid) })
		err = h.db.journalGUIDs(h.tx, h.msgs)
	}
	if err != nil {
		return err
	}
	h.msgs = h.msgs[:0]
	for _, hc := range h.order {
		s, c := &hc.saved, &hc.c
		if hc.recount {
			if err := countUnread(h.tx, c); err != nil {
				return err
			}
			hc.recount = false
		}
		if c.same(s) {
			continue
		}
		if err := putChat(h.tx, s, c); err != nil {
			return err
		}
		*s = *c
		s.Participants = slices.Clone(c.Participants)
	}
	return nil
}

// recordInbound stores a live message with its chat and its webhook event
// at once.
func (db *DB) recordInbound(tx *bolt.Tx, line Line, in Inbound) (res InboundResult, err error) {
	if id := lookupGUID(tx, []byte(in.Message.GUID)); id != nil {
		res.Duplicate = true
		if err := getMessage(tx, id, &res.Message); err != nil {
			return res, err
		}
		if res.Transcribed, err = fillAttachments(tx, &res.Message, in.Message.Attachments); err != nil {
			return res, err
		}
		return res, getJSON(tx.Bucket(bktChats), []byte(res.Message.ChatID), &res.Chat)
	}
	if found, err := selfEcho(tx, line, in, &res.Message); err != nil || found {
		res.Duplicate = found
		if err == nil && found {
			err = getJSON(tx.Bucket(bktChats), []byte(res.Message.ChatID), &res.Chat)
		}
		return res, err
	}
	if in.MatchTwins {
		if found, err := db.twinOf(tx, nil, in); err != nil || found != nil {
			if found != nil {
				// The twin's GUID names the stored message from now on:
				// what the network later says of it lands there.
				res.Duplicate, res.Twin = true, true
				if err = putGUID(tx, in.Message.GUID, string(found)); err == nil {
					err = getMessage(tx, found, &res.Message)
				}
			}
			return res, err
		}
	}
	c, err := upsertChat(tx, in.Chat, in.news())
	if err != nil {
		return res, err
	}
	m := in.Message
	m.ChatID, m.LineID = c.ID, c.LineID
	if m.Attachments == nil {
		m.Attachments = []Attachment{}
	}
	saved := c
	recount := !m.IsFromMe && readByLine(&c, in.ReadByLineAt)
	if !m.IsFromMe && !recount && m.SentAt > c.ReadAt {
		c.UnreadCount++
	}
	if err := putMessage(tx, &saved, &c, &m); err != nil {
		return res, err
	}
	if recount {
		if err := countUnread(tx, &c); err != nil {
			return res, err
		}
	}
	if !c.same(&saved) {
		if err := putChat(tx, &saved, &c); err != nil {
			return res, err
		}
	}
	if err := guardInbound(tx, m, nowMillis()); err != nil {
		return res, err
	}
	// Activated first, so that the code's own message reaches the webhooks
	// of the sandbox's owner.
	if res.SandboxActivated, err = db.sandboxCode(tx, line, &m); err != nil {
		return res, err
	}
	self := line.IsSelfChat(c)
	event := api.EventMessageReceived
	switch {
	case self:
		event = api.EventMessageSelf
	case m.IsFromMe:
		event = api.EventMessageSent // sent from the owner's other devices
	}
	// A reply to an approval prompt answers it: it is for Blueline, not for
	// the agents.
	answered := false
	if self {
		if answered, err = db.replyAnswer(tx, m); err != nil {
			return res, err
		}
	}
	subject := EventSubject{Message: &m}
	if in.CatchUp {
		subject.Arrival = api.ArrivalCatchUp
	}
	if !answered {
		if err := db.queueEvent(tx, event, c.LineID, c.ID, subject); err != nil {
			return res, err
		}
	}
	if m.IsFromMe && !self {
		if err := db.takeOver(tx, line, c, m); err != nil {
			return res, err
		}
	}
	if in.Keyword != "" && !m.IsFromMe && !c.IsGroup && !self {
		if err := db.applyKeyword(tx, line, c, in.Keyword, m); err != nil {
			return res, err
		}
	}
	if m.IsFromMe && m.ReadAt != 0 && !c.IsGroup {
		// Read before it was reported: the contact's receipt, with its
		// event.
		if _, err := db.contactRead(tx, c, c.Identifier, m.ReadAt); err != nil {
			return res, err
		}
	}
	res.Message, res.Chat = m, c
	return res, nil
}

// recordHistory stores a message of an import (in h), without events, and
// reports whether it was the twin of a stored message. It is what
// recordInbound does, less the events, and with nothing copied that the
// import does not keep: a copy of the message, of its chat and of
// recordInbound's result went to the heap, 900 bytes of garbage a message
// on a first start's million. The message is stored from in.Message; guid
// is its GUID's index key.
func (db *DB) recordHistory(tx *bolt.Tx, line Line, in *Inbound, guid []byte, h *historyTx) (twin bool, err error) {
	id, err := h.storedID(in.Message.GUID)
	if err != nil {
		return false, err
	}
	if id != nil {
		var stored Message
		if err := getMessage(tx, id, &stored); err != nil {
			return false, err
		}
		_, err := fillAttachments(tx, &stored, in.Message.Attachments)
		return false, err
	}
	if in.MatchTwins {
		found, err := db.twinOf(tx, h, *in)
		if err != nil {
			return false, err
		}
		if found != nil {
			// As recordInbound's: the twin's GUID names the stored message.
			return true, putGUID(tx, in.Message.GUID, string(found))
		}
	}
	hc, err := h.chat(in.Chat, in.news())
	if err != nil {
		return false, err
	}
	m := &in.Message
	m.ChatID, m.LineID = hc.c.ID, hc.c.LineID
	if m.Attachments == nil {
		m.Attachments = []Attachment{}
	}
	if err := h.put(hc, m, guid); err != nil {
		return false, err
	}
	c := &hc.c
	if !m.IsFromMe {
		if readByLine(c, in.ReadByLineAt) {
			hc.recount = true
		} else if m.SentAt > c.ReadAt && !hc.recount {
			c.UnreadCount++
		}
	}
	if _, err := db.sandboxCode(tx, line, m); err != nil {
		return false, err
	}
	if m.IsFromMe && m.ReadAt != 0 && !c.IsGroup {
		// Read before it was reported: the contact's receipt.
		if _, _, err := putReceipt(tx, c.ID, c.Identifier, m.ReadAt, m.SyncedAt); err != nil {
			return false, err
		}
	}
	return false, nil
}

// sandboxCode activates the sandbox when m, on the sandbox line, is a
// contact's message holding its code.
func (db *DB) sandboxCode(tx *bolt.Tx, line Line, m *Message) (bool, error) {
	if !line.IsSandbox || m.IsFromMe || m.Text == nil {
		return false, nil
	}
	return db.activateSandbox(tx, *m.Text, m.Sender)
}

// fillAttachments completes the attachments of a stored message m from a
// new report of it (see fillFiles), stores m if that changed it, and reports
// whether a transcription was filled in.
func fillAttachments(tx *bolt.Tx, m *Message, report []Attachment) (transcribed bool, err error) {
	changed, transcribed := fillFiles(m, report)
	if !changed {
		return false, nil
	}
	key := messageKey(tx, []byte(m.ID))
	if key == nil {
		return false, fmt.Errorf("message %s: %w", m.ID, ErrNotFound)
	}
	return transcribed, storeMessage(tx, key, m)
}

// fillFiles completes the attachments of message m from a new report of
// it: a file that had not arrived (its copy in the file store), a
// transcription that was missing. It reports whether that changed m, and
// whether a transcription was filled in. An unsent message stays without
// attachments.
func fillFiles(m *Message, report []Attachment) (changed, transcribed bool) {
	if m.UnsentAt != 0 {
		return false, false
	}
	for i := range min(len(m.Attachments), len(report)) {
		a, r := &m.Attachments[i], report[i]
		if a.FileID == "" && r.FileID != "" {
			a.FileID, a.Filename, a.MimeType, a.Size = r.FileID, r.Filename, r.MimeType, r.Size
			changed = true
		}
		if a.Transcription == nil && r.Transcription != nil {
			a.Transcription = r.Transcription
			changed, transcribed = true, true
		}
	}
	return changed, transcribed
}

// upsertChat finds the chat by its network GUID or creates it from want,
// with a new ID when want has none.
func upsertChat(tx *bolt.Tx, want Chat, news chatNews) (Chat, error) {
	var c Chat
	id := tx.Bucket(bktChatGUIDs).Get(chatGUIDKey(want.LineID, want.GUID))
	if id == nil {
		members := slices.Clone(want.Participants)
		if news.sender != "" {
			members = append(members, news.sender)
		}
		c = want
		if c.ID == "" {
			c.ID = NewID("cht_")
		}
		c.CreatedAt = nowMillis()
		c.HasReceivedInbound = news.opens
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
	if !mergeChat(&c, want, news) {
		return c, nil
	}
	return c, putChat(tx, &old, &c)
}

// mergeChat brings a stored chat c up to date with what a message says of
// it, and reports whether that changed c: a first message the line may
// answer; the chat moved into or out of a filter; a group's new members
// and new name.
func mergeChat(c *Chat, want Chat, news chatNews) (changed bool) {
	if news.opens && !c.HasReceivedInbound {
		c.HasReceivedInbound, changed = true, true
	}
	if news.filed && news.filter != c.Filter {
		c.Filter, changed = news.filter, true
	}
	if !c.IsGroup {
		return changed
	}
	add := func(p string) {
		if p != "" && !slices.Contains(c.Participants, p) {
			c.Participants = append(c.Participants, p)
			changed = true
		}
	}
	for _, p := range want.Participants {
		add(p)
	}
	add(news.sender)
	if want.Name != "" && want.Name != c.Name {
		c.Name, changed = want.Name, true
	}
	return changed
}
