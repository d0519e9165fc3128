package chatdb

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// TraceOptions tunes Trace. Zero values mean the defaults.
type TraceOptions struct {
	// Poll is how often the database is looked at: 1 s. A look costs one
	// PRAGMA while Messages wrote nothing.
	Poll time.Duration
	// Window is how far back a row's date may be for its changes to be
	// seen (rows written during the trace are watched whatever their
	// date): 7 days, as the bridge watches them.
	Window time.Duration
	// MacOS is written into the start record.
	MacOS string
}

// Trace writes to w the shape of every message row Messages writes,
// changes or deletes, one TraceRecord a line: a start record, one record
// per row as it is seen, and an end record once ctx ends (its deadline is
// how long to trace). It returns what it recorded; ctx ending is not an
// error. Each line is written whole as soon as it is known, so that w may
// be read while the trace runs.
//
// A row is new when its ROWID is above the highest one seen; it has
// changed when any of its columns (a blob by its length), its chats or
// its attachments' state differ from the last look. Rows dated before the
// window are not watched for changes.
func (db *DB) Trace(ctx context.Context, w io.Writer, opt TraceOptions) (TraceCounts, error) {
	if opt.Poll <= 0 {
		opt.Poll = time.Second
	}
	if opt.Window <= 0 {
		opt.Window = 7 * 24 * time.Hour
	}
	key := make([]byte, 32)
	rand.Read(key) // never fails (crypto/rand panics rather)
	t := &tracer{db: db, w: w, opt: opt, shape: shaper{key: key}, seen: map[int64][32]byte{}}
	var counts TraceCounts
	if err := t.begin(ctx); err != nil {
		return counts, err
	}
	tick := time.NewTicker(opt.Poll)
	defer tick.Stop()
	for {
		n, err := t.look(ctx)
		counts.Inserts += n.Inserts
		counts.Updates += n.Updates
		counts.Deletes += n.Deletes
		if err != nil && ctx.Err() == nil {
			return counts, err
		}
		select {
		case <-ctx.Done():
			return counts, t.write(TraceRecord{Type: TraceEnd, Ended: time.Now().UnixMilli(), Counts: &counts})
		case <-tick.C:
		}
	}
}

// tracer is one trace under way.
type tracer struct {
	db    *DB
	w     io.Writer
	opt   TraceOptions
	shape shaper
	// start is the highest ROWID when the trace began, cursor the highest
	// seen since.
	start, cursor int64
	// seen holds a fingerprint of each watched row's state.
	seen map[int64][32]byte
	// stateQuery selects each watched row's ROWID and state (see states).
	stateQuery string
	// more is set when the last look left new rows for the next.
	more bool
}

func (t *tracer) write(r TraceRecord) error {
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("chatdb: trace record: %w", err)
	}
	if _, err := t.w.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("chatdb: write the trace: %w", err)
	}
	return nil
}

// begin notes where the database stands and writes the start record.
func (t *tracer) begin(ctx context.Context) error {
	cols, err := t.db.declaredColumns(ctx, "message")
	if err != nil {
		return err
	}
	// A blob is watched by its length: reading every blob of a week of
	// rows at each look would cost more than the trace is worth.
	exprs := []string{"m.ROWID"}
	for _, c := range cols {
		if strings.EqualFold(c.name, "ROWID") {
			continue
		}
		e := "m." + quoteIdent(c.name)
		if strings.EqualFold(c.typ, "BLOB") {
			e = "length(" + e + ")"
		}
		exprs = append(exprs, e)
	}
	exprs = append(exprs,
		`(SELECT group_concat(cmj.chat_id, ',') FROM chat_message_join cmj WHERE cmj.message_id = m.ROWID)`,
		`(SELECT group_concat(a.ROWID || ':' || IFNULL(a.transfer_state, 0) || ':' || (a.filename IS NOT NULL) || ':' || IFNULL(a.total_bytes, 0), ',')
			FROM message_attachment_join maj JOIN attachment a ON a.ROWID = maj.attachment_id WHERE maj.message_id = m.ROWID)`)
	t.stateQuery = "SELECT " + strings.Join(exprs, ", ") + " FROM message m WHERE m.date >= ?1 OR m.ROWID > ?2"

	// Changed's first answer is always true: take it before the snapshot
	// below, so that the first look reads only if something was written
	// since (a write in between is in the snapshot, and seen again only
	// if it changes).
	if _, err := t.db.Changed(ctx); err != nil {
		return err
	}
	err = t.db.readTx(ctx, func(tx *sql.Tx) error {
		if err := tx.QueryRowContext(ctx, "SELECT IFNULL(MAX(ROWID), 0) FROM message").Scan(&t.start); err != nil {
			return fmt.Errorf("chatdb: trace: max rowid: %w", err)
		}
		t.cursor = t.start
		states, err := t.states(ctx, tx)
		if err != nil {
			return err
		}
		t.seen = states
		return nil
	})
	if err != nil {
		return err
	}
	return t.write(TraceRecord{Type: TraceStart, Version: TraceVersion, MacOS: t.opt.MacOS,
		Started: time.Now().UnixMilli(), LastRowID: t.start})
}

