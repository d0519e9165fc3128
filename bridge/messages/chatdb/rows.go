package chatdb

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode"

	"golang.org/x/text/unicode/norm"

	"github.com/blueline-app/blueline/bridge/messages/typedstream"
)

// Row is one row of the message table, mapped with its chat, sender and
// attachments.
type Row struct {
	RowID int64
	GUID  string
	// Text is the body: the text column when it is not empty, else the text
	// decoded from attributedBody (Ventura and later often leave text NULL),
	// with the U+FFFC attachment placeholders removed, but for an inline
	// emoji image's, which becomes ":description:" (see EmojiDescription).
	// Nil when there is no body, and always nil for a voice memo (see
	// Transcription).
	Text *string
	// Transcription is the on-device transcription of a voice memo
	// (IsAudioMessage), nil until macOS has written one; it may appear after
	// the row itself (re-read the row with RowsByGUID).
	Transcription *string
	// Sender is the sender's address (handle.id) for an inbound row, "" for
	// a row sent by the account owner.
	Sender   string
	IsFromMe bool
	// Service is "imessage", "sms" or "rcs".
	Service string
	// Date is when the message was sent or received; zero when unset.
	Date time.Time
	// DateRead is when the message was read; zero when not (yet) read or
	// unknown. On a row of ours it is the contact's read receipt.
	DateRead time.Time
	// DateDelivered is when a row of ours reached the contact's device
	// (iMessage); zero when not (yet), and on SMS.
	DateDelivered time.Time
	// DateEdited is when the row was last edited (macOS 13 and later).
	// Taking back the whole message or a part of it sets it too (see
	// Unsent and UnsentParts).
	DateEdited time.Time
	// DateRetracted is when the row was unsent, where Messages records it:
	// some rows of macOS 13 to 15 only.
	DateRetracted time.Time
	// RetractedParts are the indexes of the parts of the message its
	// sender took back, sorted ("rp" in message_summary_info, see
	// summary.go); nil when none.
	RetractedParts []int
	// PartCount is how many parts the message has left (part_count): 0
	// once its sender took them all back.
	PartCount   int
	IsSent      bool
	IsDelivered bool
	// IsRead is set on a contact's row once the account owner has read it,
	// here or on another device.
	IsRead bool
	// ScheduleType is 2 for a message the owner scheduled with Send Later
	// (macOS 15 and later): an unsent row of ours dated when it is due.
	ScheduleType int
	// HasAttachments is Messages' own flag that the row carries files,
	// set even while its attachment rows are still being written.
	HasAttachments bool
	// Account is the account the row went through ("E:me@icloud.com",
	// "P:+1555…"), and CallerID the owner's address it was sent from or to
	// (destination_caller_id): on a row of ours, the alias Messages sent
	// from.
	Account, CallerID string
	// IsSpam is Messages' verdict that the row is junk.
	IsSpam         bool
	Error          int
	IsAudioMessage bool
	ItemType       int
	// AssociatedGUID is the GUID of the message a tapback (or sticker)
	// targets, without its "p:N/" or "bp:" prefix.
	AssociatedGUID string
	// AssociatedType is 0 for a normal message, 2000-2007 for an added
	// tapback and 3000-3007 for a removed one; other values are other kinds.
	AssociatedType int
	// AssociatedEmoji is the emoji of an emoji tapback (2006 and 3006).
	AssociatedEmoji string
	// GroupActionType and GroupTitle describe a group change (ItemType 1
	// to 3, see GroupChange); OtherHandle is the member it concerns.
	GroupActionType int
	GroupTitle      string
	OtherHandle     string
	// ThreadOriginatorGUID is the GUID of the message this one replies to
	// inline (macOS 11 and later), "" when none.
	ThreadOriginatorGUID string
	// ReplyToGUID is the message Messages files this one after
	// (reply_to_guid), "" when none. The received copy Messages may write
	// of a message sent to oneself names that message.
	ReplyToGUID string
	// BalloonBundleID names the iMessage app behind a balloon message (link
	// previews, polls, …), "" for a plain message.
	BalloonBundleID string
	Chat            Chat
	Attachments     []Attachment
	// bodyFiles are the attachment GUIDs attributedBody names: macOS 15
	// sometimes names a file there without a join row.
	bodyFiles []string
	// body is the text with its U+FFFC placeholders, until complete knows
	// the attachments that decide what each placeholder becomes.
	body string
	// summary is set when the row has a readable message_summary_info and
	// a part_count: they, not date_retracted, tell an unsend.
	summary bool
}

// Unsent reports whether the sender took the whole message back, and
// when. Messages records a take-back as an edit (date_edited) that lists
// the parts taken back in message_summary_info and lowers part_count: the
// message is gone once no part is left. date_retracted is not written for
// every unsend, so it decides only for a row without that summary (older
// macOS). A body that does not decode after an edit is an edit, not an
// unsend.
func (r Row) Unsent() (time.Time, bool) {
	if !r.summary {
		return r.DateRetracted, !r.DateRetracted.IsZero()
	}
	if len(r.RetractedParts) == 0 || r.PartCount != 0 || r.DateEdited.IsZero() {
		return time.Time{}, false
	}
	if !r.DateRetracted.IsZero() {
		return r.DateRetracted, true
	}
	return r.DateEdited, true
}

// UnsentParts returns the parts of the message its sender took back while
// others stay (see RetractedParts), nil when none or when the whole message
// was taken back (see Unsent). Messages removes those parts from the row:
// a taken-back file loses its join row (it is not in Attachments), a
// taken-back text leaves the body (Text is nil).
func (r Row) UnsentParts() []int {
	if !r.summary || r.PartCount <= 0 || r.DateEdited.IsZero() {
		return nil
	}
	return r.RetractedParts
}

