package chatdb

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"howett.net/plist"
)

func TestTraceTextShapes(t *testing.T) {
	s := shaper{key: []byte("one key")}
	for _, c := range []struct {
		column, v                  string
		kept                       bool
		prefix, suffix, kind, rest string
	}{
		{column: "message.service", v: "iMessage", kept: true},
		{column: "attachment.mime_type", v: "image/heic", kept: true},
		{column: "message.text", v: "hello there", kind: KindText, rest: "hello there"},
		{column: "handle.id", v: "+15551230001", kind: KindPhone, rest: "+15551230001"},
		{column: "handle.id", v: "bob@example.com", kind: KindEmail, rest: "bob@example.com"},
		{column: "message.guid", v: "0A1B2C3D-0000-4000-8000-00000000ABCD", kind: KindUUID, rest: "0A1B2C3D-0000-4000-8000-00000000ABCD"},
		{column: "message.associated_message_guid", v: "p:12/0A1B2C3D-0000-4000-8000-00000000ABCD", prefix: "p:12/", kind: KindUUID, rest: "0A1B2C3D-0000-4000-8000-00000000ABCD"},
		{column: "message.associated_message_guid", v: "bp:0A1B2C3D-0000-4000-8000-00000000ABCD", prefix: "bp:", kind: KindUUID, rest: "0A1B2C3D-0000-4000-8000-00000000ABCD"},
		{column: "chat.account_login", v: "E:bob@example.com", prefix: "E:", kind: KindEmail, rest: "bob@example.com"},
		{column: "chat.guid", v: "SMS;+;chat123", prefix: "SMS;+;", kind: KindText, rest: "chat123"},
		{column: "chat.guid", v: "any;-;+15551230001", prefix: "any;-;", kind: KindPhone, rest: "+15551230001"},
		// A prefix is kept only at the start, and only in columns other
		// than a file's.
		{column: "message.text", v: "see p:0/x", kind: KindText, rest: "see p:0/x"},
		{column: "attachment.filename", v: "/var/tmp/E:x.jpeg", prefix: "/", suffix: ".jpeg", kind: KindText, rest: "var/tmp/E:x"},
		{column: "attachment.filename", v: "~/Library/a.b/IMG_1.HEIC", prefix: "~/", suffix: ".HEIC", kind: KindText, rest: "Library/a.b/IMG_1"},
		{column: "attachment.transfer_name", v: "archive.tar.toolongext", kind: KindText, rest: "archive.tar.toolongext"},
	} {
		got := s.text(c.column, c.v)
		if c.kept {
			if got.Text == nil || *got.Text != c.v || got.Hash != "" {
				t.Errorf("%s %q: %+v, want kept", c.column, c.v, got)
			}
			continue
		}
		if got.Text != nil || got.Prefix != c.prefix || got.Suffix != c.suffix || got.Kind != c.kind || got.Hash != s.hash(c.rest) || len(got.Hash) != 16 {
			t.Errorf("%s %q: %+v, want prefix %q suffix %q kind %s and the hash of %q", c.column, c.v, got, c.prefix, c.suffix, c.kind, c.rest)
		}
		if got.Chars != len([]rune(c.v)) {
			t.Errorf("%s %q: chars %d", c.column, c.v, got.Chars)
		}
	}
	if got := s.text("message.text", "\uFFFC\uFFFCtwo files"); got.Objects != 2 || got.Chars != 11 {
		t.Errorf("placeholders: %+v, want 2 objects in 11 chars", got)
	}
	// Another trace's key hashes the same value otherwise.
	if other := (shaper{key: []byte("another key")}); other.hash("x") == s.hash("x") || s.hash("x") != s.hash("x") {
		t.Error("the hash does not depend on the key alone")
	}
}

func TestTraceValueShapes(t *testing.T) {
	s := shaper{key: []byte("k")}
	if v := s.value("message.x", nil); !v.IsNull() {
		t.Errorf("nil: %+v, want NULL", v)
	}
	if v := s.value("message.x", int64(-7)); v.Int == nil || *v.Int != -7 || v.IsNull() {
		t.Errorf("int64: %+v", v)
	}
	if v := s.value("message.x", true); v.Int == nil || *v.Int != 1 {
		t.Errorf("true: %+v, want 1", v)
	}
	if v := s.value("message.x", false); v.Int == nil || *v.Int != 0 {
		t.Errorf("false: %+v, want 0", v)
	}
	if v := s.value("message.x", 2.5); v.Real == nil || *v.Real != 2.5 {
		t.Errorf("float64: %+v", v)
	}
	if v := s.value("message.x", time.Now()); v.Blob == nil || v.Blob.Format != "binary" || v.Blob.Bytes != 0 {
		t.Errorf("an unexpected type: %+v, want an empty binary blob", v)
	}
	if v := s.value("message.x", []byte{1, 2, 3}); v.Blob == nil || !reflect.DeepEqual(*v.Blob, TraceBlob{Bytes: 3, Format: "binary"}) {
		t.Errorf("bytes: %+v", v)
	}
	// A damaged property list is binary; a damaged archive a typedstream
	// without its text.
	if v := s.value("message.x", []byte("bplist00garbage")); v.Blob.Format != "binary" || v.Blob.Plist != nil {
		t.Errorf("damaged bplist: %+v", v.Blob)
	}
	if v := s.value("message.x", append([]byte("\x04\x0bstreamtyped"), 0xff, 0xfe)); v.Blob.Format != "typedstream" || v.Blob.Text != nil {
		t.Errorf("damaged typedstream: %+v", v.Blob)
	}
}