// traceBatch bounds the new rows one look reads: a flood of rows (iCloud
// writing history again) is taken in several looks.
const traceBatch = 1000

// look records what changed since the last look, if Messages committed
// anything (or new rows were left for this look).
func (t *tracer) look(ctx context.Context) (TraceCounts, error) {
	var n TraceCounts
	// Changed says true when it cannot tell: the read below then says
	// what is wrong, if anything is.
	if changed, _ := t.db.Changed(ctx); !changed && !t.more {
		return n, nil
	}
	var records []TraceRecord
	err := t.db.readTx(ctx, func(tx *sql.Tx) error {
		// One snapshot for all: the states, the new rows and the changed
		// ones agree.
		states, err := t.states(ctx, tx)
		if err != nil {
			return err
		}
		inserted, err := t.db.tracedRows(ctx, tx, t.shape, "m.ROWID > ? ORDER BY m.ROWID LIMIT ?", t.cursor, traceBatch)
		if err != nil {
			return err
		}
		t.more = len(inserted) == traceBatch
		var changedIDs, goneIDs []int64
		for id, fp := range states {
			if old, ok := t.seen[id]; ok && old != fp && id <= t.cursor {
				changedIDs = append(changedIDs, id)
			}
		}
		for id := range t.seen {
			if _, ok := states[id]; !ok {
				goneIDs = append(goneIDs, id)
			}
		}
		// A row that left the window is not gone; one that no longer
		// exists is.
		gone, err := t.db.missing(ctx, tx, goneIDs)
		if err != nil {
			return err
		}
		slices.Sort(changedIDs)
		var updated []TraceRecord
		err = inChunks(changedIDs, 500, func(chunk []int64) error {
			recs, err := t.db.tracedRows(ctx, tx, t.shape, "m.ROWID IN ("+placeholders(len(chunk))+") ORDER BY m.ROWID", anys(chunk)...)
			updated = append(updated, recs...)
			return err
		})
		if err != nil {
			return err
		}
		now := time.Now().UnixMilli()
		for _, r := range inserted {
			r.Op, r.SeenAt = TraceInsert, now
			records = append(records, r)
			t.cursor = max(t.cursor, r.Message.RowID)
			n.Inserts++
		}
		for _, r := range updated {
			r.Op, r.SeenAt = TraceUpdate, now
			records = append(records, r)
			n.Updates++
		}
		for _, id := range gone {
			records = append(records, TraceRecord{Type: TraceRow, Op: TraceDelete, SeenAt: now, Message: &TracedRow{RowID: id}})
			n.Deletes++
		}
		// Rows past the batch are new at the next look, not changed.
		for id := range states {
			if id > t.cursor {
				delete(states, id)
			}
		}
		t.seen = states
		return nil
	})
	if err != nil {
		return TraceCounts{}, err
	}
	for _, r := range records {
		if err := t.write(r); err != nil {
			return n, err
		}
	}
	return n, nil
}

// states fingerprints the state of every watched row: dated within the
// window, or written since the trace began.
func (t *tracer) states(ctx context.Context, tx *sql.Tx) (map[int64][32]byte, error) {
	since := appleNanos(time.Now().Add(-t.opt.Window))
	rs, err := tx.QueryContext(ctx, t.stateQuery, since, t.start)
	if err != nil {
		return nil, fmt.Errorf("chatdb: trace: query row states: %w", err)
	}
	defer rs.Close()
	cols, err := rs.Columns()
	if err != nil {
		return nil, fmt.Errorf("chatdb: trace: %w", err)
	}
	out := map[int64][32]byte{}
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rs.Next() {
		if err := rs.Scan(ptrs...); err != nil {
			return nil, fmt.Errorf("chatdb: trace: scan row state: %w", err)
		}
		id, _ := vals[0].(int64)
		out[id] = sha256.Sum256(fmt.Appendf(nil, "%#v", vals[1:]))
	}
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("chatdb: trace: query row states: %w", err)
	}
	return out, nil
}

