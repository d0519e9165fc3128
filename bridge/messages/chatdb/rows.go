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

	"github.com/blueline-app/blueline/bridge/messages/typedstream"
)

// Row is one row of the message table, mapped with its chat, sender and
// attachments.
type Row struct {
	RowID int64
	GUID  string
	// Text is the body: the text column when it is not empty, else the text
	// decoded from attributedBody (Ventura and later often leave text NULL),
	// with the U+FFFC attachment placeholders removed. Nil when there is no
	// body, and always nil for a voice memo (see Transcription).
	Text *string
	// Transcription is the on-device transcription of a voice memo
	// (IsAudioMessage), nil until macOS has written one; it may appear after
	// the row itself (re-read the row with RowsByGUID).
	Transcription *string
	// Sender is the sender's address (handle.id) for an inbound row, "" for
	// a row sent by the account owner.
	Sender   string
	IsFromMe bool
	// Service is "imessage" or "sms" (RCS counts as sms).
	Service string
	// Date is when the message was sent or received; zero when unset.
	Date time.Time
	// DateRead is when the message was read; zero when not (yet) read or
	// unknown.
	DateRead       time.Time
	IsSent         bool
	IsDelivered    bool
	Error          int
	IsAudioMessage bool
	ItemType       int
	// AssociatedGUID is the GUID of the message a tapback (or sticker)
	// targets, without its "p:N/" or "bp:" prefix.
	AssociatedGUID string
	// AssociatedType is 0 for a normal message, 2000-2005 for an added
	// tapback and 3000-3005 for a removed one; other values are other kinds.
	AssociatedType int
	// ThreadOriginatorGUID is the GUID of the message this one replies to
	// inline (macOS 11 and later), "" when none.
	ThreadOriginatorGUID string
	// BalloonBundleID names the iMessage app behind a balloon message (link
	// previews, polls, …), "" for a plain message.
	BalloonBundleID string
	Chat            Chat
	Attachments     []Attachment
}

// Chat is the conversation a row belongs to.
type Chat struct {
	RowID int64
	// GUID is "iMessage;-;+15551234567" for a one-to-one chat,
	// "iMessage;+;chat123…" for a group.
	GUID string
	// Identifier is the address of a one-to-one chat, "chat…" for a group.
	Identifier  string
	IsGroup     bool
	DisplayName string
	// Service is "imessage" or "sms".
	Service string
	// Participants are the other members' addresses, sorted.
	Participants []string
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
		return db.complete(ctx, tx, rows, weak, &rowWindow{after, rows[len(rows)-1].RowID})
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
		return db.complete(ctx, tx, out, weak, nil)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// FindOutgoing finds the row Messages inserted for one of our sends: the
// first row sent by the account owner in the chat with GUID chatGUID, dated
// at or after since, with ROWID greater than afterRowID, whose body matches
// text (compared on letters and digits only, as Messages may change spaces
// and quotes) when text is not empty, or which carries an attachment named
// filename when filename is not empty.
func (db *DB) FindOutgoing(ctx context.Context, chatGUID string, afterRowID int64, since time.Time, text, filename string) (Row, bool, error) {
	if text == "" && filename == "" {
		return Row{}, false, errors.New("chatdb: find outgoing: text or filename required")
	}
	var sinceNanos int64
	if !since.IsZero() {
		sinceNanos = appleNanos(since)
	}
	const batch = 200
	wantText := normalise(text)
	for {
		var found Row
		var ok bool
		var n int
		err := db.readTx(ctx, func(tx *sql.Tx) error {
			rows, err := db.queryRowIDs(ctx, tx, `SELECT m.ROWID FROM message m
				JOIN chat_message_join cmj ON cmj.message_id = m.ROWID
				JOIN chat c ON c.ROWID = cmj.chat_id
				WHERE c.guid = ? AND m.is_from_me = 1 AND m.ROWID > ? AND m.date >= ?
				ORDER BY m.ROWID LIMIT ?`, chatGUID, afterRowID, sinceNanos, batch)
			if err != nil || len(rows) == 0 {
				return err
			}
			n = len(rows)
			afterRowID = rows[len(rows)-1]
			args := make([]any, len(rows))
			for i, id := range rows {
				args[i] = id
			}
			cands, weak, err := db.queryRows(ctx, tx, nil, " WHERE m.ROWID IN ("+placeholders(len(rows))+") ORDER BY m.ROWID", args...)
			if err != nil {
				return err
			}
			if err := db.complete(ctx, tx, cands, weak, nil); err != nil {
				return err
			}
			for _, r := range cands {
				if r.AssociatedType != 0 || r.ItemType != 0 {
					continue
				}
				if (text != "" && textMatches(r.Text, text, wantText)) ||
					(filename != "" && hasAttachment(r.Attachments, filename)) {
					found, ok = r, true
					return nil
				}
			}
			return nil
		})
		if err != nil || ok || n < batch {
			return found, ok, err
		}
	}
}

func textMatches(body *string, text, normalised string) bool {
	if body == nil {
		return false
	}
	if normalised == "" {
		// Only symbols or emoji: nothing survives normalising, so compare
		// the texts themselves.
		return strings.TrimSpace(*body) == strings.TrimSpace(text)
	}
	return normalise(*body) == normalised
}

func hasAttachment(atts []Attachment, filename string) bool {
	for _, a := range atts {
		if a.TransferName == filename {
			return true
		}
	}
	return false
}

// normalise keeps only the letters and digits of s.
func normalise(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			return r
		}
		return -1
	}, s)
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
type msgScan struct {
	rowID                                int64
	guid, text, handleAddr, service      sql.NullString
	body                                 sql.RawBytes
	date, dateRead                       sql.NullInt64
	isFromMe, isSent, isDelivered, audio sql.NullInt64
	errCode, assocType, itemType         sql.NullInt64
	assocGUID, threadGUID, balloon       sql.NullString
	chatID                               sql.NullInt64
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
	for rs.Next() {
		if err := rs.Scan(&s.rowID, &s.guid, &s.text, &s.body, &s.handleAddr, &s.service, &s.date,
			&s.isFromMe, &s.isSent, &s.errCode, &s.assocGUID, &s.assocType, &s.itemType,
			&s.dateRead, &s.isDelivered, &s.audio, &s.threadGUID, &s.balloon, &s.chatID); err != nil {
			return nil, nil, fmt.Errorf("chatdb: scan message: %w", err)
		}
		r := Row{
			RowID:                s.rowID,
			GUID:                 s.guid.String,
			IsFromMe:             s.isFromMe.Int64 != 0,
			Service:              serviceName(s.service.String),
			Date:                 AppleTime(s.date.Int64),
			DateRead:             AppleTime(s.dateRead.Int64),
			IsSent:               s.isSent.Int64 != 0,
			IsDelivered:          s.isDelivered.Int64 != 0,
			Error:                int(s.errCode.Int64),
			IsAudioMessage:       s.audio.Int64 != 0,
			ItemType:             int(s.itemType.Int64),
			AssociatedGUID:       cleanAssociatedGUID(s.assocGUID.String),
			AssociatedType:       int(s.assocType.Int64),
			ThreadOriginatorGUID: s.threadGUID.String,
			BalloonBundleID:      s.balloon.String,
			Chat:                 Chat{RowID: s.chatID.Int64},
		}
		if !r.IsFromMe {
			r.Sender = s.handleAddr.String
		}
		text := body(s.text.String, s.body)
		if !r.IsAudioMessage {
			r.Text = text
		} else {
			// The body of a voice memo is its U+FFFC placeholder. Recent
			// macOS keeps the transcription as an attribute of that
			// placeholder, and in the attachment's user_info (see complete);
			// a body text is taken only when neither has one.
			if t, ok := attributedTranscription(s.body); ok {
				r.Transcription = &t
			} else if text != nil {
				r.Transcription = text
				if weak == nil {
					weak = map[int64]bool{}
				}
				weak[r.RowID] = true
			}
		}
		rows = append(rows, r)
	}
	if err := rs.Err(); err != nil {
		return nil, nil, fmt.Errorf("chatdb: query messages: %w", err)
	}
	return rows, weak, nil
}

