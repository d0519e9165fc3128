package chatdbtest

import (
	"bufio"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"howett.net/plist"

	"github.com/blueline-app/blueline/bridge/messages/chatdb"
	"github.com/blueline-app/blueline/bridge/messages/typedstream"
)

// ReplayResult is what Replay wrote.
type ReplayResult struct {
	chatdb.TraceCounts
	// Skipped are the columns of the trace this schema lacks
	// (table.column), left out: a trace from another macOS.
	Skipped []string
}

// Replay writes the rows of a trace (the JSON lines chatdb.DB.Trace
// writes: `blueline doctor --trace`) into the fixture, record by record,
// each in one transaction as Messages commits it: every row with the ROWID
// and the columns it had on the traced Mac, its chats, handles and
// attachments with theirs, and the joins between them. A hashed string
// becomes a placeholder of the same kind and length (a phone number, an
// e-mail address, a GUID, or letters), the same for the same hash, so the
// relations the trace kept hold here too; a blob becomes one of the same
// structure (an attributedBody with the same text placeholder and file
// GUIDs, a property list with the same keys and types). An update
// rewrites the row and its joins as the record has them; a delete removes
// the row.
func (f *Fixture) Replay(r io.Reader) ReplayResult {
	f.t.Helper()
	var res ReplayResult
	skipped := map[string]bool{}
	known := map[string]map[string]bool{}
	for _, table := range []string{"message", "chat", "handle", "attachment"} {
		known[table] = f.columns(table)
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 64*1024*1024)
	for n := 1; sc.Scan(); n++ {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var rec chatdb.TraceRecord
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			f.t.Fatalf("chatdbtest: trace line %d: %v", n, err)
		}
		switch {
		case rec.Type == chatdb.TraceStart && rec.Version != chatdb.TraceVersion:
			f.t.Fatalf("chatdbtest: trace version %d, want %d", rec.Version, chatdb.TraceVersion)
		case rec.Type != chatdb.TraceRow:
			continue
		case rec.Message == nil:
			f.t.Fatalf("chatdbtest: trace line %d: a row record without its message", n)
		}
		f.inTx(func(c execer) {
			put := func(table string, row chatdb.TracedRow) {
				f.t.Helper()
				f.putRow(c, table, row, known[table], skipped)
			}
			switch rec.Op {
			case chatdb.TraceDelete:
				for _, q := range []string{
					"DELETE FROM chat_message_join WHERE message_id = ?",
					"DELETE FROM message_attachment_join WHERE message_id = ?",
					"DELETE FROM message WHERE ROWID = ?",
				} {
					f.exec(c, q, rec.Message.RowID)
				}
				res.Deletes++
				return
			case chatdb.TraceInsert:
				res.Inserts++
			case chatdb.TraceUpdate:
				res.Updates++
			default:
				f.t.Fatalf("chatdbtest: trace line %d: unknown operation %q", n, rec.Op)
			}
			for _, h := range rec.Handles {
				put("handle", h)
			}
			for _, ch := range rec.Chats {
				put("chat", ch)
				f.setJoins(c, "chat_handle_join", "chat_id", "handle_id", ch.RowID, ch.Members,
					"INSERT INTO chat_handle_join (chat_id, handle_id) VALUES (?1, ?2)")
			}
			for _, a := range rec.Attachments {
				put("attachment", a)
			}
			put("message", *rec.Message)
			var chats, files []int64
			for _, ch := range rec.Chats {
				chats = append(chats, ch.RowID)
			}
			for _, a := range rec.Attachments {
				if !a.BodyOnly {
					files = append(files, a.RowID)
				}
			}
			id := rec.Message.RowID
			f.setJoins(c, "chat_message_join", "message_id", "chat_id", id, chats,
				"INSERT INTO chat_message_join (chat_id, message_id, message_date) SELECT ?2, ROWID, date FROM message WHERE ROWID = ?1")
			f.setJoins(c, "message_attachment_join", "message_id", "attachment_id", id, files,
				"INSERT INTO message_attachment_join (message_id, attachment_id) VALUES (?1, ?2)")
		})
	}
	if err := sc.Err(); err != nil {
		f.t.Fatalf("chatdbtest: read the trace: %v", err)
	}
	res.Skipped = slices.Sorted(maps.Keys(skipped))
	return res
}

// setJoins makes the rows of the join table for id (in column owner) link
// it to exactly want (in column other), with insert (?1 id, ?2 the other
// ROWID). Missing links are added before extra ones are removed: Messages'
// triggers delete a message that loses its last chat, a file its last
// message, a handle its last use.
func (f *Fixture) setJoins(c execer, table, owner, other string, id int64, want []int64, insert string) {
	f.t.Helper()
	var list sql.NullString
	if err := c.QueryRow("SELECT group_concat("+other+") FROM "+table+" WHERE "+owner+" = ?", id).Scan(&list); err != nil {
		f.t.Fatalf("chatdbtest: read %s: %v", table, err)
	}
	var have []int64
	for _, v := range strings.Split(list.String, ",") {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			have = append(have, n)
		}
	}
	for _, w := range want {
		if !slices.Contains(have, w) {
			f.exec(c, insert, id, w)
		}
	}
	for _, h := range have {
		if !slices.Contains(want, h) {
			f.exec(c, "DELETE FROM "+table+" WHERE "+owner+" = ? AND "+other+" = ?", id, h)
		}
	}
}

func (f *Fixture) exec(c execer, query string, args ...any) {
	f.t.Helper()
	if _, err := c.Exec(query, args...); err != nil {
		f.t.Fatalf("chatdbtest: exec %q: %v", query, err)
	}
}

