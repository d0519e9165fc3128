// Package chatdb reads the macOS Messages database (~/Library/Messages/chat.db)
// without ever writing to it.
//
// Messages owns the file and keeps writing to it (WAL mode) while we read, so
// every read is a short transaction on a read-only connection: a long reader
// would stop Messages from checkpointing its write-ahead log. Apple changes
// the schema between macOS releases; Open probes it and refuses clearly when a
// column we cannot work without is missing, and leaves out the optional ones.
package chatdb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// busyTimeout is how long a read waits for a lock Messages holds (the WAL
// index during a checkpoint, a schema change) before failing.
const busyTimeout = 5 * time.Second

// DB is a read-only handle on chat.db. It is safe for concurrent use.
type DB struct {
	db   *sql.DB
	path string
	cols columns

	// Queries built once from the probed schema.
	selectMessages     string
	selectAttach       string // by message: message ROWID, then the attachment
	selectAttachByGUID string // the same columns, by attachment GUID

	// Changed's connection and the data_version it last saw.
	versionMu   sync.Mutex
	versionConn *sql.Conn
	version     int64
	versionSeen bool
}

// Open opens the Messages database at path read-only and checks its schema.
//
// It fails with an error naming every missing column when the database lacks
// one we cannot work without (an unsupported macOS version), and with an error
// asking for Full Disk Access when macOS refuses to let us read the file.
func Open(ctx context.Context, path string) (*DB, error) {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("chatdb: %s does not exist (has Messages been opened and signed in on this Mac?): %w", path, err)
	case errors.Is(err, os.ErrPermission):
		return nil, permissionError(path, err)
	case err != nil:
		return nil, fmt.Errorf("chatdb: %w", err)
	case fi.IsDir():
		return nil, fmt.Errorf("chatdb: %s is a directory, not the Messages database", path)
	}

	db, err := sql.Open("sqlite", dsn(path))
	if err != nil {
		return nil, fmt.Errorf("chatdb: open %s: %w", path, err)
	}
	// A reader needs few connections; idle ones are let go so that we hold
	// nothing open on Messages' file between polls for long.
	db.SetMaxOpenConns(4)
	db.SetMaxIdleConns(2)
	db.SetConnMaxIdleTime(time.Minute)

	d := &DB{db: db, path: path}
	if err := d.probe(ctx); err != nil {
		db.Close()
		if isPermission(err) {
			return nil, permissionError(path, err)
		}
		return nil, err
	}
	d.buildQueries()
	return d, nil
}

// dsn is the read-only SQLite URI for path. It never sets immutable=1: that
// would tell SQLite the file does not change and new WAL content would go
// unseen.
func dsn(path string) string {
	u := url.URL{Path: path}
	return "file:" + u.EscapedPath() + "?mode=ro&_busy_timeout=" + fmt.Sprint(busyTimeout.Milliseconds())
}

// Close closes the database.
func (db *DB) Close() error {
	db.versionMu.Lock()
	if db.versionConn != nil {
		db.versionConn.Close()
		db.versionConn = nil
	}
	db.versionMu.Unlock()
	return db.db.Close()
}

// isPermission reports whether err is SQLite failing to open the file, which
// on macOS means the process lacks Full Disk Access (TCC denies the open even
// to the file's owner).
func isPermission(err error) bool {
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_AUTH, sqlite3.SQLITE_PERM:
			return true
		}
	}
	msg := err.Error()
	return strings.Contains(msg, "authorization denied") ||
		strings.Contains(msg, "unable to open database file") ||
		errors.Is(err, os.ErrPermission)
}

func permissionError(path string, err error) error {
	exe, xerr := os.Executable()
	if xerr != nil {
		exe = "the blueline binary"
	}
	return fmt.Errorf("chatdb: cannot read %s: grant Full Disk Access to %s "+
		"(System Settings > Privacy & Security > Full Disk Access; when run from a terminal, grant it to the terminal app): %w",
		path, exe, err)
}

// A columns records, per table, which columns the database has.
type columns map[string]map[string]bool

func (c columns) has(table, column string) bool { return c[table][column] }