// Chat is the conversation a row belongs to.
type Chat struct {
	RowID int64
	// GUID is "iMessage;-;+15551234567" for a one-to-one chat,
	// "iMessage;+;chat123…" for a group: always service-prefixed, so that
	// a chat is named alike whichever form Messages stores it under (see
	// CanonicalGUID).
	GUID string
	// RawGUID is the chat's GUID as Messages stores it: on macOS 26 it may
	// be "any;-;…" or "any;+;…".
	RawGUID string
	// Identifier is the address of a one-to-one chat, "chat…" for a group.
	Identifier  string
	IsGroup     bool
	DisplayName string
	// Service is "imessage", "sms" or "rcs".
	Service string
	// Participants are the other members' addresses, sorted.
	Participants []string
	// Filter is where Messages filed the chat away from the inbox: one of
	// the Filter… names, "" for the inbox of known senders.
	Filter string
}

// Where Messages files a chat (chat.is_filtered, is_blackholed,
// is_pending_review; message.is_spam).
const (
	FilterUnknownSender = "unknown_sender" // is_filtered 1: shown under Unknown Senders
	FilterPendingReview = "pending_review" // is_pending_review: held for the owner to screen
	FilterJunk          = "junk"           // is_filtered 2, or a row marked spam
	FilterBlocked       = "blocked"        // is_blackholed: from a blocked sender
	FilterPromotion     = "promotion"      // is_filtered 3: the SMS filter's Promotions
	FilterTransaction   = "transaction"    // is_filtered 4 and its sub-folders (Finance, Orders, Reminders)
	FilterOther         = "filtered"       // another category of a newer SMS filter
)

// chatFilter names the folder of a chat from its columns. is_filtered is a
// category, not a flag: 0 known sender, 1 unknown sender, 2 junk, then the
// iOS 26 SMS filter's folders (3 Promotions, 4 Transactions, whose
// sub-folders 36, 52 and 68 keep 4 in their low bits).
func chatFilter(filtered int64, blackholed, pendingReview bool) string {
	switch {
	case blackholed:
		return FilterBlocked
	case filtered == 0 && pendingReview:
		return FilterPendingReview
	case filtered == 0:
		return ""
	case filtered == 1:
		if pendingReview {
			return FilterPendingReview
		}
		return FilterUnknownSender
	case filtered == 2:
		return FilterJunk
	case filtered&0x0f == 3:
		return FilterPromotion
	case filtered&0x0f == 4:
		return FilterTransaction
	}
	return FilterOther
}

// Filter is where Messages filed the row: its chat's folder, or junk for a
// row Messages marked as spam in a chat that is not filed away already.
func (r Row) Filter() string {
	if r.IsSpam && (r.Chat.Filter == "" || r.Chat.Filter == FilterUnknownSender || r.Chat.Filter == FilterPendingReview) {
		return FilterJunk
	}
	return r.Chat.Filter
}

// Attachment is a file attached to a message.
type Attachment struct {
	GUID string
	// Path is the file's absolute path, "" while the transfer has not
	// finished.
	Path         string
	MimeType     string // may be ""
	UTI          string
	TransferName string // the original file name
	TotalBytes   int64
	// TransferState is Messages' transfer state (5 = finished).
	TransferState int
	// EmojiDescription is the short description of an emoji image that
	// sits in the text, a Genmoji or inline sticker (macOS 15.1 and
	// later), such as "smiling frog"; "" for any other file. The row's
	// Text carries it as ":smiling frog:" where the image sits.
	EmojiDescription string
}

// objectReplacement is U+FFFC, the placeholder Messages puts in the text
// where an attachment sits.
const objectReplacement = "\uFFFC"

// appleEpoch is 2001-01-01 00:00:00 UTC, the origin of Messages' dates.
var appleEpoch = time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)

// AppleTime converts a Messages date to a time. macOS 10.13 and later store
// nanoseconds since 2001-01-01 UTC, older versions seconds; 0 means unset and
// gives the zero time.
func AppleTime(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	// 1e11 seconds is more than 3000 years, 1e11 nanoseconds under two
	// minutes: any real date tells the two units apart.
	if v > 1e11 || v < -1e11 {
		return time.Unix(appleEpoch.Unix(), v).UTC()
	}
	return time.Unix(appleEpoch.Unix()+v, 0).UTC()
}

// appleNanos is the inverse of AppleTime in the modern (nanosecond) unit.
func appleNanos(t time.Time) int64 {
	return t.Sub(appleEpoch).Nanoseconds()
}

// queryer is what both *sql.DB and *sql.Tx offer.
type queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// Rows returns up to limit message rows with ROWID greater than after, in
// ROWID order. One call is one read transaction: page through a large
// backlog rather than holding Messages' checkpoint back for long.
func (db *DB) Rows(ctx context.Context, after int64, limit int) ([]Row, error) {
	return db.rows(ctx, after, limit, nil)
}

// Backlog reads a long run of rows, page after page, as a first start's
// import of the history does. Each chat is read once, when a page first
// names it, where Rows reads the chats of every page again (2,000 chats
// and their members each page, for a Mac used with that many people). A
// chat renamed during the import keeps, in what it reads, the name it had
// when first read. The message rows come through a connection of its own
// (see rawConn), their chats and attachments through the pool: each page's
// attachments are read a moment after its messages, which at worst sees an
// attachment a little further on in its transfer. It is not safe for
// concurrent use; Close lets its connection go.
type Backlog struct {
	db    *DB
	chats map[int64]Chat
	conn  *rawConn // opened by the first page
	stmt  *rawStmt
	rows  []Row // the last page's, reused
}

