// Package chatdbtest builds a chat.db that behaves like the one macOS
// Messages writes, for tests that run anywhere (no Mac needed).
//
// The fixture writes through its own read-write connection in WAL mode, the
// way Messages does, while the code under test reads the file through a
// separate read-only one. Every Insert is one transaction holding the message
// row, its joins and its attachments, as Messages commits them.
package chatdbtest

import (
	"crypto/rand"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"howett.net/plist"
	_ "modernc.org/sqlite" // the "sqlite" database/sql driver

	"github.com/blueline-app/blueline/bridge/messages/typedstream"
)

// Fixture is a chat.db under construction. Its methods fail the test on
// any error. It is not safe for concurrent use.
type Fixture struct {
	t    testing.TB
	path string
	db   *sql.DB
	tx   *sql.Tx // set during Batch
	n    int     // group chats created, for their identifiers
}

// New creates dir/chat.db with the Messages schema in WAL mode and returns
// a fixture writing to it. The connection is closed when the test ends.
func New(t testing.TB, dir string) *Fixture {
	t.Helper()
	path := filepath.Join(dir, "chat.db")
	db, err := sql.Open("sqlite", dsn(path))
	if err != nil {
		t.Fatalf("chatdbtest: open %s: %v", path, err)
	}
	db.SetMaxOpenConns(1) // one writer connection, like Messages
	t.Cleanup(func() { db.Close() })
	if _, err := db.Exec(Schema); err != nil {
		t.Fatalf("chatdbtest: create schema: %v", err)
	}
	return &Fixture{t: t, path: path, db: db}
}

// dsn opens path in WAL mode. synchronous=NORMAL is what WAL databases
// commonly run with; it also keeps fixtures of 100,000 rows quick to build.
func dsn(path string) string {
	u := url.URL{Path: path}
	return "file:" + u.EscapedPath() + "?_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=busy_timeout(5000)"
}

// Path returns the database file's path.
func (f *Fixture) Path() string { return f.path }

// execer is what *sql.DB and *sql.Tx both offer.
type execer interface {
	Exec(query string, args ...any) (sql.Result, error)
	Query(query string, args ...any) (*sql.Rows, error)
	QueryRow(query string, args ...any) *sql.Row
}

func (f *Fixture) conn() execer {
	if f.tx != nil {
		return f.tx
	}
	return f.db
}

// Exec runs a statement on the fixture's connection, for what the other
// methods do not cover (an odd date, a column Messages sets later, …).
func (f *Fixture) Exec(query string, args ...any) {
	f.t.Helper()
	if _, err := f.conn().Exec(query, args...); err != nil {
		f.t.Fatalf("chatdbtest: exec %q: %v", query, err)
	}
}

// QueryRow runs a query on the fixture's connection, for tests that check
// what the fixture wrote.
func (f *Fixture) QueryRow(query string, args ...any) *sql.Row {
	return f.conn().QueryRow(query, args...)
}

// Batch runs fn with every write in one transaction, to build large
// fixtures quickly.
func (f *Fixture) Batch(fn func()) {
	f.t.Helper()
	if f.tx != nil {
		fn()
		return
	}
	tx, err := f.db.Begin()
	if err != nil {
		f.t.Fatalf("chatdbtest: begin: %v", err)
	}
	f.tx = tx
	defer func() {
		f.tx = nil
		tx.Rollback()
	}()
	fn()
	if err := tx.Commit(); err != nil {
		f.t.Fatalf("chatdbtest: commit: %v", err)
	}
}

// inTx runs fn in the current batch, or in a transaction of its own.
func (f *Fixture) inTx(fn func(c execer)) {
	f.t.Helper()
	if f.tx != nil {
		fn(f.tx)
		return
	}
	f.Batch(func() { fn(f.tx) })
}

// serviceName spells a service the way Messages stores it ("iMessage",
// "SMS", "RCS"); other spellings are kept.
func serviceName(s string) string {
	switch strings.ToLower(s) {
	case "", "imessage":
		return "iMessage"
	case "sms":
		return "SMS"
	case "rcs":
		return "RCS"
	}
	return s
}

// Handle returns the ROWID of the handle for address id on service,
// creating it when needed.
func (f *Fixture) Handle(id, service string) int64 {
	f.t.Helper()
	return f.handle(f.conn(), id, service)
}

func (f *Fixture) handle(c execer, id, service string) int64 {
	f.t.Helper()
	service = serviceName(service)
	var rowID int64
	err := c.QueryRow("SELECT ROWID FROM handle WHERE id = ? AND service = ?", id, service).Scan(&rowID)
	if err == nil {
		return rowID
	}
	if err != sql.ErrNoRows {
		f.t.Fatalf("chatdbtest: find handle %s: %v", id, err)
	}
	res, err := c.Exec("INSERT INTO handle (id, country, service, uncanonicalized_id) VALUES (?, 'us', ?, ?)", id, service, id)
	if err != nil {
		f.t.Fatalf("chatdbtest: insert handle %s: %v", id, err)
	}
	rowID, _ = res.LastInsertId()
	return rowID
}

// ChatRef identifies a chat the fixture created.
type ChatRef struct {
	RowID      int64
	GUID       string
	Identifier string
	Service    string // as Messages spells it: "iMessage", "SMS"
}