// body returns the message body: text when not empty, else the text decoded
// from attributedBody, without U+FFFC placeholders; nil when empty.
func body(text string, attributed []byte) *string {
	if text == "" && len(attributed) > 0 {
		// A blob that does not decode leaves the row without a body, like
		// a system row; it must not stop the rows after it.
		text, _ = typedstream.Text(attributed)
	}
	if strings.Contains(text, objectReplacement) {
		text = strings.TrimSpace(strings.ReplaceAll(text, objectReplacement, ""))
	}
	if strings.TrimSpace(text) == "" {
		return nil
	}
	return &text
}

// serviceName maps Messages' service names to ours: "sms" for SMS and RCS,
// "imessage" for the rest, "" when unknown (empty or "any").
func serviceName(s string) string {
	switch strings.ToLower(s) {
	case "":
		return ""
	case "sms", "rcs":
		return "sms"
	case "any":
		return ""
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

// complete adds chats (with participants) and attachments to rows, and the
// voice memo transcriptions stored with the attachment.
func (db *DB) complete(ctx context.Context, tx *sql.Tx, rows []Row, weak map[int64]bool, window *rowWindow) error {
	if len(rows) == 0 {
		return nil
	}
	chats, err := db.chats(ctx, tx, rows)
	if err != nil {
		return err
	}
	atts, err := db.attachments(ctx, tx, rows, window)
	if err != nil {
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

// chats loads the chats of rows, with their participants.
func (db *DB) chats(ctx context.Context, tx *sql.Tx, rows []Row) (map[int64]Chat, error) {
	var ids []int64
	seen := map[int64]bool{}
	for _, r := range rows {
		if id := r.Chat.RowID; id != 0 && !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	chats := make(map[int64]Chat, len(ids))
	participants := map[int64][]string{}
	err := inChunks(ids, 500, func(chunk []int64) error {
		args := make([]any, len(chunk))
		for i, id := range chunk {
			args[i] = id
		}
		in := " IN (" + placeholders(len(chunk)) + ")"
		rs, err := tx.QueryContext(ctx, "SELECT ROWID, guid, style, chat_identifier, service_name, display_name FROM chat WHERE ROWID"+in, args...)
		if err != nil {
			return fmt.Errorf("chatdb: query chats: %w", err)
		}
		defer rs.Close()
		for rs.Next() {
			var c Chat
			var guid, ident, service, name sql.NullString
			var style sql.NullInt64
			if err := rs.Scan(&c.RowID, &guid, &style, &ident, &service, &name); err != nil {
				return fmt.Errorf("chatdb: scan chat: %w", err)
			}
			c.GUID, c.Identifier, c.DisplayName = guid.String, ident.String, name.String
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
			var msgID int64
			var guid, filename, mime, uti, name sql.NullString
			var total, state sql.NullInt64
			if err := rs.Scan(&msgID, &guid, &filename, &mime, &uti, &name, &total, &state); err != nil {
				return fmt.Errorf("chatdb: scan attachment: %w", err)
			}
			out[msgID] = append(out[msgID], Attachment{
				GUID:          guid.String,
				Path:          expandHome(filename.String, home),
				MimeType:      mime.String,
				UTI:           uti.String,
				TransferName:  name.String,
				TotalBytes:    total.Int64,
				TransferState: int(state.Int64),
			})
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