// Backlog starts reading a backlog.
func (db *DB) Backlog() *Backlog {
	return &Backlog{db: db, chats: map[int64]Chat{}}
}

// Rows is DB.Rows, with the chats already read taken from memory. The
// slice is the backlog's, reused by the next call (each page was 1.2 MB of
// garbage on a first start): its rows, copied out, are the caller's.
func (b *Backlog) Rows(ctx context.Context, after int64, limit int) ([]Row, error) {
	if limit <= 0 {
		return nil, nil
	}
	rows, weak, err := b.messages(ctx, after, limit)
	if err != nil || len(rows) == 0 {
		return nil, err
	}
	err = b.db.readTx(ctx, func(tx *sql.Tx) error {
		// The rows form one ROWID window: their attachments are one range.
		return b.db.complete(ctx, tx, rows, weak, &rowWindow{after, rows[len(rows)-1].RowID}, b.chats)
	})
	if err != nil {
		return nil, err
	}
	return rows, nil
}

// messages reads up to limit message rows after the ROWID after, as
// queryRows does.
func (b *Backlog) messages(ctx context.Context, after int64, limit int) (_ []Row, weak map[int64]bool, err error) {
	if b.conn == nil {
		c, err := openRaw(b.db.path)
		if err != nil {
			return nil, nil, err
		}
		stmt, err := c.prepare(b.db.selectMessages + " WHERE m.ROWID > ? ORDER BY m.ROWID LIMIT ?")
		if err != nil {
			c.close()
			return nil, nil, fmt.Errorf("chatdb: query messages: %w", err)
		}
		b.conn, b.stmt = c, stmt
	}
	if err := b.stmt.bind(after, int64(limit)); err != nil {
		return nil, nil, fmt.Errorf("chatdb: query messages: %w", err)
	}
	// Reset, the statement lets its read transaction go: Messages'
	// checkpoints are not held back between pages.
	defer b.stmt.reset()
	var s msgScan
	cols := s.columns()
	clear(b.rows) // nothing of the last page kept alive
	rows := b.rows[:0]
	for n := 0; ; n++ {
		more, err := b.stmt.step(ctx, n)
		if err != nil {
			return nil, nil, fmt.Errorf("chatdb: query messages: %w", err)
		}
		if !more {
			b.rows = rows
			return rows, weak, nil
		}
		for i, c := range cols {
			b.stmt.column(i, c)
		}
		rows, weak = s.appendRow(rows, weak)
	}
}

// Close closes the backlog's connection to chat.db.
func (b *Backlog) Close() {
	if b.conn != nil {
		b.stmt.finalize()
		b.conn.close()
		b.conn, b.stmt = nil, nil
	}
}

// rows reads as Rows does; known, when not nil, holds chats already read,
// and gets those read here.
func (db *DB) rows(ctx context.Context, after int64, limit int, known map[int64]Chat) ([]Row, error) {
	if limit <= 0 {
		return nil, nil
	}
	var rows []Row
	err := db.readTx(ctx, func(tx *sql.Tx) error {
		// ROWIDs are unique, so MAX(ROWID) - after bounds the row count:
		// a backlog of 100,000 rows is then allocated once.
		var max sql.NullInt64
		if err := tx.QueryRowContext(ctx, "SELECT MAX(ROWID) FROM message").Scan(&max); err != nil {
			return fmt.Errorf("chatdb: max rowid: %w", err)
		}
		if max.Int64 <= after {
			return nil
		}
		rows = make([]Row, 0, min(int64(limit), max.Int64-after))
		var err error
		var weak map[int64]bool
		rows, weak, err = db.queryRows(ctx, tx, rows, " WHERE m.ROWID > ? ORDER BY m.ROWID LIMIT ?", after, limit)
		if err != nil || len(rows) == 0 {
			return err
		}
		// The rows form one ROWID window: their attachments are one range.
		return db.complete(ctx, tx, rows, weak, &rowWindow{after, rows[len(rows)-1].RowID}, known)
	})
	if err != nil {
		return nil, err
	}
	return rows, nil
}

