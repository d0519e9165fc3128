package chatdb

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"howett.net/plist"

	"github.com/blueline-app/blueline/bridge/messages/typedstream"
)

// keptColumns are the text columns a trace keeps as they are: they name a
// service, a file type, a balloon's app or a send effect, or hold numbers
// in a fixed layout, never what anyone wrote or who.
var keptColumns = map[string]bool{
	"message.service": true, "message.balloon_bundle_id": true, "message.expressive_send_style_id": true,
	"message.country": true, "message.thread_originator_part": true,
	"message.syndication_ranges": true, "message.synced_syndication_ranges": true,
	"chat.service_name": true,
	"handle.service":    true, "handle.country": true,
	"attachment.mime_type": true, "attachment.uti": true,
}

// fileColumns hold a file's path or name: their extension is kept.
var fileColumns = map[string]bool{"attachment.filename": true, "attachment.transfer_name": true}

// keptPrefix matches the part of a value that says what it refers to
// rather than who or what: a tapback's "p:0/" or "bp:", an account's "E:"
// or "P:", a chat GUID's "iMessage;-;", an attachment GUID's "at_0_". The
// rest is hashed on its own, so that a chat GUID's identifier hashes as
// chat_identifier and handle.id do, a tapback's target as the message's
// GUID.
var keptPrefix = regexp.MustCompile(`^(?:p:\d+/|bp:|[EP]:|(?:iMessage|SMS|RCS|any);[-+];|at_\d+_)`)

// fileExtension is a file name's extension worth keeping.
var fileExtension = regexp.MustCompile(`\.[A-Za-z0-9]{1,6}$`)

var (
	phoneLike = regexp.MustCompile(`^\+?[0-9]{3,20}$`)
	emailLike = regexp.MustCompile(`^[^@\s]+@[^@\s]+$`)
	uuidLike  = regexp.MustCompile(`^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$`)
)

// typedstreamHeader starts an archive of NSArchiver (attributedBody).
var typedstreamHeader = []byte("\x04\x0bstreamtyped")

// shaper reduces values to their shape under one trace's key.
type shaper struct{ key []byte }

// value is the shape of column (table.column) holding v, as the driver
// scanned it: nil, int64, float64, string, []byte (or bool, time.Time for
// odd declared types, kept as integer and text).
func (s shaper) value(column string, v any) TraceValue {
	switch v := v.(type) {
	case nil:
		return TraceValue{}
	case int64:
		return TraceValue{Int: &v}
	case bool:
		n := int64(0)
		if v {
			n = 1
		}
		return TraceValue{Int: &n}
	case float64:
		return TraceValue{Real: &v}
	case string:
		return s.text(column, v)
	case []byte:
		b := s.blob(v)
		return TraceValue{Blob: &b}
	}
	// Nothing else comes out of SQLite; keep the trace free of content
	// all the same.
	return TraceValue{Blob: &TraceBlob{Format: "binary"}}
}

// text is the shape of a text value of column.
func (s shaper) text(column, v string) TraceValue {
	if keptColumns[column] {
		return TraceValue{Text: &v}
	}
	out := TraceValue{Chars: utf8.RuneCountInString(v), Objects: strings.Count(v, "\uFFFC")}
	rest := v
	if fileColumns[column] {
		if strings.HasPrefix(rest, "~/") || strings.HasPrefix(rest, "/") {
			out.Prefix = rest[:strings.Index(rest, "/")+1]
		}
		out.Suffix = fileExtension.FindString(rest)
		rest = strings.TrimSuffix(strings.TrimPrefix(rest, out.Prefix), out.Suffix)
	} else if p := keptPrefix.FindString(rest); p != "" {
		out.Prefix, rest = p, rest[len(p):]
	}
	out.Hash, out.Kind = s.hash(rest), kindOf(rest)
	return out
}

// hash is the first 16 hex digits of the keyed hash of v.
func (s shaper) hash(v string) string {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(v))
	return hex.EncodeToString(m.Sum(nil))[:16]
}

func kindOf(v string) string {
	switch {
	case phoneLike.MatchString(v):
		return KindPhone
	case emailLike.MatchString(v):
		return KindEmail
	case uuidLike.MatchString(v):
		return KindUUID
	}
	return KindText
}

// blob is the structure of a blob.
func (s shaper) blob(b []byte) TraceBlob {
	out := TraceBlob{Bytes: len(b), Format: "binary"}
	switch {
	case bytes.HasPrefix(b, typedstreamHeader):
		out.Format = "typedstream"
		if text, err := typedstream.Text(b); err == nil {
			t := s.text("message.text", text)
			out.Text = &t
		}
		// A damaged archive still names the attributes of the runs
		// before the damage.
		runs, _ := typedstream.Runs(b)
		for _, r := range runs {
			for _, name := range slices.Sorted(maps.Keys(r.Attributes)) {
				out.Attributes = appendNew(out.Attributes, s.plistKey(name))
			}
		}
		for _, g := range fileTransferGUIDs(b) {
			out.Files = append(out.Files, s.text("attachment.guid", g))
		}
	case bytes.HasPrefix(b, []byte("bplist00")):
		var v any
		if _, err := plist.Unmarshal(b, &v); err == nil {
			nodes := 0
			out.Format, out.Plist = "bplist", s.plistShape(v, 0, &nodes)
		}
	}
	return out
}

// Bounds of a property list's structure: past them, "…".
const (
	plistMaxDepth = 32
	plistMaxNodes = 2000
)

// plistShape is the structure of a decoded property list value: its
// type's name, or the structure of an array or a dictionary.
func (s shaper) plistShape(v any, depth int, nodes *int) any {
	*nodes++
	if depth > plistMaxDepth || *nodes > plistMaxNodes {
		return "…"
	}
	switch v := v.(type) {
	case map[string]any:
		dict := make(map[string]any, len(v))
		for k, val := range v {
			dict[s.plistKey(k)] = s.plistShape(val, depth+1, nodes)
		}
		return map[string]any{"dict": dict}
	case []any:
		items := make([]any, 0, len(v))
		for _, it := range v {
			items = append(items, s.plistShape(it, depth+1, nodes))
		}
		return map[string]any{"array": items}
	case string:
		return "string"
	case bool:
		return "bool"
	case uint64, int64, int:
		return "int"
	case float64, float32:
		return "real"
	case time.Time:
		return "date"
	case []byte:
		return "data"
	case plist.UID:
		return "uid"
	}
	return "null"
}

// plistKey is a dictionary key as the structure shows it: as it is
// (Apple's field names), unless it looks like an address or a GUID, which
// is hashed as "#…".
func (s shaper) plistKey(k string) string {
	if kindOf(k) != KindText {
		return "#" + s.hash(k)
	}
	return k
}
