package chatdb

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// The trace file: what `blueline doctor --trace` writes and
// chatdbtest.Fixture.Replay reads, one JSON object (a TraceRecord) a line.
// It holds the shape of the rows Messages writes, never their content:
// every text, address, name, file name and GUID is a keyed hash (HMAC-SHA256
// under a key made for the trace and never written), so that equal values
// still look alike within one trace, and every blob is reduced to its
// structure.

// TraceVersion is the version of the format TraceRecord describes.
const TraceVersion = 1

// Trace record types.
const (
	TraceStart = "start" // the first line: what was traced
	TraceRow   = "row"   // a message row written, changed or deleted
	TraceEnd   = "end"   // the last line: how many of each
)

// Operations of a TraceRow record.
const (
	TraceInsert = "insert" // a new row (a ROWID above every one before)
	TraceUpdate = "update" // a row Messages changed (any column, its chats or files)
	TraceDelete = "delete" // a row that is gone
)

// TraceRecord is one line of a trace.
type TraceRecord struct {
	Type string `json:"type"`

	// start: the format's version, the Mac's macOS ("" when unknown),
	// when the trace started (Unix ms), and the highest message ROWID then.
	Version   int    `json:"version,omitempty"`
	MacOS     string `json:"macos,omitempty"`
	Started   int64  `json:"started,omitempty"`
	LastRowID int64  `json:"last_rowid,omitempty"`

	// row: the operation, when the trace saw it (Unix ms), the message
	// row, and the rows it refers to as they were then: its chats (by
	// chat_message_join), handles (handle_id, other_handle and the chats'
	// members) and attachments (by message_attachment_join, then those
	// only its attributedBody names). A delete carries the message's
	// ROWID alone.
	Op          string      `json:"op,omitempty"`
	SeenAt      int64       `json:"seen_at,omitempty"`
	Message     *TracedRow  `json:"message,omitempty"`
	Chats       []TracedRow `json:"chats,omitempty"`
	Handles     []TracedRow `json:"handles,omitempty"`
	Attachments []TracedRow `json:"attachments,omitempty"`

	// end: when the trace ended (Unix ms), and what it recorded.
	Ended  int64        `json:"ended,omitempty"`
	Counts *TraceCounts `json:"counts,omitempty"`
}

// TraceCounts are the row records of a trace, by operation.
type TraceCounts struct {
	Inserts int `json:"inserts"`
	Updates int `json:"updates"`
	Deletes int `json:"deletes"`
}

// TracedRow is one row of a table: its ROWID and its other columns, by name.
type TracedRow struct {
	RowID   int64                 `json:"rowid"`
	Columns map[string]TraceValue `json:"columns,omitempty"`
	// Members are, for a chat, the ROWIDs of its handles
	// (chat_handle_join).
	Members []int64 `json:"members,omitempty"`
	// BodyOnly marks an attachment that no join row links to its message:
	// only the message's attributedBody names it (seen on macOS 15).
	BodyOnly bool `json:"body_only,omitempty"`
}

// TraceValue is one column's value, in the form the trace keeps of it. In
// JSON: null; an integer as a number; and otherwise an object:
//
//	{"real": 1.5}                    a floating-point value
//	{"text": "iMessage"}             a text kept as it is: only the columns
//	                                 that name a service, a file type or a
//	                                 balloon's app (see keptColumns)
//	{"hash": "…", "kind": "phone",   any other text: hash is the first 16 hex
//	 "prefix": "p:0/", "suffix":     digits of its keyed hash; kind is phone,
//	 ".heic", "chars": 36,           email, uuid or text; prefix and suffix
//	 "objects": 1}                   are kept parts (a tapback's "p:0/", a
//	                                 chat GUID's "iMessage;-;", a file's
//	                                 extension) not hashed; chars its length in
//	                                 characters; objects its U+FFFC
//	                                 attachment placeholders
//	{"blob": {…}}                    a blob's structure (see TraceBlob)
type TraceValue struct {
	Int *int64 `json:"-"`

	Real *float64 `json:"real,omitempty"`
	Text *string  `json:"text,omitempty"`

	Hash    string `json:"hash,omitempty"`
	Kind    string `json:"kind,omitempty"`
	Prefix  string `json:"prefix,omitempty"`
	Suffix  string `json:"suffix,omitempty"`
	Chars   int    `json:"chars,omitempty"`
	Objects int    `json:"objects,omitempty"`

	Blob *TraceBlob `json:"blob,omitempty"`
}

// Kinds of hashed text: what it looked like, so that a replay can put a
// placeholder of the same kind in its place.
const (
	KindPhone = "phone" // + and digits
	KindEmail = "email" // something@something
	KindUUID  = "uuid"  // 8-4-4-4-12 hex digits, as Messages' GUIDs
	KindText  = "text"  // anything else
)

// IsNull reports whether v is SQL NULL.
func (v TraceValue) IsNull() bool {
	return v.Int == nil && v.Real == nil && v.Text == nil && v.Hash == "" && v.Blob == nil
}

// traceValueFields is TraceValue without its methods, for encoding/json.
type traceValueFields TraceValue

func (v TraceValue) MarshalJSON() ([]byte, error) {
	switch {
	case v.Int != nil:
		return json.Marshal(*v.Int)
	case v.IsNull():
		return []byte("null"), nil
	}
	return json.Marshal(traceValueFields(v))
}

func (v *TraceValue) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	*v = TraceValue{}
	switch {
	case bytes.Equal(b, []byte("null")):
		return nil
	case len(b) > 0 && (b[0] == '-' || (b[0] >= '0' && b[0] <= '9')):
		var n int64
		if err := json.Unmarshal(b, &n); err != nil {
			return fmt.Errorf("chatdb: trace value %s: %w", b, err)
		}
		v.Int = &n
		return nil
	}
	return json.Unmarshal(b, (*traceValueFields)(v))
}

// TraceBlob is the structure of a blob, without its content.
type TraceBlob struct {
	Bytes int `json:"bytes"`
	// Format is "typedstream" (an archived attributed string, as
	// attributedBody), "bplist" (a binary property list) or "binary".
	Format string `json:"format"`

	// typedstream: the archived string, hashed as a text column is (the
	// same text hashes alike in both); the names of the attributes its
	// runs carry (Apple's: __kIMMessagePartAttributeName, …), each once;
	// and the file transfer GUIDs it names, hashed as attachment.guid is.
	Text       *TraceValue  `json:"text,omitempty"`
	Attributes []string     `json:"attributes,omitempty"`
	Files      []TraceValue `json:"files,omitempty"`

	// bplist: the property list's structure. A value is its type's name
	// (null, bool, int, real, date, data, string, uid); an array is
	// {"array": [...]}, a dictionary {"dict": {"key": …}} with its keys as
	// they are (Apple's field names; one that looks like an address or a
	// GUID is hashed, "#…"), its values reduced the same way. "…" stands
	// for what is left out past 32 levels or 2,000 values.
	Plist any `json:"plist,omitempty"`
}