// RowsByGUID re-reads the messages with the given GUIDs, in ROWID order.
// GUIDs that are not (or no longer) in the database are left out.
func (db *DB) RowsByGUID(ctx context.Context, guids []string) ([]Row, error) {
	if len(guids) == 0 {
		return nil, nil
	}
	var out []Row
	err := db.readTx(ctx, func(tx *sql.Tx) error {
		out = nil
		weak := map[int64]bool{}
		err := inChunks(guids, 500, func(chunk []string) error {
			args := make([]any, len(chunk))
			for i, g := range chunk {
				args[i] = g
			}
			rows, w, err := db.queryRows(ctx, tx, nil, " WHERE m.guid IN ("+placeholders(len(chunk))+")", args...)
			out = append(out, rows...)
			maps.Copy(weak, w)
			return err
		})
		if err != nil {
			return err
		}
		slices.SortFunc(out, func(a, b Row) int { return cmp.Compare(a.RowID, b.RowID) })
		return db.complete(ctx, tx, out, weak, nil, nil)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// CanonicalGUID returns the service-prefixed form of a chat GUID. macOS 26
// may store a chat as "any;-;+1555…" or "any;+;chat…", with the service only
// in the chat's service_name; such a GUID becomes "iMessage;-;+1555…",
// "SMS;-;…" or "RCS;-;…" (iMessage when service_name says nothing), so
// that the same conversation keeps one name whichever form it is stored
// under. Other GUIDs are returned as they are.
func CanonicalGUID(guid, serviceName string) string {
	prefix, rest, ok := strings.Cut(guid, ";")
	if !ok || !strings.EqualFold(prefix, "any") {
		return guid
	}
	return ServicePrefix(serviceName) + ";" + rest
}

// ServicePrefix is the GUID prefix of a Messages service name: "SMS",
// "RCS", or "iMessage" for anything else (including "" and "any").
func ServicePrefix(serviceName string) string {
	switch strings.ToLower(serviceName) {
	case "sms":
		return "SMS"
	case "rcs":
		return "RCS"
	}
	return "iMessage"
}

// StoredChat is a chat row as Messages stores it.
type StoredChat struct {
	GUID        string // as stored: may start "any;"
	ServiceName string // as stored: "iMessage", "SMS", "RCS", or ""
}

// LatestInboundChat returns the chat of the newest row an identifier's
// contact sent (a one-to-one conversation may sit in several chats: an old
// SMS one beside an RCS one), and false when the contact never wrote.
func (db *DB) LatestInboundChat(ctx context.Context, identifier string) (StoredChat, bool, error) {
	var guid, service sql.NullString
	err := db.db.QueryRowContext(ctx, `SELECT c.guid, c.service_name FROM chat c
		JOIN chat_message_join cmj ON cmj.chat_id = c.ROWID
		JOIN message m ON m.ROWID = cmj.message_id
		WHERE c.chat_identifier = ? COLLATE NOCASE AND c.style = 45 AND m.is_from_me = 0
		ORDER BY cmj.message_date DESC LIMIT 1`, identifier).Scan(&guid, &service)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return StoredChat{}, false, nil
	case err != nil:
		return StoredChat{}, false, fmt.Errorf("chatdb: latest chat of %s: %w", identifier, err)
	}
	return StoredChat{GUID: guid.String, ServiceName: service.String}, true, nil
}

// ChatsByIdentifier lists the chats Messages keeps for an identifier (a
// contact's address, or a group's "chat…"), oldest first: the same
// conversation can sit under several GUIDs (a service-prefixed one and an
// "any;" one, or one per service).
func (db *DB) ChatsByIdentifier(ctx context.Context, identifier string) ([]StoredChat, error) {
	rs, err := db.db.QueryContext(ctx, `SELECT guid, service_name FROM chat
		WHERE chat_identifier = ? COLLATE NOCASE ORDER BY ROWID`, identifier)
	if err != nil {
		return nil, fmt.Errorf("chatdb: query chats of %s: %w", identifier, err)
	}
	defer rs.Close()
	var out []StoredChat
	for rs.Next() {
		var guid, service sql.NullString
		if err := rs.Scan(&guid, &service); err != nil {
			return nil, fmt.Errorf("chatdb: scan chat: %w", err)
		}
		out = append(out, StoredChat{GUID: guid.String, ServiceName: service.String})
	}
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("chatdb: query chats of %s: %w", identifier, err)
	}
	return out, nil
}

// Outgoing describes a send to find in the database.
type Outgoing struct {
	// Identifier is the recipient: the contact's address, or the group's
	// "chat…" identifier. A row filed under any chat of that identifier
	// counts, whatever its GUID or service (Messages may file a send under
	// the participant's chat, an SMS chat, a new chat for the same handle);
	// for a one-to-one chat, so does a row under no chat at all whose
	// handle is the contact.
	Identifier string
	IsGroup    bool
	// After is the highest ROWID before the send; Since is when it began
	// (a little early, for clock skew).
	After int64
	Since time.Time
	// Text, when not "", is matched on letters and digits only, after
	// Unicode normalisation (NFC): Messages may change spaces, quotes and
	// dashes. A text Messages split in two (it does so around a link)
	// matches as the run of rows that together hold it.
	Text string
	// Filename, when not "", is the name of the attachment to find.
	Filename string
}

// FindOutgoing finds the rows Messages inserted for one of our sends: rows
// sent by the account owner after o.After, dated at or after o.Since, in
// one of the recipient's chats, whose body is o.Text or which carry an
// attachment named o.Filename. It returns them in ROWID order (more than
// one for a split text), or none.
func (db *DB) FindOutgoing(ctx context.Context, o Outgoing) ([]Row, error) {
	if o.Text == "" && o.Filename == "" {
		return nil, errors.New("chatdb: find outgoing: text or filename required")
	}
	var sinceNanos int64
	if !o.Since.IsZero() {
		sinceNanos = appleNanos(o.Since)
	}
	var cands []Row
	err := db.readTx(ctx, func(tx *sql.Tx) error {
		// The ROWID bound keeps this to the rows written since the send
		// began; each condition below is then cheap.
		ids, err := db.queryRowIDs(ctx, tx, `SELECT m.ROWID FROM message m
			WHERE m.ROWID > ? AND m.is_from_me = 1 AND m.date >= ? AND (
				EXISTS (SELECT 1 FROM chat_message_join cmj JOIN chat c ON c.ROWID = cmj.chat_id
					WHERE cmj.message_id = m.ROWID AND c.chat_identifier = ? COLLATE NOCASE)
				OR (? AND m.handle_id IN (SELECT h.ROWID FROM handle h WHERE h.id = ? COLLATE NOCASE)
					AND NOT EXISTS (SELECT 1 FROM chat_message_join cmj WHERE cmj.message_id = m.ROWID)))
			ORDER BY m.ROWID`, o.After, sinceNanos, o.Identifier, !o.IsGroup, o.Identifier)
		if err != nil || len(ids) == 0 {
			return err
		}
		args := make([]any, len(ids))
		for i, id := range ids {
			args[i] = id
		}
		var weak map[int64]bool
		cands, weak, err = db.queryRows(ctx, tx, nil, " WHERE m.ROWID IN ("+placeholders(len(ids))+") ORDER BY m.ROWID", args...)
		if err != nil {
			return err
		}
		return db.complete(ctx, tx, cands, weak, nil, nil)
	})
	if err != nil {
		return nil, err
	}
	cands = slices.DeleteFunc(cands, func(r Row) bool { return r.AssociatedType != 0 || r.ItemType != 0 })
	if o.Filename != "" {
		for _, r := range cands {
			if hasAttachment(r.Attachments, o.Filename) {
				return []Row{r}, nil
			}
		}
		return nil, nil
	}
	return matchText(cands, o.Text), nil
}

// matchText finds the row holding text, or the run of rows that together
// hold it in order (other rows may sit between them), among rows in ROWID
// order.
func matchText(rows []Row, text string) []Row {
	want := normalise(text)
	if want == "" {
		// Only symbols or emoji: nothing survives normalising, so compare
		// the texts themselves.
		for _, r := range rows {
			if r.Text != nil && strings.TrimSpace(norm.NFC.String(*r.Text)) == strings.TrimSpace(norm.NFC.String(text)) {
				return []Row{r}
			}
		}
		return nil
	}
	for i, r := range rows {
		first := rowText(r)
		if first == "" || !strings.HasPrefix(want, first) {
			continue
		}
		run, got := []Row{r}, first
		for _, next := range rows[i+1:] {
			if got == want {
				break
			}
			if part := rowText(next); part != "" && strings.HasPrefix(want[len(got):], part) {
				run, got = append(run, next), got+part
			}
		}
		if got == want {
			return run
		}
	}
	return nil
}

func rowText(r Row) string {
	if r.Text == nil {
		return ""
	}
	return normalise(*r.Text)
}

func hasAttachment(atts []Attachment, filename string) bool {
	want := norm.NFC.String(filename)
	for _, a := range atts {
		if strings.EqualFold(norm.NFC.String(a.TransferName), want) {
			return true
		}
	}
	return false
}

// normalise keeps only the letters and digits of s, in Unicode normal form
// C (a text may come back decomposed).
func normalise(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			return r
		}
		return -1
	}, norm.NFC.String(s))
}