// columns is the set of table's columns, lower-cased.
func (f *Fixture) columns(table string) map[string]bool {
	f.t.Helper()
	rs, err := f.db.Query("SELECT name FROM pragma_table_info(?)", table)
	if err != nil {
		f.t.Fatalf("chatdbtest: columns of %s: %v", table, err)
	}
	defer rs.Close()
	out := map[string]bool{}
	for rs.Next() {
		var name string
		if err := rs.Scan(&name); err != nil {
			f.t.Fatalf("chatdbtest: columns of %s: %v", table, err)
		}
		out[strings.ToLower(name)] = true
	}
	return out
}

// putRow writes row into table with its ROWID: inserted, or, when a row
// with that ROWID is there, updated to the record's columns.
func (f *Fixture) putRow(c execer, table string, row chatdb.TracedRow, known, skipped map[string]bool) {
	f.t.Helper()
	cols := []string{"ROWID"}
	args := []any{row.RowID}
	for _, name := range slices.Sorted(maps.Keys(row.Columns)) {
		if !known[strings.ToLower(name)] {
			skipped[table+"."+name] = true
			continue
		}
		cols = append(cols, name)
		args = append(args, sqlValue(row.Columns[name]))
	}
	quoted := make([]string, len(cols))
	var sets []string
	for i, c := range cols {
		quoted[i] = `"` + c + `"`
		if i > 0 {
			sets = append(sets, quoted[i]+" = excluded."+quoted[i])
		}
	}
	q := "INSERT INTO " + table + " (" + strings.Join(quoted, ", ") + ") VALUES (" +
		strings.TrimSuffix(strings.Repeat("?, ", len(cols)), ", ") + ") ON CONFLICT (ROWID) DO "
	if len(sets) == 0 {
		q += "NOTHING"
	} else {
		q += "UPDATE SET " + strings.Join(sets, ", ")
	}
	f.exec(c, q, args...)
}

// sqlValue is what the fixture stores for a traced value.
func sqlValue(v chatdb.TraceValue) any {
	switch {
	case v.Int != nil:
		return *v.Int
	case v.Real != nil:
		return *v.Real
	case v.Text != nil:
		return *v.Text
	case v.Hash != "":
		return placeholder(v)
	case v.Blob != nil:
		return blobLike(*v.Blob)
	}
	return nil
}

// placeholder stands for a hashed value: its kept prefix and suffix around
// a stand-in of its kind, made from the hash (so equal hashes give equal
// placeholders), and, for text, of its length with its U+FFFC
// placeholders first.
func placeholder(v chatdb.TraceValue) string {
	h := sha256.Sum256([]byte(v.Hash))
	var body string
	switch v.Kind {
	case chatdb.KindPhone:
		var digits strings.Builder
		for _, b := range h[:7] {
			digits.WriteByte('0' + b%10)
		}
		body = "+1555" + digits.String()
	case chatdb.KindEmail:
		body = "u" + v.Hash + "@example.com"
	case chatdb.KindUUID:
		x := strings.ToUpper(hex.EncodeToString(h[:16]))
		body = x[:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:]
	default:
		n := v.Chars - utf8.RuneCountInString(v.Prefix) - utf8.RuneCountInString(v.Suffix)
		objects := min(v.Objects, max(n, 0))
		var b strings.Builder
		b.WriteString(strings.Repeat("\uFFFC", objects))
		letters := hex.EncodeToString(h[:])
		for i := 0; i < n-objects; i++ {
			b.WriteByte('a' + letters[i%len(letters)]%26)
		}
		body = b.String()
	}
	return v.Prefix + body + v.Suffix
}

// blobLike is a blob of b's structure.
func blobLike(b chatdb.TraceBlob) []byte {
	switch b.Format {
	case "typedstream":
		var parts []typedstream.Part
		for _, f := range b.Files {
			parts = append(parts, typedstream.Part{FileTransferGUID: placeholder(f)})
		}
		if b.Text != nil {
			text := placeholder(*b.Text)
			// The archive's U+FFFC are its files' placeholders, written
			// above.
			if len(b.Files) > 0 {
				text = strings.TrimLeft(text, "\uFFFC")
			}
			if text != "" {
				parts = append(parts, typedstream.Part{Text: text})
			}
		}
		return typedstream.EncodeParts(parts...)
	case "bplist":
		return encodePlist(b.Plist)
	}
	return make([]byte, b.Bytes)
}

// encodePlist writes a binary property list of the structure a trace
// keeps (see chatdb.TraceBlob.Plist): the same keys and types, each value
// empty or zero.
func encodePlist(shape any) []byte {
	b, err := plist.Marshal(plistLike(shape), plist.BinaryFormat)
	if err != nil {
		// Only a value plist cannot hold fails, and plistLike makes none.
		panic("chatdbtest: encode a property list: " + err.Error())
	}
	return b
}

// plistLike is a value of the structure shape.
func plistLike(shape any) any {
	if m, ok := shape.(map[string]any); ok {
		if d, ok := m["dict"].(map[string]any); ok {
			out := make(map[string]any, len(d))
			for k, v := range d {
				out[k] = plistLike(v)
			}
			return out
		}
		items, _ := m["array"].([]any)
		out := make([]any, len(items))
		for i, it := range items {
			out[i] = plistLike(it)
		}
		return out
	}
	switch shape {
	case "bool":
		return false
	case "int":
		return uint64(0)
	case "real":
		return 0.0
	case "date":
		return time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
	case "data":
		return []byte{}
	case "uid":
		return plist.UID(0)
	}
	return "" // a string, or what the trace left out or cannot say (null)
}