// required lists, per table, the columns every supported macOS (11 and
// later) has and without which we cannot map a row.
var required = []struct {
	table   string
	columns []string
}{
	{"message", []string{"ROWID", "guid", "text", "attributedBody", "handle_id", "service", "date",
		"is_from_me", "is_sent", "error", "associated_message_guid", "associated_message_type",
		"cache_has_attachments", "item_type"}},
	{"chat", []string{"ROWID", "guid", "style", "chat_identifier", "service_name", "display_name"}},
	{"handle", []string{"ROWID", "id"}},
	{"attachment", []string{"ROWID", "guid", "filename", "mime_type", "transfer_name", "total_bytes"}},
	{"chat_message_join", []string{"chat_id", "message_id"}},
	{"chat_handle_join", []string{"chat_id", "handle_id"}},
	{"message_attachment_join", []string{"message_id", "attachment_id"}},
}

// probe reads the columns of every table we use. pragma_table_info does not
// list the implicit ROWID, so ROWID counts as present when the table exists.
func (db *DB) probe(ctx context.Context) error {
	db.cols = columns{}
	var problems []string
	for _, r := range required {
		cols, err := db.tableColumns(ctx, r.table)
		if err != nil {
			return fmt.Errorf("chatdb: probe table %s in %s: %w", r.table, db.path, err)
		}
		db.cols[r.table] = cols
		if len(cols) == 0 {
			problems = append(problems, fmt.Sprintf("table %s is missing", r.table))
			continue
		}
		var missing []string
		for _, c := range r.columns {
			if !cols[strings.ToLower(c)] {
				missing = append(missing, c)
			}
		}
		if len(missing) > 0 {
			problems = append(problems, fmt.Sprintf("table %s lacks column(s) %s", r.table, strings.Join(missing, ", ")))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("chatdb: unsupported Messages database %s: %s; this macOS version may be unsupported",
			db.path, strings.Join(problems, "; "))
	}
	return nil
}

// tableColumns returns the lower-cased column names of table (none when the
// table does not exist), with "rowid" added for an existing table.
func (db *DB) tableColumns(ctx context.Context, table string) (map[string]bool, error) {
	rows, err := db.db.QueryContext(ctx, "SELECT name FROM pragma_table_info(?)", table)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols := map[string]bool{}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, err
		}
		cols[strings.ToLower(name)] = true
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(cols) > 0 {
		cols["rowid"] = true
	}
	return cols, nil
}

// opt returns the SQL for an optional column: the qualified column when the
// table has it, else the fallback literal. Only our own identifiers and
// literals ever reach the query text.
func (db *DB) opt(table, alias, column, fallback string) string {
	if db.cols.has(table, strings.ToLower(column)) {
		return alias + "." + column
	}
	return fallback
}