func (db *DB) queryRowIDs(ctx context.Context, q queryer, query string, args ...any) ([]int64, error) {
	rs, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("chatdb: query: %w", err)
	}
	defer rs.Close()
	var ids []int64
	for rs.Next() {
		var id int64
		if err := rs.Scan(&id); err != nil {
			return nil, fmt.Errorf("chatdb: scan: %w", err)
		}
		ids = append(ids, id)
	}
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("chatdb: query: %w", err)
	}
	return ids, nil
}

// msgScan is one scanned message row.
// Bits of the flags column of the message SELECT (buildQueries).
const (
	msgFlagFromMe = iota
	msgFlagSent
	msgFlagDelivered
	msgFlagAudio
	msgFlagRead
	msgFlagHasAttachments
	msgFlagSpam
)

// msgScan receives a row of the message SELECT, its columns in the order
// buildQueries gives them.
type msgScan struct {
	rowID, guid, text, body, handleAddr, service, date column
	flags, errCode, assocGUID, assocType, itemTy       column
	dateRead, threadGUID, balloon, dateDelivered       column
	dateEdited, retracted, emoji, groupAction          column
	groupTitle, otherHandle, scheduleType, account     column
	callerID, summary, partCount, replyTo, chatID      column
}

// columns are msgScan's fields in the SELECT's order.
func (s *msgScan) columns() [29]*column {
	return [...]*column{&s.rowID, &s.guid, &s.text, &s.body, &s.handleAddr, &s.service, &s.date,
		&s.flags, &s.errCode, &s.assocGUID, &s.assocType, &s.itemTy,
		&s.dateRead, &s.threadGUID, &s.balloon,
		&s.dateDelivered, &s.dateEdited, &s.retracted, &s.emoji, &s.groupAction, &s.groupTitle, &s.otherHandle,
		&s.scheduleType, &s.account, &s.callerID,
		&s.summary, &s.partCount, &s.replyTo, &s.chatID}
}

type colKind uint8

const (
	colNull colKind = iota
	colInteger
	colText
	colBlob
)

// column is one value of a row as SQLite keeps it: NULL, an integer (a real
// is taken as one: SQLite keeps what it is given, and a date written as a
// real is still a date), text or a blob. A blob is borrowed, as
// sql.RawBytes is: valid until the next row.
type column struct {
	kind colKind
	i    int64
	s    string
	b    []byte
}

// int is the integer, 0 for anything else.
func (c *column) int() int64 {
	if c.kind == colInteger {
		return c.i
	}
	return 0
}

// str is the text ("" for NULL); a text column that holds a blob is
// taken as its bytes.
func (c *column) str() string {
	switch c.kind {
	case colText:
		return c.s
	case colBlob:
		return string(c.b)
	}
	return ""
}

// bytes is the blob (a column that holds text gives its bytes).
func (c *column) bytes() []byte {
	switch c.kind {
	case colBlob:
		return c.b
	case colText:
		return []byte(c.s)
	}
	return nil
}

// Scan is sql.Scanner, for the rows read through database/sql. A []byte
// is the driver's until the next row, which is all a blob column keeps.
func (c *column) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*c = column{}
	case int64:
		*c = column{kind: colInteger, i: v}
	case float64:
		*c = column{kind: colInteger, i: int64(v)}
	case string:
		*c = column{kind: colText, s: v}
	case []byte:
		*c = column{kind: colBlob, b: v}
	default:
		return fmt.Errorf("chatdb: unexpected column value %T", src)
	}
	return nil
}

