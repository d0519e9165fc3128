// Package search is the full-text index of the lines' messages: SQLite
// FTS5 (through modernc.org/sqlite, pure Go) in a file of its own beside
// the database, following storage's search feed (every message stored or
// changed, in commit order).
//
// It stays consistent with storage across crashes without sharing a
// transaction with it: the index records, in the SQLite transaction that
// applies a batch of the feed, how far in the feed it got (its cursor);
// storage trims the feed only up to a cursor the index has committed. A
// crash at any point leaves changes after the cursor in the feed, applied
// again at the next start (applying a message twice leaves it indexed
// once, as it is now). An index built afresh — a new one, one the feed
// has outrun, or one left behind by a database put back from a backup —
// first reads every stored message, noting the feed's position before it
// starts: what changes during the scan is in the feed after that
// position.
package search

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	_ "modernc.org/sqlite" // the database/sql driver "sqlite"

	"github.com/blueline-app/blueline/storage"
)

// Source is the store the index follows: storage.DB.
type Source interface {
	MessageChanges(ctx context.Context, after uint64, max int) ([]storage.MessageChange, error)
	MessageChangesSeq(ctx context.Context) (uint64, error)
	TrimMessageChanges(ctx context.Context, upTo uint64) error
	AllMessages(ctx context.Context, after []byte, max int) ([]storage.Message, []byte, error)
	EventsChanged() <-chan struct{}
	Importing() (bool, <-chan struct{})
}

// batch is how many messages one SQLite transaction applies.
const batch = 1000

// poll is how often the index looks for changes that come without an
// event (history imported, a delivery recorded); an event wakes it after
// gather, so that the changes of a busy moment go in a few transactions:
// woken at once, under 10,000 sends a second the index committed (and
// fsynced) a few messages at a time and took a core from the sends.
const (
	poll   = time.Second
	gather = 200 * time.Millisecond
)

// schemaVersion is the index's layout (SQLite's user_version). An index of
// another layout is built again from the store: it holds nothing the store
// does not.
const schemaVersion = 2

const schema = `
CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS chats (
	id      INTEGER PRIMARY KEY,
	chat_id TEXT NOT NULL UNIQUE,
	line_id TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS msgs (
	id      INTEGER PRIMARY KEY,
	msg_id  BLOB NOT NULL UNIQUE,
	chat    INTEGER NOT NULL,
	sent_at INTEGER NOT NULL
);
CREATE VIRTUAL TABLE IF NOT EXISTS fts USING fts5(body, content = '', contentless_delete = 1, tokenize = 'unicode61 remove_diacritics 2');
`

// The index keeps no copy of the text (content = ''): results are message
// IDs read from the store, and the store already holds every message, so a
// second copy would only double what a heavy user's history takes on disk.
// contentless_delete lets an edit or unsend replace a row. What maps the
// index's rows to messages is kept small for the same reason: a message ID
// in its 16 bytes (storage.CompactMessageID), its chat as a number (the
// chats table), no index but the ID's. Layout 1 kept the IDs as text with
// an index by chat: 204 bytes a message beside the text index's 33
// (BenchmarkSearch's messages).

// Index is the full-text index. Search is safe for concurrent use; one
// Run applies the feed.
type Index struct {
	db  *sql.DB
	src Source
	log *slog.Logger

	mu     sync.Mutex
	caught chan struct{} // closed once the index has caught up with the feed at least once
	seen   uint64        // the cursor: the last change of the feed applied

	// chats are the chats table's numbers as committed, by chat ID; only
	// the goroutine of Run uses them.
	chats map[string]int64
}

// Open opens (creating if needed) the index in the file path.
func Open(ctx context.Context, path string, src Source, log *slog.Logger) (*Index, error) {
	u := url.URL{Path: path}
	dsn := "file:" + u.EscapedPath() + "?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=busy_timeout(5000)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("search index: %w", err)
	}
	if err := migrate(ctx, db); err != nil {
		db.Close()
		return nil, fmt.Errorf("search index %s: %w", path, err)
	}
	return &Index{db: db, src: src, log: log, caught: make(chan struct{}), chats: map[string]int64{}}, nil
}