// buildQueries assembles the SELECTs from what the probe found.
func (db *DB) buildQueries() {
	// The yes/no columns come as one integer of flags (see msgFlag…): a
	// first start reads a million rows, and each column the driver hands
	// over costs more than the arithmetic that packs it.
	flag := func(col string, bit int) string {
		// SQLite gives << and | the same precedence: each term in brackets.
		return fmt.Sprintf("((IFNULL(%s, 0) != 0) << %d)", col, bit)
	}
	flags := "(" + strings.Join([]string{
		flag("m.is_from_me", msgFlagFromMe),
		flag("m.is_sent", msgFlagSent),
		flag(db.opt("message", "m", "is_delivered", "0"), msgFlagDelivered),
		flag(db.opt("message", "m", "is_audio_message", "0"), msgFlagAudio),
		flag(db.opt("message", "m", "is_read", "0"), msgFlagRead),
		flag("m.cache_has_attachments", msgFlagHasAttachments),
		flag(db.opt("message", "m", "is_spam", "0"), msgFlagSpam),
	}, " | ") + ")"
	otherHandle := "NULL"
	if db.cols.has("message", "other_handle") {
		// Most rows have none: no lookup for them.
		otherHandle = "CASE WHEN m.other_handle > 0 THEN (SELECT oh.id FROM handle oh WHERE oh.ROWID = m.other_handle) END"
	}
	msgCols := []string{
		"m.ROWID", "m.guid", "m.text", "m.attributedBody", "h.id", "m.service", "m.date",
		flags, "m.error", "m.associated_message_guid", "m.associated_message_type",
		"m.item_type",
		db.opt("message", "m", "date_read", "0"),
		db.opt("message", "m", "thread_originator_guid", "NULL"),
		db.opt("message", "m", "balloon_bundle_id", "NULL"),
		db.opt("message", "m", "date_delivered", "0"),
		db.opt("message", "m", "date_edited", "0"),
		db.opt("message", "m", "date_retracted", "0"),
		db.opt("message", "m", "associated_message_emoji", "NULL"),
		db.opt("message", "m", "group_action_type", "0"),
		db.opt("message", "m", "group_title", "NULL"),
		otherHandle,
		db.opt("message", "m", "schedule_type", "0"),
		db.opt("message", "m", "account", "NULL"),
		db.opt("message", "m", "destination_caller_id", "NULL"),
		db.opt("message", "m", "message_summary_info", "NULL"),
		db.opt("message", "m", "part_count", "NULL"),
		db.opt("message", "m", "reply_to_guid", "NULL"),
		// A message can sit in several chats: take the lowest chat ROWID.
		"(SELECT MIN(cmj.chat_id) FROM chat_message_join cmj WHERE cmj.message_id = m.ROWID)",
	}
	db.selectMessages = "SELECT " + strings.Join(msgCols, ", ") +
		" FROM message m LEFT JOIN handle h ON h.ROWID = m.handle_id"

	attCols := strings.Join([]string{
		"a.guid", "a.filename", "a.mime_type",
		db.opt("attachment", "a", "uti", "NULL"),
		"a.transfer_name", "a.total_bytes",
		db.opt("attachment", "a", "transfer_state", "0"),
		// Genmoji and inline stickers (macOS 15.1 and later).
		db.opt("attachment", "a", "emoji_image_short_description", "NULL"),
	}, ", ")
	db.selectAttach = "SELECT maj.message_id, " + attCols +
		" FROM message_attachment_join maj JOIN attachment a ON a.ROWID = maj.attachment_id"
	db.selectAttachByGUID = "SELECT 0, " + attCols + " FROM attachment a"
}

// readTx runs fn in one short read transaction, so that the queries behind
// one call see the same snapshot of the database.
func (db *DB) readTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := db.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("chatdb: begin: %w", err)
	}
	defer tx.Rollback()
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit()
}

// MaxRowID returns the highest message ROWID, 0 when the table is empty.
func (db *DB) MaxRowID(ctx context.Context) (int64, error) {
	var max sql.NullInt64
	if err := db.db.QueryRowContext(ctx, "SELECT MAX(ROWID) FROM message").Scan(&max); err != nil {
		return 0, fmt.Errorf("chatdb: max rowid: %w", err)
	}
	return max.Int64, nil
}

// LastRowID returns the highest message ROWID Messages has handed out,
// which deleting the newest rows does not lower (AUTOINCREMENT keeps it in
// sqlite_sequence); MaxRowID where there is no such record.
func (db *DB) LastRowID(ctx context.Context) (int64, error) {
	var seq sql.NullInt64
	err := db.db.QueryRowContext(ctx, "SELECT seq FROM sqlite_sequence WHERE name = 'message'").Scan(&seq)
	switch {
	case err == nil && seq.Valid:
		return seq.Int64, nil
	case err == nil, errors.Is(err, sql.ErrNoRows), strings.Contains(err.Error(), "no such table"):
		return db.MaxRowID(ctx)
	}
	return 0, fmt.Errorf("chatdb: last rowid: %w", err)
}

// inChunks calls fn with successive slices of ids of at most n elements.
func inChunks[T any](ids []T, n int, fn func([]T) error) error {
	for chunk := range slices.Chunk(ids, n) {
		if err := fn(chunk); err != nil {
			return err
		}
	}
	return nil
}

// placeholders returns "?, ?, …" for n parameters.
func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}