// queryRows runs the message SELECT with the given tail (WHERE/ORDER/LIMIT)
// and appends the rows to rows, message columns mapped; chats and
// attachments are added by complete.
// weak marks the voice memos whose Transcription is only their body text,
// which a transcription stored with the attachment replaces.
func (db *DB) queryRows(ctx context.Context, q queryer, rows []Row, tail string, args ...any) (_ []Row, weak map[int64]bool, err error) {
	rs, err := q.QueryContext(ctx, db.selectMessages+tail, args...)
	if err != nil {
		return nil, nil, fmt.Errorf("chatdb: query messages: %w", err)
	}
	defer rs.Close()
	var s msgScan
	cols := s.columns()
	dest := make([]any, len(cols))
	for i, c := range cols {
		dest[i] = c
	}
	for rs.Next() {
		if err := rs.Scan(dest...); err != nil {
			return nil, nil, fmt.Errorf("chatdb: scan message: %w", err)
		}
		rows, weak = s.appendRow(rows, weak)
	}
	if err := rs.Err(); err != nil {
		return nil, nil, fmt.Errorf("chatdb: query messages: %w", err)
	}
	return rows, weak, nil
}

// appendRow maps the scanned message columns to a Row and appends it to
// rows; weak is as for queryRows.
func (s *msgScan) appendRow(rows []Row, weak map[int64]bool) ([]Row, map[int64]bool) {
	flags := s.flags.int()
	flag := func(bit int) bool { return flags&(1<<bit) != 0 }
	r := Row{
		RowID:                s.rowID.int(),
		GUID:                 s.guid.str(),
		IsFromMe:             flag(msgFlagFromMe),
		Service:              serviceName(s.service.str()),
		Date:                 AppleTime(s.date.int()),
		DateRead:             AppleTime(s.dateRead.int()),
		DateDelivered:        AppleTime(s.dateDelivered.int()),
		DateEdited:           AppleTime(s.dateEdited.int()),
		DateRetracted:        AppleTime(s.retracted.int()),
		AssociatedEmoji:      s.emoji.str(),
		GroupActionType:      int(s.groupAction.int()),
		GroupTitle:           s.groupTitle.str(),
		OtherHandle:          s.otherHandle.str(),
		IsSent:               flag(msgFlagSent),
		IsDelivered:          flag(msgFlagDelivered),
		IsRead:               flag(msgFlagRead),
		ScheduleType:         int(s.scheduleType.int()),
		HasAttachments:       flag(msgFlagHasAttachments),
		IsSpam:               flag(msgFlagSpam),
		Account:              s.account.str(),
		CallerID:             s.callerID.str(),
		Error:                int(s.errCode.int()),
		IsAudioMessage:       flag(msgFlagAudio),
		ItemType:             int(s.itemTy.int()),
		AssociatedGUID:       cleanAssociatedGUID(s.assocGUID.str()),
		AssociatedType:       int(s.assocType.int()),
		ThreadOriginatorGUID: s.threadGUID.str(),
		ReplyToGUID:          s.replyTo.str(),
		BalloonBundleID:      s.balloon.str(),
		Chat:                 Chat{RowID: s.chatID.int()},
	}
	if !r.IsFromMe {
		r.Sender = s.handleAddr.str()
	}
	if s.summary.kind != colNull && s.partCount.kind == colInteger {
		// A summary that does not parse leaves the row to
		// date_retracted, like an older Mac's; it must not stop the
		// rows after it.
		if parts, err := retractedParts(s.summary.bytes()); err == nil {
			r.RetractedParts, r.PartCount, r.summary = parts, int(s.partCount.int()), true
		}
	}
	r.bodyFiles = fileTransferGUIDs(s.body.bytes())
	raw := rawBody(s.text.str(), s.body.bytes())
	if !r.IsAudioMessage {
		// Text waits for the attachments (see complete): an inline
		// emoji image keeps a stand-in at its placeholder.
		r.body = raw
	} else {
		// The body of a voice memo is its U+FFFC placeholder. Recent
		// macOS keeps the transcription as an attribute of that
		// placeholder, and in the attachment's user_info (see complete);
		// a body text is taken only when neither has one.
		if t, ok := attributedTranscription(s.body.bytes()); ok {
			r.Transcription = &t
		} else if text := body(raw, nil); text != nil {
			r.Transcription = text
			if weak == nil {
				weak = map[int64]bool{}
			}
			weak[r.RowID] = true
		}
	}
	return append(rows, r), weak
}

// rawBody returns the message body with its U+FFFC placeholders: text when
// not empty, else the text decoded from attributedBody.
func rawBody(text string, attributed []byte) string {
	if text == "" && len(attributed) > 0 {
		// A blob that does not decode leaves the row without a body, like
		// a system row; it must not stop the rows after it.
		text, _ = typedstream.Text(attributed)
	}
	return text
}

// body returns the text of a raw body, nil when empty. The N-th U+FFFC
// placeholder is the N-th of atts: an inline emoji image (Genmoji, inline
// sticker) becomes its description between colons, ":smiling frog:", so
// that the text keeps its meaning without the image; the other
// placeholders are removed.
func body(text string, atts []Attachment) *string {
	if strings.Contains(text, objectReplacement) {
		parts := strings.Split(text, objectReplacement)
		var b strings.Builder
		b.WriteString(parts[0])
		for i, p := range parts[1:] {
			if i < len(atts) && atts[i].EmojiDescription != "" {
				b.WriteString(":" + atts[i].EmojiDescription + ":")
			}
			b.WriteString(p)
		}
		text = strings.TrimSpace(b.String())
	}
	if strings.TrimSpace(text) == "" {
		return nil
	}
	return &text
}

// serviceName maps Messages' service names to ours: "sms", "rcs",
// "imessage" for the rest, "" when unknown (empty or "any").
func serviceName(s string) string {
	switch strings.ToLower(s) {
	case "", "any":
		return ""
	case "sms":
		return "sms"
	case "rcs":
		return "rcs"
	}
	return "imessage"
}