// DirectChat returns the one-to-one chat with address on service
// ("iMessage;-;+15551234567", style 45), creating it and its member when
// needed.
func (f *Fixture) DirectChat(service, address string) ChatRef {
	f.t.Helper()
	service = serviceName(service)
	ref := ChatRef{GUID: service + ";-;" + address, Identifier: address, Service: service}
	f.inTx(func(c execer) {
		ref.RowID = f.chat(c, ref, 45, "")
		f.join(c, ref.RowID, f.handle(c, address, service))
	})
	return ref
}

// GroupChat creates a group chat ("iMessage;+;chat<18 digits>", style 43)
// named name ("" for none) with the given member addresses.
func (f *Fixture) GroupChat(service, name string, members ...string) ChatRef {
	f.t.Helper()
	service = serviceName(service)
	f.n++
	ident := fmt.Sprintf("chat%018d", 512345678901234567+int64(f.n))
	ref := ChatRef{GUID: service + ";+;" + ident, Identifier: ident, Service: service}
	f.inTx(func(c execer) {
		ref.RowID = f.chat(c, ref, 43, name)
		for _, m := range members {
			f.join(c, ref.RowID, f.handle(c, m, service))
		}
	})
	return ref
}

// ChatWithGUID creates a chat stored under exactly guid (macOS 26 writes
// "any;-;+1555…" and "any;+;chat…") with service_name serviceName and the
// given members; the chat's identifier is the GUID's last part.
func (f *Fixture) ChatWithGUID(guid, serviceName string, members ...string) ChatRef {
	f.t.Helper()
	parts := strings.SplitN(guid, ";", 3)
	if len(parts) != 3 {
		f.t.Fatalf("chatdbtest: chat GUID %q is not service;style;identifier", guid)
	}
	ref := ChatRef{GUID: guid, Identifier: parts[2], Service: serviceName}
	style := 45
	if parts[1] == "+" {
		style = 43
	}
	f.inTx(func(c execer) {
		ref.RowID = f.chat(c, ref, style, "")
		for _, m := range members {
			f.join(c, ref.RowID, f.handle(c, m, serviceName))
		}
	})
	return ref
}

func (f *Fixture) chat(c execer, ref ChatRef, style int, name string) int64 {
	f.t.Helper()
	var rowID int64
	if err := c.QueryRow("SELECT ROWID FROM chat WHERE guid = ?", ref.GUID).Scan(&rowID); err == nil {
		return rowID
	}
	var room any
	if style == 43 {
		room = ref.Identifier
	}
	res, err := c.Exec(`INSERT INTO chat (guid, style, state, account_id, chat_identifier, service_name, room_name, display_name)
		VALUES (?, ?, 3, ?, ?, ?, ?, ?)`, ref.GUID, style, newGUID(), ref.Identifier, ref.Service, room, nullIfEmpty(name))
	if err != nil {
		f.t.Fatalf("chatdbtest: insert chat %s: %v", ref.GUID, err)
	}
	rowID, _ = res.LastInsertId()
	return rowID
}

func (f *Fixture) join(c execer, chatID, handleID int64) {
	f.t.Helper()
	if _, err := c.Exec("INSERT OR IGNORE INTO chat_handle_join (chat_id, handle_id) VALUES (?, ?)", chatID, handleID); err != nil {
		f.t.Fatalf("chatdbtest: join chat %d handle %d: %v", chatID, handleID, err)
	}
}

// Msg describes a message row to insert.
type Msg struct {
	// Chat is the chat the row is filed under; the zero ChatRef files it
	// under none.
	Chat ChatRef
	// GUID is the message GUID; "" gives a new upper-case UUID.
	GUID string
	// From is the sender's address; "" makes the row is_from_me.
	From string
	// Text is the body. The attachments' U+FFFC placeholders go before
	// it, unless it holds one for each attachment itself: then the N-th
	// U+FFFC in it is the N-th attachment, where the file sits in the text
	// (a Genmoji, see FileSpec.EmojiDescription). For a voice memo
	// (IsAudioMessage) it is the transcription, stored where macOS stores
	// it (see SetText).
	Text string
	// Ventura leaves the text column NULL, the body only in attributedBody.
	Ventura bool
	// Date is when the message was sent; zero means now.
	Date time.Time
	// IsSent marks a row of ours as sent (is_sent = 1; delivery comes
	// later, see MarkDelivered). Inbound rows always have is_sent = 0, as
	// Messages writes them.
	IsSent         bool
	Error          int
	IsAudioMessage bool
	// ReactionTo is the GUID of the message a tapback targets, stored as
	// "p:0/<guid>"; a value already starting with "p:" or "bp:" is kept.
	ReactionTo   string
	ReactionType int // 2000-2007 added, 3000-3007 removed
	// Emoji is the emoji of an emoji tapback (2006, 3006).
	Emoji string
	// ReplyTo is the GUID of the message this one replies to inline.
	ReplyTo string
	// Follows is the message Messages files this row after (reply_to_guid):
	// on the received copy of a message sent to oneself, that message.
	Follows string
	// HandleOf is the other party's address on a row of ours. Messages
	// sets it on one-to-one rows, whatever chat they are filed under (or
	// none): it is taken from the chat when empty.
	HandleOf    string
	Attachments []FileSpec
	// Read is, for a contact's row, when the owner read it (is_read,
	// date_read); zero leaves it unread.
	Read time.Time
	// Scheduled makes a row of ours a Send Later message (schedule_type
	// 2), not sent until MarkSent; Date is when it is due.
	Scheduled bool
	// Spam is Messages' verdict on the row (is_spam).
	Spam bool
	// CallerID is the owner's address the row went out from or came to
	// (destination_caller_id); "" leaves it NULL.
	CallerID string
	// FilesPending flags the row as carrying files (cache_has_attachments)
	// before any attachment row is written: see AddAttachment.
	FilesPending bool
	// ItemType, GroupAction, GroupTitle and Other (the address of the
	// member concerned, other_handle) make a group change row.
	ItemType    int
	GroupAction int
	GroupTitle  string
	Other       string
}