// migrate creates the index's tables, in place of those of another
// layout: the index is then built again (prepare finds no cursor).
func migrate(ctx context.Context, db *sql.DB) error {
	var version int
	if err := db.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&version); err != nil {
		return err
	}
	if version == schemaVersion {
		_, err := db.ExecContext(ctx, schema)
		return err
	}
	var tables int
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM sqlite_schema WHERE type = 'table'`).Scan(&tables); err != nil {
		return err
	}
	if tables > 0 {
		for _, t := range []string{"fts", "msgs", "chats", "meta"} {
			if _, err := db.ExecContext(ctx, `DROP TABLE IF EXISTS `+t); err != nil {
				return err
			}
		}
		// The old index's pages back to the file system, not kept free.
		if _, err := db.ExecContext(ctx, `VACUUM`); err != nil {
			return err
		}
	}
	if _, err := db.ExecContext(ctx, schema); err != nil {
		return err
	}
	_, err := db.ExecContext(ctx, fmt.Sprintf(`PRAGMA user_version = %d`, schemaVersion))
	return err
}

// Close closes the index; Run must have returned.
func (ix *Index) Close() error { return ix.db.Close() }

// Caught is closed once the index has applied every change stored before
// it (the scan of a new index included).
func (ix *Index) Caught() <-chan struct{} { return ix.caught }

// meta keys.
const (
	keyCursor  = "cursor"  // the last change of the feed applied
	keyScan    = "scan"    // where the scan of every message is, while one runs
	keyScanned = "scanned" // "1" once every stored message has been read
)

func (ix *Index) meta(ctx context.Context, k string) ([]byte, error) {
	var v []byte
	err := ix.db.QueryRowContext(ctx, `SELECT v FROM meta WHERE k = ?`, k).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	return v, err
}

func setMeta(ctx context.Context, tx *sql.Tx, k string, v []byte) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO meta (k, v) VALUES (?, ?) ON CONFLICT (k) DO UPDATE SET v = excluded.v`, k, v)
	return err
}

func seqBytes(n uint64) []byte { return []byte(strconv.FormatUint(n, 10)) }

// Run builds the index if it must and then follows the feed, until ctx
// ends. An error of the index or of the store is logged and tried again.
func (ix *Index) Run(ctx context.Context) {
	for ctx.Err() == nil {
		err := ix.run(ctx)
		if err == nil || ctx.Err() != nil {
			return
		}
		ix.log.Error("search index: retrying", "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(poll):
		}
	}
}

func (ix *Index) run(ctx context.Context) error {
	if err := ix.prepare(ctx); err != nil {
		return err
	}
	tick := time.NewTicker(poll)
	defer tick.Stop()
	// A long run of the feed (a history import's) is logged once applied:
	// search finds all of it from then on.
	var applied int
	var since time.Time
	for {
		if err := ix.awaitImports(ctx); err != nil {
			return nil
		}
		changed := ix.src.EventsChanged()
		n, more, err := ix.follow(ctx)
		if err != nil {
			return err
		}
		if n > 0 && applied == 0 {
			since = time.Now()
		}
		if applied += n; more {
			continue
		}
		if applied >= batch {
			ix.log.Info("search index caught up", "messages", applied, "took", time.Since(since).Round(time.Millisecond))
		}
		applied = 0
		ix.mu.Lock()
		select {
		case <-ix.caught:
		default:
			close(ix.caught)
		}
		ix.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(gather):
			}
		case <-tick.C:
		}
	}
}