// missing returns those of ids that are no longer in the message table.
func (db *DB) missing(ctx context.Context, tx *sql.Tx, ids []int64) ([]int64, error) {
	present := map[int64]bool{}
	err := inChunks(ids, 500, func(chunk []int64) error {
		got, err := db.queryRowIDs(ctx, tx, "SELECT ROWID FROM message WHERE ROWID IN ("+placeholders(len(chunk))+")", anys(chunk)...)
		for _, id := range got {
			present[id] = true
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	var out []int64
	for _, id := range ids {
		if !present[id] {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out, nil
}

// tracedRows reads the message rows that where selects (with args), with
// the chats, handles and attachments they refer to, as trace records.
func (db *DB) tracedRows(ctx context.Context, tx *sql.Tx, s shaper, where string, args ...any) ([]TraceRecord, error) {
	msgs, err := rawRows(ctx, tx, "SELECT * FROM message m WHERE "+where, args...)
	if err != nil {
		return nil, err
	}
	if len(msgs) == 0 {
		return nil, nil
	}
	ids := make([]int64, len(msgs))
	for i, m := range msgs {
		ids[i] = m.rowID
	}
	chatsOf, err := pairs(ctx, tx, "SELECT message_id, chat_id FROM chat_message_join WHERE message_id IN", ids)
	if err != nil {
		return nil, err
	}
	filesOf, err := pairs(ctx, tx, "SELECT message_id, attachment_id FROM message_attachment_join WHERE message_id IN", ids)
	if err != nil {
		return nil, err
	}
	var chatIDs, fileIDs []int64
	var bodyGUIDs []string
	for _, m := range msgs {
		chatIDs = appendNew(chatIDs, chatsOf[m.rowID]...)
		fileIDs = appendNew(fileIDs, filesOf[m.rowID]...)
		if b, ok := m.get("attributedBody").([]byte); ok {
			bodyGUIDs = append(bodyGUIDs, fileTransferGUIDs(b)...)
		}
	}
	chats, err := rawRowsIn(ctx, tx, "chat", "ROWID", chatIDs)
	if err != nil {
		return nil, err
	}
	memberIDs := make([]int64, 0, len(chats))
	for _, c := range chats {
		memberIDs = append(memberIDs, c.rowID)
	}
	membersOf, err := pairs(ctx, tx, "SELECT chat_id, handle_id FROM chat_handle_join WHERE chat_id IN", memberIDs)
	if err != nil {
		return nil, err
	}
	var handleIDs []int64
	for _, m := range msgs {
		for _, col := range []string{"handle_id", "other_handle"} {
			if id, ok := m.get(col).(int64); ok && id != 0 {
				handleIDs = appendNew(handleIDs, id)
			}
		}
	}
	for _, c := range chats {
		handleIDs = appendNew(handleIDs, membersOf[c.rowID]...)
	}
	handles, err := rawRowsIn(ctx, tx, "handle", "ROWID", handleIDs)
	if err != nil {
		return nil, err
	}
	files, err := rawRowsIn(ctx, tx, "attachment", "ROWID", fileIDs)
	if err != nil {
		return nil, err
	}
	bodyFiles, err := rawRowsIn(ctx, tx, "attachment", "guid", bodyGUIDs)
	if err != nil {
		return nil, err
	}

	byID := func(rows []rawRow) map[int64]rawRow {
		out := make(map[int64]rawRow, len(rows))
		for _, r := range rows {
			out[r.rowID] = r
		}
		return out
	}
	chatByID, handleByID, fileByID := byID(chats), byID(handles), byID(files)
	fileByGUID := map[string]rawRow{}
	for _, f := range bodyFiles {
		if g, ok := f.get("guid").(string); ok {
			fileByGUID[g] = f
		}
	}

	out := make([]TraceRecord, 0, len(msgs))
	for _, m := range msgs {
		rec := TraceRecord{Type: TraceRow}
		msg := m.traced(s, "message")
		rec.Message = &msg
		var hids []int64
		for _, col := range []string{"handle_id", "other_handle"} {
			if id, ok := m.get(col).(int64); ok && id != 0 && !slices.Contains(hids, id) {
				hids = append(hids, id)
			}
		}
		for _, cid := range chatsOf[m.rowID] {
			c, ok := chatByID[cid]
			if !ok {
				continue
			}
			tc := c.traced(s, "chat")
			tc.Members = membersOf[cid]
			rec.Chats = append(rec.Chats, tc)
			for _, h := range tc.Members {
				if !slices.Contains(hids, h) {
					hids = append(hids, h)
				}
			}
		}
		for _, h := range hids {
			if r, ok := handleByID[h]; ok {
				rec.Handles = append(rec.Handles, r.traced(s, "handle"))
			}
		}
		var joined []string
		for _, fid := range filesOf[m.rowID] {
			if f, ok := fileByID[fid]; ok {
				rec.Attachments = append(rec.Attachments, f.traced(s, "attachment"))
				if g, ok := f.get("guid").(string); ok {
					joined = append(joined, g)
				}
			}
		}
		if b, ok := m.get("attributedBody").([]byte); ok {
			for _, g := range fileTransferGUIDs(b) {
				if f, ok := fileByGUID[g]; ok && !slices.Contains(joined, g) {
					tf := f.traced(s, "attachment")
					tf.BodyOnly = true
					rec.Attachments = append(rec.Attachments, tf)
				}
			}
		}
		out = append(out, rec)
	}
	return out, nil
}

// rawRow is a row as SQLite holds it: its column names and values.
type rawRow struct {
	rowID int64
	cols  []string
	vals  []any
}

func (r rawRow) get(col string) any {
	for i, c := range r.cols {
		if strings.EqualFold(c, col) {
			return r.vals[i]
		}
	}
	return nil
}

// traced is the row's shape, its columns named table.column for the shaper.
func (r rawRow) traced(s shaper, table string) TracedRow {
	out := TracedRow{RowID: r.rowID, Columns: make(map[string]TraceValue, len(r.cols))}
	for i, c := range r.cols {
		if strings.EqualFold(c, "ROWID") {
			continue
		}
		out.Columns[c] = s.value(table+"."+c, r.vals[i])
	}
	return out
}

// rawRows runs query, whose first column or one named ROWID is the row's
// ROWID, and returns its rows as they are.
func rawRows(ctx context.Context, tx *sql.Tx, query string, args ...any) ([]rawRow, error) {
	rs, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("chatdb: trace: %w", err)
	}
	defer rs.Close()
	cols, err := rs.Columns()
	if err != nil {
		return nil, fmt.Errorf("chatdb: trace: %w", err)
	}
	idAt := max(slices.IndexFunc(cols, func(c string) bool { return strings.EqualFold(c, "ROWID") }), 0)
	var out []rawRow
	for rs.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rs.Scan(ptrs...); err != nil {
			return nil, fmt.Errorf("chatdb: trace: scan: %w", err)
		}
		id, _ := vals[idAt].(int64)
		out = append(out, rawRow{rowID: id, cols: cols, vals: vals})
	}
	if err := rs.Err(); err != nil {
		return nil, fmt.Errorf("chatdb: trace: %w", err)
	}
	return out, nil
}

// rawRowsIn returns the rows of table whose column is one of values.
func rawRowsIn[T any](ctx context.Context, tx *sql.Tx, table, column string, values []T) ([]rawRow, error) {
	var out []rawRow
	err := inChunks(values, 500, func(chunk []T) error {
		rows, err := rawRows(ctx, tx, "SELECT * FROM "+table+" WHERE "+column+" IN ("+placeholders(len(chunk))+") ORDER BY ROWID", anys(chunk)...)
		out = append(out, rows...)
		return err
	})
	return out, err
}

// pairs runs query (ending in "IN") over ids and groups its second column
// by its first, in the order SQLite returns them (by the second).
func pairs(ctx context.Context, tx *sql.Tx, query string, ids []int64) (map[int64][]int64, error) {
	out := map[int64][]int64{}
	err := inChunks(ids, 500, func(chunk []int64) error {
		rs, err := tx.QueryContext(ctx, query+" ("+placeholders(len(chunk))+") ORDER BY 1, 2", anys(chunk)...)
		if err != nil {
			return fmt.Errorf("chatdb: trace: %w", err)
		}
		defer rs.Close()
		for rs.Next() {
			var a, b int64
			if err := rs.Scan(&a, &b); err != nil {
				return fmt.Errorf("chatdb: trace: scan: %w", err)
			}
			out[a] = append(out[a], b)
		}
		return rs.Err()
	})
	return out, err
}

// appendNew adds to list the vs it does not hold yet.
func appendNew[T comparable](list []T, vs ...T) []T {
	for _, v := range vs {
		if !slices.Contains(list, v) {
			list = append(list, v)
		}
	}
	return list
}

// anys is vs as query arguments.
func anys[T any](vs []T) []any {
	out := make([]any, len(vs))
	for i, v := range vs {
		out[i] = v
	}
	return out
}

// declaredColumn is a column's name and declared type.
type declaredColumn struct{ name, typ string }

// declaredColumns lists table's columns as the schema declares them.
func (db *DB) declaredColumns(ctx context.Context, table string) ([]declaredColumn, error) {
	rs, err := db.db.QueryContext(ctx, "SELECT name, type FROM pragma_table_info(?)", table)
	if err != nil {
		return nil, fmt.Errorf("chatdb: columns of %s: %w", table, err)
	}
	defer rs.Close()
	var out []declaredColumn
	for rs.Next() {
		var c declaredColumn
		if err := rs.Scan(&c.name, &c.typ); err != nil {
			return nil, fmt.Errorf("chatdb: columns of %s: %w", table, err)
		}
		out = append(out, c)
	}
	return out, rs.Err()
}

// quoteIdent quotes a column name the database gave us.
func quoteIdent(name string) string {
	return `"` + strings.ReplaceAll(name, `"`, `""`) + `"`
}