// FileSpec describes an attachment.
type FileSpec struct {
	// Path is the file's path as Messages stores it (it may start with
	// "~"); "" leaves filename NULL, a transfer that has not finished.
	Path         string
	MimeType     string
	TransferName string
	UTI          string
	TotalBytes   int64
	// BodyOnly leaves out the join row: the attachment is named only in
	// the message's attributedBody, as macOS 15 sometimes writes it.
	BodyOnly bool
	// EmojiDescription makes the file a Genmoji or inline sticker (macOS
	// 15.1 and later): its emoji_image_short_description, such as "smiling
	// frog", with a content identifier of its own.
	EmojiDescription string
}

// Insert adds a message with its chat join and attachments in one
// transaction and returns its ROWID and GUID.
//
// A voice memo without attachments gets the .caf file Messages records.
// Its body is the U+FFFC placeholder; a Text goes into the attachment's
// user_info as "audio-transcription", as recent macOS writes it.
func (f *Fixture) Insert(m Msg) (rowID int64, guid string) {
	f.t.Helper()
	guid = m.GUID
	if guid == "" {
		guid = newGUID()
	}
	date := m.Date
	if date.IsZero() {
		date = time.Now()
	}
	fromMe := m.From == ""
	atts := m.Attachments
	if m.IsAudioMessage && len(atts) == 0 {
		atts = []FileSpec{{
			Path:         "~/Library/Messages/Attachments/" + guid[:2] + "/" + guid[2:4] + "/" + guid + "/Audio Message.caf",
			MimeType:     "audio/x-caf",
			TransferName: "Audio Message.caf",
			UTI:          "com.apple.coreaudio-format",
			TotalBytes:   24576,
		}}
	}

	transcription, text := "", m.Text
	if m.IsAudioMessage {
		transcription, text = m.Text, ""
	}
	// Each attachment is a U+FFFC placeholder in the body carrying its
	// transfer GUID: where the text has it, or before the text.
	attGUIDs := make([]string, len(atts))
	for i := range atts {
		attGUIDs[i] = "at_0_" + newGUID()
	}
	var parts []typedstream.Part
	bodyText := strings.Repeat("\uFFFC", len(atts)) + text
	if len(atts) > 0 && strings.Count(text, "\uFFFC") == len(atts) {
		bodyText = text
		for i, seg := range strings.Split(text, "\uFFFC") {
			if i > 0 {
				parts = append(parts, typedstream.Part{FileTransferGUID: attGUIDs[i-1]})
			}
			if seg != "" {
				parts = append(parts, typedstream.Part{Text: seg})
			}
		}
	} else {
		for _, g := range attGUIDs {
			parts = append(parts, typedstream.Part{FileTransferGUID: g})
		}
		if text != "" {
			parts = append(parts, typedstream.Part{Text: text})
		}
	}
	var textCol, attributed any
	if bodyText != "" {
		attributed = typedstream.EncodeParts(parts...)
		if !m.Ventura {
			textCol = bodyText
		}
	}

	var assoc any
	if m.ReactionTo != "" {
		assoc = m.ReactionTo
		if !strings.HasPrefix(m.ReactionTo, "p:") && !strings.HasPrefix(m.ReactionTo, "bp:") {
			assoc = "p:0/" + m.ReactionTo
		}
	}
	var threadPart any
	if m.ReplyTo != "" {
		threadPart = "0:0:1"
	}

	f.inTx(func(c execer) {
		var handleID int64
		switch {
		case !fromMe:
			handleID = f.handle(c, m.From, m.Chat.Service)
		case m.HandleOf != "":
			handleID = f.handle(c, m.HandleOf, m.Chat.Service)
		case strings.Contains(m.Chat.GUID, ";-;"):
			// In a one-to-one chat Messages sets the other party even on
			// our own rows.
			handleID = f.handle(c, m.Chat.Identifier, m.Chat.Service)
		}
		// An inbound row is delivered; a row of ours is sent first and
		// delivered later (an SMS counts as delivered once sent, with no
		// date).
		sent, delivered := 0, 1
		if fromMe {
			delivered = 0
			if m.IsSent {
				sent, delivered = 1, b2i(serviceName(m.Chat.Service) == "SMS")
			}
		}
		var other int64
		if m.Other != "" {
			other = f.handle(c, m.Other, m.Chat.Service)
		}
		res, err := c.Exec(`INSERT INTO message (guid, text, attributedBody, handle_id, service, account, error, date,
			date_delivered, date_read, is_from_me, is_sent, is_delivered, is_finished, is_audio_message, cache_has_attachments,
			item_type, group_action_type, group_title, other_handle, associated_message_guid, associated_message_type,
			associated_message_emoji, thread_originator_guid, thread_originator_part, part_count)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0, 0, ?, ?, ?, 1, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			guid, textCol, attributed, handleID, serviceName(m.Chat.Service), "E:me@example.com", m.Error, appleNanos(date),
			b2i(fromMe), sent, delivered, b2i(m.IsAudioMessage), b2i(len(atts) > 0),
			m.ItemType, m.GroupAction, nullIfEmpty(m.GroupTitle), other, assoc, m.ReactionType, nullIfEmpty(m.Emoji),
			nullIfEmpty(m.ReplyTo), threadPart, len(parts))
		if err != nil {
			f.t.Fatalf("chatdbtest: insert message: %v", err)
		}
		rowID, _ = res.LastInsertId()
		if m.CallerID != "" {
			if _, err := c.Exec("UPDATE message SET destination_caller_id = ? WHERE ROWID = ?", m.CallerID, rowID); err != nil {
				f.t.Fatalf("chatdbtest: set the caller ID: %v", err)
			}
		}
		if m.Follows != "" {
			if _, err := c.Exec("UPDATE message SET reply_to_guid = ? WHERE ROWID = ?", m.Follows, rowID); err != nil {
				f.t.Fatalf("chatdbtest: set reply_to_guid: %v", err)
			}
		}
		if !m.Read.IsZero() || m.Scheduled || m.Spam || m.FilesPending {
			var scheduleType, scheduleState int
			if m.Scheduled {
				scheduleType, scheduleState = 2, 1
			}
			var readAt int64
			if !m.Read.IsZero() {
				readAt = appleNanos(m.Read)
			}
			if _, err := c.Exec(`UPDATE message SET is_read = ?, date_read = ?, schedule_type = ?, schedule_state = ?, is_spam = ?,
				cache_has_attachments = MAX(cache_has_attachments, ?) WHERE ROWID = ?`,
				b2i(readAt != 0), readAt, scheduleType, scheduleState, b2i(m.Spam), b2i(m.FilesPending), rowID); err != nil {
				f.t.Fatalf("chatdbtest: set the message's state: %v", err)
			}
		}
		if m.Chat.RowID != 0 {
			if _, err := c.Exec("INSERT INTO chat_message_join (chat_id, message_id, message_date) VALUES (?, ?, ?)",
				m.Chat.RowID, rowID, appleNanos(date)); err != nil {
				f.t.Fatalf("chatdbtest: join message to chat: %v", err)
			}
		}
		for i, a := range atts {
			var info any
			if transcription != "" {
				info = f.transcriptionPlist(transcription)
			}
			state := 5 // finished
			if a.Path == "" {
				state = 0
			}
			var emojiID any
			if a.EmojiDescription != "" {
				emojiID = newGUID()
			}
			res, err := c.Exec(`INSERT INTO attachment (guid, original_guid, created_date, filename, uti, mime_type,
				transfer_state, is_outgoing, user_info, transfer_name, total_bytes,
				emoji_image_short_description, emoji_image_content_identifier)
				VALUES (?1, ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)`,
				attGUIDs[i], date.Unix()-978307200, nullIfEmpty(a.Path), nullIfEmpty(a.UTI), nullIfEmpty(a.MimeType),
				state, b2i(fromMe), info, nullIfEmpty(a.TransferName), a.TotalBytes,
				nullIfEmpty(a.EmojiDescription), emojiID)
			if err != nil {
				f.t.Fatalf("chatdbtest: insert attachment: %v", err)
			}
			attID, _ := res.LastInsertId()
			if a.BodyOnly {
				continue
			}
			if _, err := c.Exec("INSERT INTO message_attachment_join (message_id, attachment_id) VALUES (?, ?)", rowID, attID); err != nil {
				f.t.Fatalf("chatdbtest: join attachment: %v", err)
			}
		}
	})
	return rowID, guid
}

// AddToChat also files an existing message under another chat (a message
// can sit in several).
func (f *Fixture) AddToChat(guid string, chat ChatRef) {
	f.t.Helper()
	f.Exec(`INSERT INTO chat_message_join (chat_id, message_id, message_date)
		SELECT ?, ROWID, date FROM message WHERE guid = ?`, chat.RowID, guid)
}

// update runs an UPDATE of the message with guid and fails the test when
// there is no such message.
func (f *Fixture) update(guid, set string, args ...any) {
	f.t.Helper()
	res, err := f.conn().Exec("UPDATE message SET "+set+" WHERE guid = ?", append(args, guid)...)
	if err != nil {
		f.t.Fatalf("chatdbtest: update message %s: %v", guid, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		f.t.Fatalf("chatdbtest: no message %s", guid)
	}
}

// MarkSent turns an outgoing row sent.
func (f *Fixture) MarkSent(guid string) {
	f.t.Helper()
	f.update(guid, "is_sent = 1")
}

// MarkDelivered records that an outgoing row reached the contact's device.
func (f *Fixture) MarkDelivered(guid string, at time.Time) {
	f.t.Helper()
	f.update(guid, "is_delivered = 1, date_delivered = ?", appleNanos(at))
}

// MarkError sets the row's error code (a failed send).
func (f *Fixture) MarkError(guid string, code int) {
	f.t.Helper()
	f.update(guid, "error = ?", code)
}

// MarkRead sets the row's read date.
func (f *Fixture) MarkRead(guid string, at time.Time) {
	f.t.Helper()
	f.update(guid, "is_read = 1, date_read = ?", appleNanos(at))
}

// AddAttachment writes an attachment of a message after the message row,
// as Messages may: the attachment row and its join.
func (f *Fixture) AddAttachment(guid string, a FileSpec) {
	f.t.Helper()
	f.inTx(func(c execer) {
		var rowID int64
		var date int64
		var fromMe int
		if err := c.QueryRow("SELECT ROWID, date, is_from_me FROM message WHERE guid = ?", guid).Scan(&rowID, &date, &fromMe); err != nil {
			f.t.Fatalf("chatdbtest: find message %s: %v", guid, err)
		}
		attGUID := "at_0_" + newGUID()
		state := 5
		if a.Path == "" {
			state = 0
		}
		res, err := c.Exec(`INSERT INTO attachment (guid, original_guid, created_date, filename, uti, mime_type, transfer_state,
			is_outgoing, transfer_name, total_bytes) VALUES (?1, ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)`,
			attGUID, AppleTime(date).Unix()-978307200, nullIfEmpty(a.Path), nullIfEmpty(a.UTI), nullIfEmpty(a.MimeType), state,
			fromMe, nullIfEmpty(a.TransferName), a.TotalBytes)
		if err != nil {
			f.t.Fatalf("chatdbtest: insert attachment: %v", err)
		}
		attID, _ := res.LastInsertId()
		if _, err := c.Exec("INSERT INTO message_attachment_join (message_id, attachment_id) VALUES (?, ?)", rowID, attID); err != nil {
			f.t.Fatalf("chatdbtest: join attachment: %v", err)
		}
		if _, err := c.Exec("UPDATE message SET cache_has_attachments = 1 WHERE ROWID = ?", rowID); err != nil {
			f.t.Fatalf("chatdbtest: flag attachment: %v", err)
		}
	})
}

// SetFilter files a chat the way Messages does: is_filtered (0 known
// sender, 1 unknown sender, 2 junk, 3 promotions, 4 transactions, …),
// is_blackholed and is_pending_review.
func (f *Fixture) SetFilter(chat ChatRef, filtered int, blackholed, pendingReview bool) {
	f.t.Helper()
	f.Exec("UPDATE chat SET is_filtered = ?, is_blackholed = ?, is_pending_review = ? WHERE ROWID = ?",
		filtered, b2i(blackholed), b2i(pendingReview), chat.RowID)
}

// Replace puts another database at the fixture's path, as a Time Machine
// or iCloud restore, a copy from another Mac or Messages rebuilding it
// does: build fills a new database written elsewhere, which is then
// renamed over chat.db (its write-ahead log gone). The fixture writes to
// the new file from then on.
func (f *Fixture) Replace(build func(nf *Fixture)) {
	f.t.Helper()
	nf := New(f.t, f.t.TempDir())
	build(nf)
	nf.Checkpoint()
	if err := nf.db.Close(); err != nil {
		f.t.Fatalf("chatdbtest: close the new database: %v", err)
	}
	if err := f.db.Close(); err != nil {
		f.t.Fatalf("chatdbtest: close: %v", err)
	}
	for _, suffix := range []string{"-wal", "-shm"} {
		if err := os.Remove(f.path + suffix); err != nil && !os.IsNotExist(err) {
			f.t.Fatalf("chatdbtest: %v", err)
		}
	}
	if err := os.Rename(nf.path, f.path); err != nil {
		f.t.Fatalf("chatdbtest: put the new database in place: %v", err)
	}
	f.n = max(f.n, nf.n)
	f.Reopen()
}

// MarkUnread clears the row's read state.
func (f *Fixture) MarkUnread(guid string) {
	f.t.Helper()
	f.update(guid, "is_read = 0, date_read = 0")
}

// SetText replaces a row's body. For a voice memo it sets the
// transcription, the way macOS adds it after the row: in the user_info of
// the memo's attachment. For other rows it rewrites text and
// attributedBody (text stays NULL on a Ventura-style row).
func (f *Fixture) SetText(guid, text string) {
	f.t.Helper()
	var audio int
	var oldText sql.NullString
	if err := f.conn().QueryRow("SELECT is_audio_message, text FROM message WHERE guid = ?", guid).Scan(&audio, &oldText); err != nil {
		f.t.Fatalf("chatdbtest: find message %s: %v", guid, err)
	}
	if audio != 0 {
		f.Exec(`UPDATE attachment SET user_info = ? WHERE ROWID IN (SELECT maj.attachment_id
			FROM message_attachment_join maj JOIN message m ON m.ROWID = maj.message_id WHERE m.guid = ?)`,
			f.transcriptionPlist(text), guid)
		return
	}
	var column any = text
	if !oldText.Valid {
		column = nil
	}
	f.update(guid, "text = ?, attributedBody = ?", column, typedstream.Encode(text))
}

// Edit rewrites a row's body as Messages does when its sender edits it
// (macOS 13 and later): the new text in text (NULL on a Ventura-style row)
// and attributedBody, date_edited set, and the new version added to the
// text part's edit history in message_summary_info.
func (f *Fixture) Edit(guid, text string, at time.Time) {
	f.t.Helper()
	f.inTx(func(c execer) {
		var oldText sql.NullString
		if err := c.QueryRow("SELECT text FROM message WHERE guid = ?", guid).Scan(&oldText); err != nil {
			f.t.Fatalf("chatdbtest: find message %s: %v", guid, err)
		}
		var column any = text
		if !oldText.Valid {
			column = nil
		}
		body := typedstream.Encode(text)
		st := f.partState(c, guid)
		// The text is the last part (see Insert).
		part := max(st.total-1, 0)
		key := fmt.Sprint(part)
		st.info.Edits[key] = append(st.info.Edits[key], edit{Date: float64(appleNanos(at)) / 1e9, Body: body})
		if !slices.Contains(st.info.EditedParts, part) {
			st.info.EditedParts = append(st.info.EditedParts, part)
		}
		f.update(guid, "text = ?, attributedBody = ?, date_edited = ?, message_summary_info = ?",
			column, body, appleNanos(at), f.plist(st.info))
	})
}

// Unsend takes a row back the way macOS 13 to 15 record it: the body and
// the attachment joins gone, date_retracted and date_edited set, every
// part listed as retracted in message_summary_info and none left in
// part_count.
func (f *Fixture) Unsend(guid string, at time.Time) {
	f.t.Helper()
	f.inTx(func(c execer) {
		f.update(guid, "text = NULL, attributedBody = NULL, date_retracted = ?, date_edited = ?, message_summary_info = ?, part_count = 0",
			appleNanos(at), appleNanos(at), f.allRetracted(c, guid))
		if _, err := c.Exec("DELETE FROM message_attachment_join WHERE message_id IN (SELECT ROWID FROM message WHERE guid = ?)", guid); err != nil {
			f.t.Fatalf("chatdbtest: unsend %s: %v", guid, err)
		}
	})
}

// UnsendAsEdit takes a row back the way macOS 26 may record it: an edit
// whose body is empty (an attributedBody with no text, text NULL), with
// date_edited set and date_retracted left 0, every part retracted in
// message_summary_info and none left in part_count.
func (f *Fixture) UnsendAsEdit(guid string, at time.Time) {
	f.t.Helper()
	f.inTx(func(c execer) {
		f.update(guid, "text = NULL, attributedBody = ?, date_edited = ?, message_summary_info = ?, part_count = 0",
			typedstream.EncodeParts(), appleNanos(at), f.allRetracted(c, guid))
	})
}

// UnsendParts takes back some parts of a message and keeps the others, as
// Messages records it: the parts listed as retracted in
// message_summary_info, part_count lowered, date_edited set; a retracted
// file loses its join row, a retracted text leaves text and
// attributedBody, whose runs left keep their part numbers. The parts are
// numbered as Insert writes them: the attachments in order, then the text.
func (f *Fixture) UnsendParts(guid string, parts []int, at time.Time) {
	f.t.Helper()
	f.inTx(func(c execer) {
		st := f.partState(c, guid)
		// The parts left are, in order, the joined files, then the text.
		var left []int
		for p := range st.total {
			if !slices.Contains(st.info.RetractedParts, p) {
				left = append(left, p)
			}
		}
		hasText := st.text != ""
		if len(left) != len(st.files)+b2i(hasText) {
			f.t.Fatalf("chatdbtest: message %s has %d parts left, but %d files and text %q", guid, len(left), len(st.files), st.text)
		}
		body := make([]typedstream.Part, st.total)
		dropped := map[int]bool{}
		for i, p := range left {
			switch {
			case slices.Contains(parts, p):
				dropped[p] = true
			case i < len(st.files):
				body[p] = typedstream.Part{FileTransferGUID: st.files[i].guid}
			default:
				body[p] = typedstream.Part{Text: st.text}
			}
		}
		for _, p := range parts {
			if !dropped[p] {
				f.t.Fatalf("chatdbtest: message %s has no part %d left to take back", guid, p)
			}
		}
		for i, p := range left {
			if dropped[p] && i < len(st.files) {
				if _, err := c.Exec("DELETE FROM message_attachment_join WHERE ROWID = ?", st.files[i].join); err != nil {
					f.t.Fatalf("chatdbtest: unsend part %d of %s: %v", p, guid, err)
				}
			}
		}
		for p := range dropped {
			st.info.RetractedParts = append(st.info.RetractedParts, p)
		}
		slices.Sort(st.info.RetractedParts)
		var textCol, attributed any
		var rest strings.Builder
		for _, b := range body {
			if b.FileTransferGUID != "" {
				rest.WriteString("\uFFFC")
			} else {
				rest.WriteString(b.Text)
			}
		}
		if rest.Len() > 0 {
			attributed = typedstream.EncodeParts(body...)
			if st.textColumn {
				textCol = rest.String()
			}
		}
		f.update(guid, "text = ?, attributedBody = ?, date_edited = ?, message_summary_info = ?, part_count = ?",
			textCol, attributed, appleNanos(at), f.plist(st.info), len(left)-len(dropped))
	})
}

// partState is what the fixture reads of a message before changing its
// parts.
type partState struct {
	info summary
	// total counts the parts the message was written with: those left
	// (part_count) and those retracted.
	total int
	// files are the attachments joined to it, in order: what is left of
	// its attachment parts.
	files []joinedFile
	// text is what is left of its text part, "" when none; textColumn
	// whether the row keeps its body in text as well (not Ventura-style).
	text       string
	textColumn bool
}

// joinedFile is an attachment joined to a message: the join row's ROWID
// and the attachment's GUID.
type joinedFile struct {
	join int64
	guid string
}

func (f *Fixture) partState(c execer, guid string) partState {
	f.t.Helper()
	var st partState
	var rowID int64
	var textCol sql.NullString
	var attributed, info []byte
	var partCount sql.NullInt64
	if err := c.QueryRow("SELECT ROWID, text, attributedBody, message_summary_info, part_count FROM message WHERE guid = ?", guid).
		Scan(&rowID, &textCol, &attributed, &info, &partCount); err != nil {
		f.t.Fatalf("chatdbtest: find message %s: %v", guid, err)
	}
	if info != nil {
		if _, err := plist.Unmarshal(info, &st.info); err != nil {
			f.t.Fatalf("chatdbtest: message_summary_info of %s: %v", guid, err)
		}
	}
	if st.info.Edits == nil {
		st.info.Edits = map[string][]edit{}
	}
	st.total = int(partCount.Int64) + len(st.info.RetractedParts)
	body := textCol.String
	if body == "" && attributed != nil {
		// A body a test broke on purpose has no text left: UnsendParts
		// then finds a part missing and says so.
		body, _ = typedstream.Text(attributed)
	}
	st.text, st.textColumn = strings.ReplaceAll(body, "\uFFFC", ""), textCol.Valid
	rs, err := c.Query("SELECT maj.ROWID, a.guid FROM message_attachment_join maj JOIN attachment a ON a.ROWID = maj.attachment_id WHERE maj.message_id = ? ORDER BY maj.ROWID", rowID)
	if err != nil {
		f.t.Fatalf("chatdbtest: attachments of %s: %v", guid, err)
	}
	defer rs.Close()
	for rs.Next() {
		var file joinedFile
		if err := rs.Scan(&file.join, &file.guid); err != nil {
			f.t.Fatalf("chatdbtest: attachments of %s: %v", guid, err)
		}
		st.files = append(st.files, file)
	}
	if err := rs.Err(); err != nil {
		f.t.Fatalf("chatdbtest: attachments of %s: %v", guid, err)
	}
	return st
}

// allRetracted is the message_summary_info of a message taken back whole:
// what it had, with every part retracted.
func (f *Fixture) allRetracted(c execer, guid string) []byte {
	f.t.Helper()
	st := f.partState(c, guid)
	st.info.RetractedParts = nil
	for p := range max(st.total, 1) {
		st.info.RetractedParts = append(st.info.RetractedParts, p)
	}
	return f.plist(st.info)
}

// FinishTransfer completes the transfers of a message's attachments: the
// file is at path (as Messages stores it, "~" allowed).
func (f *Fixture) FinishTransfer(guid, path string) {
	f.t.Helper()
	f.Exec(`UPDATE attachment SET filename = ?, transfer_state = 5 WHERE ROWID IN (SELECT maj.attachment_id
		FROM message_attachment_join maj JOIN message m ON m.ROWID = maj.message_id WHERE m.guid = ?)`, path, guid)
}

// AddMember adds address to a group the way Messages records it: the
// member joined to the chat and a system row (item type 1, action 0) sent
// by by ("" for the account owner). It returns the row's GUID.
func (f *Fixture) AddMember(chat ChatRef, by, address string) string {
	f.t.Helper()
	var guid string
	f.inTx(func(c execer) {
		f.join(c, chat.RowID, f.handle(c, address, chat.Service))
		_, guid = f.Insert(Msg{Chat: chat, From: by, ItemType: 1, GroupAction: 0, Other: address})
	})
	return guid
}

// RemoveMember removes address from a group (item type 1, action 1).
func (f *Fixture) RemoveMember(chat ChatRef, by, address string) string {
	f.t.Helper()
	var guid string
	f.inTx(func(c execer) {
		f.leave(c, chat, address)
		_, guid = f.Insert(Msg{Chat: chat, From: by, ItemType: 1, GroupAction: 1, Other: address})
	})
	return guid
}

// Leave records address leaving a group (item type 3, action 0, sent by
// the member).
func (f *Fixture) Leave(chat ChatRef, address string) string {
	f.t.Helper()
	var guid string
	f.inTx(func(c execer) {
		f.leave(c, chat, address)
		_, guid = f.Insert(Msg{Chat: chat, From: address, ItemType: 3, GroupAction: 0})
	})
	return guid
}

func (f *Fixture) leave(c execer, chat ChatRef, address string) {
	f.t.Helper()
	if _, err := c.Exec(`DELETE FROM chat_handle_join WHERE chat_id = ? AND handle_id IN (SELECT ROWID FROM handle WHERE id = ?)`,
		chat.RowID, address); err != nil {
		f.t.Fatalf("chatdbtest: remove %s from chat %s: %v", address, chat.GUID, err)
	}
}

// Rename renames a group (display_name, and a system row of item type 2
// with the new name in group_title).
func (f *Fixture) Rename(chat ChatRef, by, name string) string {
	f.t.Helper()
	var guid string
	f.inTx(func(c execer) {
		if _, err := c.Exec("UPDATE chat SET display_name = ? WHERE ROWID = ?", nullIfEmpty(name), chat.RowID); err != nil {
			f.t.Fatalf("chatdbtest: rename chat %s: %v", chat.GUID, err)
		}
		_, guid = f.Insert(Msg{Chat: chat, From: by, ItemType: 2, GroupTitle: name})
	})
	return guid
}

// SetGroupPhoto records a new group photo (item type 3, action 1).
func (f *Fixture) SetGroupPhoto(chat ChatRef, by string) string {
	f.t.Helper()
	_, guid := f.Insert(Msg{Chat: chat, From: by, ItemType: 3, GroupAction: 1})
	return guid
}

// Checkpoint copies the write-ahead log into the database and truncates it
// to nothing, as Messages' checkpoints do.
func (f *Fixture) Checkpoint() {
	f.t.Helper()
	var busy, logFrames, done int
	if err := f.db.QueryRow("PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &logFrames, &done); err != nil || busy != 0 {
		f.t.Fatalf("chatdbtest: checkpoint: busy %d, %v", busy, err)
	}
}

// Reopen closes the fixture's connection and opens a new one, as Messages
// quitting and launching again does: the last connection to close removes
// the write-ahead log, and the next write starts a new one.
func (f *Fixture) Reopen() {
	f.t.Helper()
	if err := f.db.Close(); err != nil {
		f.t.Fatalf("chatdbtest: close: %v", err)
	}
	db, err := sql.Open("sqlite", dsn(f.path))
	if err != nil {
		f.t.Fatalf("chatdbtest: reopen %s: %v", f.path, err)
	}
	db.SetMaxOpenConns(1)
	f.t.Cleanup(func() { db.Close() })
	f.db = db
}

// DeleteMessage removes a message and its joins, leaving a ROWID gap (as
// when a tapback is replaced).
func (f *Fixture) DeleteMessage(guid string) {
	f.t.Helper()
	f.inTx(func(c execer) {
		for _, q := range []string{
			"DELETE FROM chat_message_join WHERE message_id IN (SELECT ROWID FROM message WHERE guid = ?)",
			"DELETE FROM message_attachment_join WHERE message_id IN (SELECT ROWID FROM message WHERE guid = ?)",
			"DELETE FROM message WHERE guid = ?",
		} {
			if _, err := c.Exec(q, guid); err != nil {
				f.t.Fatalf("chatdbtest: delete message %s: %v", guid, err)
			}
		}
	})
}

// DropColumn removes a column, as an older or newer macOS might lack it.
func (f *Fixture) DropColumn(table, column string) {
	f.t.Helper()
	f.dropColumn(table, column)
}

// AppleTime converts a Messages date (nanoseconds since 2001) to a time.
func AppleTime(v int64) time.Time {
	return time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(v))
}

// AppleNanos converts t to a Messages date: nanoseconds since
// 2001-01-01 00:00:00 UTC.
func AppleNanos(t time.Time) int64 { return appleNanos(t) }

func appleNanos(t time.Time) int64 {
	return t.Sub(time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)).Nanoseconds()
}

// newGUID returns a random upper-case UUID, like Messages' GUIDs.
func newGUID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return strings.ToUpper(fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16]))
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func nullIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// summary is a message_summary_info as Messages writes it, with the keys
// the fixture sets: "ec" the edit history of each part (keyed by the
// part's index), "ep" the parts edited, "rp" the parts retracted.
type summary struct {
	Edits          map[string][]edit `plist:"ec"`
	EditedParts    []int             `plist:"ep,omitempty"`
	RetractedParts []int             `plist:"rp,omitempty"`
}

// edit is one version of an edited part.
type edit struct {
	Date float64 `plist:"d"` // seconds since 2001-01-01 UTC
	Body []byte  `plist:"t"` // the part as an attributedBody
}

// transcriptionPlist builds the binary property list {"audio-transcription":
// text} that macOS keeps in a voice memo attachment's user_info.
func (f *Fixture) transcriptionPlist(text string) []byte {
	return f.plist(map[string]string{"audio-transcription": text})
}

// plist encodes v as a binary property list, as Messages writes them.
func (f *Fixture) plist(v any) []byte {
	f.t.Helper()
	b, err := plist.Marshal(v, plist.BinaryFormat)
	if err != nil {
		f.t.Fatalf("chatdbtest: encode property list: %v", err)
	}
	return b
}