// prepare finds the cursor, and scans every stored message into the index
// when it is new or cannot follow this database.
func (ix *Index) prepare(ctx context.Context) error {
	cur, err := ix.meta(ctx, keyCursor)
	if err != nil {
		return err
	}
	scanned, err := ix.meta(ctx, keyScanned)
	if err != nil {
		return err
	}
	last, err := ix.src.MessageChangesSeq(ctx)
	if err != nil {
		return err
	}
	seen, _ := strconv.ParseUint(string(cur), 10, 64)
	if cur == nil || seen > last {
		// New, or it has seen more than this database ever fed: it
		// followed another one (a backup put back). Start over from the
		// feed's position now.
		if cur != nil {
			ix.log.Warn("search index: the database is not the one it followed; building it again")
		}
		tx, err := ix.db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		for _, q := range []string{`DELETE FROM msgs`, `DELETE FROM chats`, `DELETE FROM fts`, `DELETE FROM meta`} {
			if _, err := tx.ExecContext(ctx, q); err != nil {
				return err
			}
		}
		if err := setMeta(ctx, tx, keyCursor, seqBytes(last)); err != nil {
			return err
		}
		if err := tx.Commit(); err != nil {
			return err
		}
		clear(ix.chats)
		seen, scanned = last, nil
	}
	ix.seen = seen
	if string(scanned) == "1" {
		return nil
	}
	return ix.scan(ctx)
}

// scan reads every stored message into the index, a page a transaction,
// noting where it is so that a scan cut short goes on where it stopped.
func (ix *Index) scan(ctx context.Context) error {
	at, err := ix.meta(ctx, keyScan)
	if err != nil {
		return err
	}
	start, n := time.Now(), 0
	for {
		if err := ix.awaitImports(ctx); err != nil {
			return err
		}
		// A scan from the start notes the feed's position as it starts
		// reading, not when the index was made: on a first start that was
		// before the import, which the scan waits for and then reads, and
		// which the feed would then have applied all over again (a
		// million messages put twice).
		var from *uint64
		if at == nil {
			last, err := ix.src.MessageChangesSeq(ctx)
			if err != nil {
				return err
			}
			from = &last
		}
		msgs, next, err := ix.src.AllMessages(ctx, at, batch)
		if err != nil {
			return err
		}
		tx, err := ix.db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		if from != nil {
			if err := setMeta(ctx, tx, keyCursor, seqBytes(*from)); err != nil {
				tx.Rollback()
				return err
			}
		}
		w := ix.writer(tx)
		for i := range msgs {
			if err := w.put(ctx, &msgs[i]); err != nil {
				tx.Rollback()
				return err
			}
		}
		n += len(msgs)
		if next == nil {
			err = setMeta(ctx, tx, keyScanned, []byte("1"))
		} else {
			err = setMeta(ctx, tx, keyScan, next)
		}
		if err == nil {
			err = w.commit()
		} else {
			tx.Rollback()
		}
		if err == nil && from != nil {
			ix.seen = *from
			// What the feed held before is in the store the scan reads.
			err = ix.src.TrimMessageChanges(ctx, *from)
		}
		if err != nil || next == nil {
			if err == nil {
				ix.log.Info("search index built", "messages", n, "took", time.Since(start).Round(time.Millisecond))
			}
			return err
		}
		at = next
	}
}

// awaitImports waits while a history import is in progress: indexing
// beside a first start's import slowed it by a tenth and grew the store (see
// storage.DB.Importing); what the import stored is in the feed, indexed
// once it ends. It returns ctx's error when ctx ends first.
func (ix *Index) awaitImports(ctx context.Context) error {
	for {
		busy, ended := ix.src.Importing()
		if !busy {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ended:
		}
	}
}