// cleanAssociatedGUID strips the "p:N/" (part N) and "bp:" (balloon)
// prefixes from an associated_message_guid.
func cleanAssociatedGUID(g string) string {
	if rest, ok := strings.CutPrefix(g, "bp:"); ok {
		return rest
	}
	if strings.HasPrefix(g, "p:") {
		if i := strings.IndexByte(g, '/'); i >= 0 {
			return g[i+1:]
		}
	}
	return g
}

// rowWindow is a contiguous ROWID range (after, last].
type rowWindow struct{ after, last int64 }

// complete adds chats (with participants) and attachments to rows, the text
// (which depends on the attachments, see body), and the voice memo
// transcriptions stored with the attachment. known is as for chats.
func (db *DB) complete(ctx context.Context, tx *sql.Tx, rows []Row, weak map[int64]bool, window *rowWindow, known map[int64]Chat) error {
	if len(rows) == 0 {
		return nil
	}
	chats, err := db.chats(ctx, tx, rows, known)
	if err != nil {
		return err
	}
	atts, err := db.attachments(ctx, tx, rows, window)
	if err != nil {
		return err
	}
	if err := db.bodyOnlyAttachments(ctx, tx, rows, atts); err != nil {
		return err
	}
	var audio []int64
	for i := range rows {
		r := &rows[i]
		if c, ok := chats[r.Chat.RowID]; ok {
			r.Chat = c
		}
		if r.Service == "" {
			r.Service = cmp.Or(r.Chat.Service, "imessage")
		}
		r.Attachments = atts[r.RowID]
		if !r.IsAudioMessage {
			r.Text, r.body = body(r.body, r.Attachments), ""
		}
		if r.IsAudioMessage && len(r.Attachments) > 0 && db.cols.has("attachment", "user_info") {
			audio = append(audio, r.RowID)
		}
	}
	if len(audio) == 0 {
		return nil
	}
	ts, err := db.userInfoTranscriptions(ctx, tx, audio)
	if err != nil {
		return err
	}
	for i := range rows {
		r := &rows[i]
		if t, ok := ts[r.RowID]; ok && (r.Transcription == nil || weak[r.RowID]) {
			r.Transcription = &t
		}
	}
	return nil
}