func TestTracePlistShape(t *testing.T) {
	s := shaper{key: []byte("k")}
	b, err := plist.Marshal(map[string]any{
		"audio-transcription": "call me back",
		"bob@example.com":     true,
		"n":                   int64(3),
		"r":                   1.5,
		"when":                time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC),
		"raw":                 []byte("secret bytes"),
		"list":                []any{"a", int64(1), map[string]any{}},
	}, plist.BinaryFormat)
	if err != nil {
		t.Fatal(err)
	}
	v := s.value("attachment.user_info", b)
	if v.Blob == nil || v.Blob.Format != "bplist" || v.Blob.Bytes != len(b) {
		t.Fatalf("blob %+v", v.Blob)
	}
	want := map[string]any{"dict": map[string]any{
		"audio-transcription":           "string",
		"#" + s.hash("bob@example.com"): "bool",
		"n":                             "int",
		"r":                             "real",
		"when":                          "date",
		"raw":                           "data",
		"list":                          map[string]any{"array": []any{"string", "int", map[string]any{"dict": map[string]any{}}}},
	}}
	if !reflect.DeepEqual(v.Blob.Plist, want) {
		t.Errorf("structure\n%#v\nwant\n%#v", v.Blob.Plist, want)
	}
	j, _ := json.Marshal(v)
	for _, secret := range []string{"call me back", "bob@example.com", "secret bytes"} {
		if strings.Contains(string(j), secret) {
			t.Errorf("the shape holds %q: %s", secret, j)
		}
	}

	// Other decoded types, and the bounds.
	if got := s.plistShape(plist.UID(4), 0, new(int)); got != "uid" {
		t.Errorf("UID: %v", got)
	}
	if got := s.plistShape(struct{}{}, 0, new(int)); got != "null" {
		t.Errorf("unknown: %v", got)
	}
	if got := s.plistShape("x", plistMaxDepth+1, new(int)); got != "…" {
		t.Errorf("too deep: %v", got)
	}
	many := make([]any, plistMaxNodes+10)
	for i := range many {
		many[i] = "x"
	}
	items := s.plistShape(many, 0, new(int)).(map[string]any)["array"].([]any)
	if len(items) != len(many) || items[plistMaxNodes-2] != "string" || items[plistMaxNodes-1] != "…" || items[len(items)-1] != "…" {
		t.Errorf("past %d values: %v … %v", plistMaxNodes, items[plistMaxNodes-2:plistMaxNodes], items[len(items)-1])
	}
}

func TestTraceValueJSON(t *testing.T) {
	n, r, txt := int64(-42), 1.25, "iMessage"
	for _, c := range []struct {
		v    TraceValue
		json string
	}{
		{TraceValue{}, `null`},
		{TraceValue{Int: &n}, `-42`},
		{TraceValue{Real: &r}, `{"real":1.25}`},
		{TraceValue{Text: &txt}, `{"text":"iMessage"}`},
		{TraceValue{Hash: "00ff", Kind: KindPhone, Prefix: "p:0/", Suffix: ".heic", Chars: 12, Objects: 1},
			`{"hash":"00ff","kind":"phone","prefix":"p:0/","suffix":".heic","chars":12,"objects":1}`},
		{TraceValue{Blob: &TraceBlob{Bytes: 3, Format: "binary"}}, `{"blob":{"bytes":3,"format":"binary"}}`},
	} {
		b, err := json.Marshal(c.v)
		if err != nil || string(b) != c.json {
			t.Errorf("Marshal(%+v) = %s, %v; want %s", c.v, b, err, c.json)
			continue
		}
		var back TraceValue
		// Leading space: a value inside a larger document may carry it.
		if err := json.Unmarshal(append([]byte(" "), b...), &back); err != nil || !reflect.DeepEqual(back, c.v) {
			t.Errorf("Unmarshal(%s) = %+v, %v; want %+v", b, back, err, c.v)
		}
	}
	// Unmarshalling over a value clears what it held.
	v := TraceValue{Int: &n, Hash: "stale"}
	if err := json.Unmarshal([]byte(`null`), &v); err != nil || !v.IsNull() {
		t.Errorf("null over a value: %+v, %v", v, err)
	}
	if err := json.Unmarshal([]byte(`1.5`), &v); err == nil {
		t.Errorf("a bare real: %+v, want an error", v)
	}
	if err := json.Unmarshal([]byte(`"text"`), &v); err == nil {
		t.Errorf("a bare string: %+v, want an error", v)
	}
}