// follow applies a batch of the feed after the cursor: n changes; more is
// true when there may be more.
func (ix *Index) follow(ctx context.Context) (n int, more bool, err error) {
	changes, err := ix.src.MessageChanges(ctx, ix.seen, batch)
	if err != nil || len(changes) == 0 {
		return 0, false, err
	}
	tx, err := ix.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, false, err
	}
	defer tx.Rollback()
	w := ix.writer(tx)
	for i := range changes {
		if err := w.put(ctx, &changes[i].Message); err != nil {
			return 0, false, err
		}
	}
	last := changes[len(changes)-1].Seq
	if err := setMeta(ctx, tx, keyCursor, seqBytes(last)); err != nil {
		return 0, false, err
	}
	if err := w.commit(); err != nil {
		return 0, false, err
	}
	ix.seen = last
	// Only what the index has committed is trimmed.
	if err := ix.src.TrimMessageChanges(ctx, last); err != nil {
		return 0, false, err
	}
	return len(changes), len(changes) >= batch, nil
}

// body is what a message is found by: its text and its attachments'
// transcriptions; nothing once unsent.
func body(m *storage.Message) string {
	var parts []string
	if m.Text != nil {
		parts = append(parts, *m.Text)
	}
	for _, a := range m.Attachments {
		if a.Transcription != nil {
			parts = append(parts, *a.Transcription)
		}
	}
	return strings.Join(parts, "\n")
}

// writer applies messages to the index in one transaction.
type writer struct {
	ix    *Index
	tx    *sql.Tx
	chats map[string]int64 // numbered in tx, known once it commits
	// stmts are prepared once a transaction: each statement parsed again
	// for every message was 40% of the index's CPU under a load of sends.
	stmts map[string]*sql.Stmt
}

func (ix *Index) writer(tx *sql.Tx) *writer {
	return &writer{ix: ix, tx: tx, chats: map[string]int64{}, stmts: map[string]*sql.Stmt{}}
}

// stmt is query prepared in the writer's transaction, which closes it.
func (w *writer) stmt(ctx context.Context, query string) (*sql.Stmt, error) {
	if st, ok := w.stmts[query]; ok {
		return st, nil
	}
	st, err := w.tx.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	w.stmts[query] = st
	return st, nil
}

// exec runs a statement of the writer's.
func (w *writer) exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	st, err := w.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	return st.ExecContext(ctx, args...)
}

// queryInt reads the one integer query returns; sql.ErrNoRows when none.
func (w *writer) queryInt(ctx context.Context, query string, args ...any) (int64, error) {
	st, err := w.stmt(ctx, query)
	if err != nil {
		return 0, err
	}
	var n int64
	return n, st.QueryRowContext(ctx, args...).Scan(&n)
}

// commit commits the transaction and keeps the chats it numbered.
func (w *writer) commit() error {
	if err := w.tx.Commit(); err != nil {
		return err
	}
	maps.Copy(w.ix.chats, w.chats)
	return nil
}

// chat is the number of chat chatID of line lineID, numbered if new.
func (w *writer) chat(ctx context.Context, lineID, chatID string) (int64, error) {
	if n, ok := w.ix.chats[chatID]; ok {
		return n, nil
	}
	if n, ok := w.chats[chatID]; ok {
		return n, nil
	}
	n, err := w.queryInt(ctx, `SELECT id FROM chats WHERE chat_id = ?`, chatID)
	if errors.Is(err, sql.ErrNoRows) {
		var res sql.Result
		if res, err = w.exec(ctx, `INSERT INTO chats (chat_id, line_id) VALUES (?, ?)`, chatID, lineID); err == nil {
			n, err = res.LastInsertId()
		}
	}
	if err != nil {
		return 0, err
	}
	w.chats[chatID] = n
	return n, nil
}

// put indexes m as it is now, in place of what the index had of it.
func (w *writer) put(ctx context.Context, m *storage.Message) error {
	msgID := storage.CompactMessageID(m.ID)
	id, err := w.queryInt(ctx, `SELECT id FROM msgs WHERE msg_id = ?`, msgID)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		id = 0
	case err != nil:
		return err
	default:
		if _, err := w.exec(ctx, `DELETE FROM fts WHERE rowid = ?`, id); err != nil {
			return err
		}
	}
	text := body(m)
	if text == "" { // nothing to find it by: an unsent message, a file alone
		if id == 0 {
			return nil
		}
		_, err := w.exec(ctx, `DELETE FROM msgs WHERE id = ?`, id)
		return err
	}
	if id == 0 {
		chat, err := w.chat(ctx, m.LineID, m.ChatID)
		if err != nil {
			return err
		}
		res, err := w.exec(ctx, `INSERT INTO msgs (msg_id, chat, sent_at) VALUES (?, ?, ?)`, msgID, chat, m.SentAt)
		if err != nil {
			return err
		}
		if id, err = res.LastInsertId(); err != nil {
			return err
		}
	}
	_, err = w.exec(ctx, `INSERT INTO fts (rowid, body) VALUES (?, ?)`, id, text)
	return err
}