// chats loads the chats of rows, with their participants. Those in known
// (when not nil) are not read again, and those read are added to it, which
// is then what it returns.
func (db *DB) chats(ctx context.Context, tx *sql.Tx, rows []Row, known map[int64]Chat) (map[int64]Chat, error) {
	var ids []int64
	seen := map[int64]bool{}
	for _, r := range rows {
		if id := r.Chat.RowID; id != 0 && !seen[id] {
			seen[id] = true
			if _, ok := known[id]; !ok {
				ids = append(ids, id)
			}
		}
	}
	chats := known
	if chats == nil {
		chats = make(map[int64]Chat, len(ids))
	}
	participants := map[int64][]string{}
	err := inChunks(ids, 500, func(chunk []int64) error {
		args := make([]any, len(chunk))
		for i, id := range chunk {
			args[i] = id
		}
		in := " IN (" + placeholders(len(chunk)) + ")"
		rs, err := tx.QueryContext(ctx, "SELECT c.ROWID, c.guid, c.style, c.chat_identifier, c.service_name, c.display_name, "+
			db.opt("chat", "c", "is_filtered", "0")+", "+db.opt("chat", "c", "is_blackholed", "0")+", "+
			db.opt("chat", "c", "is_pending_review", "0")+" FROM chat c WHERE c.ROWID"+in, args...)
		if err != nil {
			return fmt.Errorf("chatdb: query chats: %w", err)
		}
		defer rs.Close()
		for rs.Next() {
			var c Chat
			var guid, ident, service, name sql.NullString
			var style, filtered, blackholed, review sql.NullInt64
			if err := rs.Scan(&c.RowID, &guid, &style, &ident, &service, &name, &filtered, &blackholed, &review); err != nil {
				return fmt.Errorf("chatdb: scan chat: %w", err)
			}
			c.Filter = chatFilter(filtered.Int64, blackholed.Int64 != 0, review.Int64 != 0)
			c.RawGUID, c.Identifier, c.DisplayName = guid.String, ident.String, name.String
			c.GUID = CanonicalGUID(c.RawGUID, service.String)
			c.IsGroup = style.Int64 == 43 || strings.Contains(c.GUID, ";+;")
			c.Service = serviceName(service.String)
			if c.Service == "" {
				prefix, _, _ := strings.Cut(c.GUID, ";")
				c.Service = cmp.Or(serviceName(prefix), "imessage")
			}
			chats[c.RowID] = c
		}
		if err := rs.Err(); err != nil {
			return fmt.Errorf("chatdb: query chats: %w", err)
		}
		rs.Close()

		ps, err := tx.QueryContext(ctx, "SELECT chj.chat_id, h.id FROM chat_handle_join chj JOIN handle h ON h.ROWID = chj.handle_id WHERE chj.chat_id"+in, args...)
		if err != nil {
			return fmt.Errorf("chatdb: query participants: %w", err)
		}
		defer ps.Close()
		for ps.Next() {
			var chatID int64
			var addr sql.NullString
			if err := ps.Scan(&chatID, &addr); err != nil {
				return fmt.Errorf("chatdb: scan participant: %w", err)
			}
			if addr.String != "" {
				participants[chatID] = append(participants[chatID], addr.String)
			}
		}
		if err := ps.Err(); err != nil {
			return fmt.Errorf("chatdb: query participants: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for id, p := range participants {
		c, ok := chats[id]
		if !ok {
			continue
		}
		// The same address can be a member once per service.
		slices.Sort(p)
		c.Participants = slices.Compact(p)
		chats[id] = c
	}
	return chats, nil
}

// attachments loads the attachments of rows, per message ROWID, in the order
// of their join rows. For a ROWID window one range query does; otherwise the
// message ROWIDs are listed.
func (db *DB) attachments(ctx context.Context, tx *sql.Tx, rows []Row, window *rowWindow) (map[int64][]Attachment, error) {
	out := map[int64][]Attachment{}
	home, _ := os.UserHomeDir()
	load := func(where string, args ...any) error {
		rs, err := tx.QueryContext(ctx, db.selectAttach+where+" ORDER BY maj.message_id, maj.ROWID", args...)
		if err != nil {
			return fmt.Errorf("chatdb: query attachments: %w", err)
		}
		defer rs.Close()
		for rs.Next() {
			msgID, a, err := scanAttachment(rs, home)
			if err != nil {
				return err
			}
			out[msgID] = append(out[msgID], a)
		}
		if err := rs.Err(); err != nil {
			return fmt.Errorf("chatdb: query attachments: %w", err)
		}
		return nil
	}
	if window != nil {
		return out, load(" WHERE maj.message_id > ? AND maj.message_id <= ?", window.after, window.last)
	}
	ids := make([]int64, len(rows))
	for i, r := range rows {
		ids[i] = r.RowID
	}
	err := inChunks(ids, 500, func(chunk []int64) error {
		args := make([]any, len(chunk))
		for i, id := range chunk {
			args[i] = id
		}
		return load(" WHERE maj.message_id IN ("+placeholders(len(chunk))+")", args...)
	})
	return out, err
}

// scanAttachment scans a row of selectAttach or selectAttachByGUID.
func scanAttachment(rs *sql.Rows, home string) (msgID int64, _ Attachment, _ error) {
	var guid, filename, mime, uti, name, emoji sql.NullString
	var total, state sql.NullInt64
	if err := rs.Scan(&msgID, &guid, &filename, &mime, &uti, &name, &total, &state, &emoji); err != nil {
		return 0, Attachment{}, fmt.Errorf("chatdb: scan attachment: %w", err)
	}
	return msgID, Attachment{
		GUID:             guid.String,
		Path:             expandHome(filename.String, home),
		MimeType:         mime.String,
		UTI:              uti.String,
		TransferName:     name.String,
		TotalBytes:       total.Int64,
		TransferState:    int(state.Int64),
		EmojiDescription: emoji.String,
	}, nil
}

// bodyOnlyAttachments adds to atts the attachments that a row's
// attributedBody names but no join row links to it (seen on macOS 15), in
// the order the body names them.
func (db *DB) bodyOnlyAttachments(ctx context.Context, tx *sql.Tx, rows []Row, atts map[int64][]Attachment) error {
	want := map[string]int64{} // attachment GUID → message ROWID
	var guids []string
	for _, r := range rows {
		for _, g := range r.bodyFiles {
			if _, dup := want[g]; dup || slices.ContainsFunc(atts[r.RowID], func(a Attachment) bool { return a.GUID == g }) {
				continue
			}
			want[g] = r.RowID
			guids = append(guids, g)
		}
	}
	if len(guids) == 0 {
		return nil
	}
	found := map[string]Attachment{}
	home, _ := os.UserHomeDir()
	err := inChunks(guids, 500, func(chunk []string) error {
		args := make([]any, len(chunk))
		for i, g := range chunk {
			args[i] = g
		}
		rs, err := tx.QueryContext(ctx, db.selectAttachByGUID+
			" WHERE a.guid IN ("+placeholders(len(chunk))+")", args...)
		if err != nil {
			return fmt.Errorf("chatdb: query attachments by GUID: %w", err)
		}
		defer rs.Close()
		for rs.Next() {
			_, a, err := scanAttachment(rs, home)
			if err != nil {
				return err
			}
			found[a.GUID] = a
		}
		return rs.Err()
	})
	if err != nil {
		return err
	}
	for _, g := range guids {
		if a, ok := found[g]; ok {
			atts[want[g]] = append(atts[want[g]], a)
		}
	}
	return nil
}

// expandHome turns the "~/Library/Messages/…" paths Messages stores into
// absolute ones.
func expandHome(p, home string) string {
	if home == "" {
		return p
	}
	if p == "~" {
		return home
	}
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		return filepath.Join(home, rest)
	}
	return p
}

// userInfoTranscriptions reads the transcriptions macOS stores in the
// user_info property list of a voice memo's attachment.
func (db *DB) userInfoTranscriptions(ctx context.Context, tx *sql.Tx, msgIDs []int64) (map[int64]string, error) {
	out := map[int64]string{}
	err := inChunks(msgIDs, 500, func(chunk []int64) error {
		args := make([]any, len(chunk))
		for i, id := range chunk {
			args[i] = id
		}
		rs, err := tx.QueryContext(ctx, `SELECT maj.message_id, a.user_info FROM message_attachment_join maj
			JOIN attachment a ON a.ROWID = maj.attachment_id
			WHERE a.user_info IS NOT NULL AND maj.message_id IN (`+placeholders(len(chunk))+`)
			ORDER BY maj.message_id, maj.ROWID`, args...)
		if err != nil {
			return fmt.Errorf("chatdb: query user_info: %w", err)
		}
		defer rs.Close()
		for rs.Next() {
			var id int64
			var info []byte
			if err := rs.Scan(&id, &info); err != nil {
				return fmt.Errorf("chatdb: scan user_info: %w", err)
			}
			if _, ok := out[id]; ok {
				continue
			}
			if t, ok := plistTranscription(info); ok {
				out[id] = t
			}
		}
		return rs.Err()
	})
	return out, err
}
