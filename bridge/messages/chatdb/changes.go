package chatdb

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// RowState is what Messages may change on a message row after writing it:
// an edit, an unsend, delivery, reading, a late error, a file arriving. Two
// states of a row are equal when none of these changed.
type RowState struct {
	RowID       int64
	GUID        string
	IsFromMe    bool
	IsSent      bool
	IsDelivered bool
	IsRead      bool
	Error       int
	Edited      int64 // the raw dates
	Retracted   int64
	Delivered   int64
	Read        int64
	// Files sums up the transfer of the row's attachments.
	Files string
}

// RowStates returns the states of the message rows dated at or after since
// that may change or have changed: edited or unsent rows, rows of ours
// (sent, delivered, read, failed), rows with attachments, contacts' rows
// unread or read in the window. The date index bounds the rows looked at to
// the window; nothing else is decoded.
func (db *DB) RowStates(ctx context.Context, since time.Time) ([]RowState, error) {
	rs, err := db.db.QueryContext(ctx, db.rowStatesQuery(), appleNanos(since))
	if err != nil {
		return nil, fmt.Errorf("chatdb: query row states: %w", err)
	}
	defer rs.Close()
	var out []RowState
	for rs.Next() {
		var s RowState
		var fromMe, sent, isDelivered, isRead, errCode, edited, retracted, delivered, read sql.NullInt64
		var files sql.NullString
		if err := rs.Scan(&s.RowID, &s.GUID, &fromMe, &sent, &isDelivered, &isRead, &errCode, &edited, &retracted, &delivered, &read, &files); err != nil {
			return nil, fmt.Errorf("chatdb: scan row state: %w", err)
		}
		s.IsFromMe, s.IsSent, s.Error = fromMe.Int64 != 0, sent.Int64 != 0, int(errCode.Int64)
		s.IsDelivered, s.IsRead = isDelivered.Int64 != 0, isRead.Int64 != 0
		s.Edited, s.Retracted, s.Delivered, s.Read, s.Files = edited.Int64, retracted.Int64, delivered.Int64, read.Int64, files.String
		out = append(out, s)
	}
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("chatdb: query row states: %w", err)
	}
	return out, nil
}

// rowStatesQuery selects the states RowStates returns, its one parameter
// the start of the window.
func (db *DB) rowStatesQuery() string {
	isRead, dateRead := db.opt("message", "m", "is_read", "0"), db.opt("message", "m", "date_read", "0")
	return `SELECT m.ROWID, m.guid, m.is_from_me, m.is_sent, ` + db.opt("message", "m", "is_delivered", "0") + `, ` + isRead + `, m.error, ` +
		db.opt("message", "m", "date_edited", "0") + `, ` + db.opt("message", "m", "date_retracted", "0") + `, ` +
		db.opt("message", "m", "date_delivered", "0") + `, ` + db.opt("message", "m", "date_read", "0") + `,
		CASE WHEN m.cache_has_attachments = 1 THEN (SELECT group_concat(IFNULL(a.transfer_state, 0) || (a.filename IS NOT NULL), ',')
			FROM message_attachment_join maj JOIN attachment a ON a.ROWID = maj.attachment_id
			WHERE maj.message_id = m.ROWID) END
		FROM message m
		WHERE m.date >= ?1 AND m.associated_message_type = 0 AND m.item_type = 0
			AND (m.is_from_me = 1 OR m.cache_has_attachments = 1 OR ` +
		db.opt("message", "m", "date_edited", "0") + ` > 0 OR ` + db.opt("message", "m", "date_retracted", "0") + ` > 0 OR ` +
		isRead + ` = 0 OR ` + dateRead + ` >= ?1)`
}

// Changed reports whether another connection (Messages) committed to the
// database since the last call; the first call reports true. It asks
// SQLite's data_version on a connection kept for this alone, which costs
// no read of the database: an idle Mac stays idle. On an error it reports
// true, so that the caller reads rather than miss a change.
func (db *DB) Changed(ctx context.Context) (bool, error) {
	db.versionMu.Lock()
	defer db.versionMu.Unlock()
	if db.versionConn == nil {
		c, err := db.db.Conn(ctx)
		if err != nil {
			return true, fmt.Errorf("chatdb: data version connection: %w", err)
		}
		db.versionConn = c
	}
	var v int64
	if err := db.versionConn.QueryRowContext(ctx, "PRAGMA data_version").Scan(&v); err != nil {
		db.versionConn.Close()
		db.versionConn = nil
		return true, fmt.Errorf("chatdb: data version: %w", err)
	}
	changed := !db.versionSeen || v != db.version
	db.version, db.versionSeen = v, true
	return changed, nil
}