// Query is a search of one line's messages (of one chat, when ChatID is
// set), most recent first, starting after Before (a Hit's Cursor).
type Query struct {
	LineID string
	ChatID string
	Text   string
	Limit  int
	Before string
}

// Hit is a message found.
type Hit struct {
	MessageID string
	SentAt    int64
	// Cursor is where the next page starts after this hit.
	Cursor string
}

// ErrNoWords refuses a query with nothing to search for.
var ErrNoWords = errors.New("no words to search for")

// ErrBadCursor refuses a cursor that is not a hit's.
var ErrBadCursor = errors.New("not a cursor of this search")

// match turns what a person typed into an FTS5 query: every word must be
// in the message, in any order, case and accents aside; a word ending in *
// matches the words it begins. Nothing of FTS5's own syntax is taken from
// the input, so no input is a syntax error.
func match(text string) (string, error) {
	var terms []string
	for _, w := range strings.FieldsFunc(text, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsNumber(r) && r != '*' }) {
		prefix := strings.HasSuffix(w, "*")
		w = strings.ReplaceAll(w, "*", "")
		if w == "" {
			continue
		}
		t := `"` + w + `"`
		if prefix {
			t += "*"
		}
		terms = append(terms, t)
	}
	if len(terms) == 0 {
		return "", ErrNoWords
	}
	return strings.Join(terms, " "), nil
}

// Search finds the messages of q, most recent first: at most q.Limit, and
// more when there may be more.
func (ix *Index) Search(ctx context.Context, q Query) (hits []Hit, more bool, err error) {
	expr, err := match(q.Text)
	if err != nil {
		return nil, false, err
	}
	before := [2]int64{1<<63 - 1, 1<<63 - 1}
	if q.Before != "" {
		at, id, ok := strings.Cut(q.Before, ".")
		var err1, err2 error
		before[0], err1 = strconv.ParseInt(at, 10, 64)
		before[1], err2 = strconv.ParseInt(id, 10, 64)
		if !ok || err1 != nil || err2 != nil {
			return nil, false, ErrBadCursor
		}
	}
	sqlText := `SELECT m.msg_id, m.sent_at, m.id FROM fts JOIN msgs m ON m.id = fts.rowid
		WHERE fts MATCH ? AND m.chat IN (SELECT id FROM chats WHERE line_id = ? AND (? = '' OR chat_id = ?))
		AND (m.sent_at, m.id) < (?, ?)
		ORDER BY m.sent_at DESC, m.id DESC LIMIT ?`
	rows, err := ix.db.QueryContext(ctx, sqlText, expr, q.LineID, q.ChatID, q.ChatID, before[0], before[1], q.Limit+1)
	if err != nil {
		return nil, false, fmt.Errorf("search: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var h Hit
		var id int64
		var msgID []byte
		if err := rows.Scan(&msgID, &h.SentAt, &id); err != nil {
			return nil, false, err
		}
		h.MessageID = storage.MessageIDFromCompact(msgID)
		h.Cursor = strconv.FormatInt(h.SentAt, 10) + "." + strconv.FormatInt(id, 10)
		hits = append(hits, h)
	}
	if err := rows.Err(); err != nil {
		return nil, false, err
	}
	if len(hits) > q.Limit {
		return hits[:q.Limit], true, nil
	}
	return hits, false, nil
}
