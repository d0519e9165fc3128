package chatdb

import (
	"bytes"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/blueline-app/blueline/bridge/messages/typedstream"
)

// voiceMemoBody builds the attributedBody of a transcribed voice memo as
// macOS writes it: the text is one U+FFFC whose single run carries the file
// transfer GUID, the transcription and the message part. Objects and
// shared strings are numbered in stream order; entry i is referenced by the
// byte 0x92+i.
func voiceMemoBody(transcription string) []byte {
	b := []byte{0x04, 0x0b}
	b = append(b, "streamtyped"...)
	b = append(b, 0x81, 0xe8, 0x03)
	lit := func(s string) { // unshared string: length, bytes
		if len(s) < 0x80 {
			b = append(b, byte(len(s)))
		} else {
			b = append(b, 0x81, byte(len(s)), byte(len(s)>>8))
		}
		b = append(b, s...)
	}
	// Shared strings: S0 "@", S1 NSAttributedString, S2 NSObject,
	// S3 NSString, S4 "+", S5 "iI", S6 NSDictionary, S7 "i".
	// Objects: O0 the attributed string, O1 NSAttributedString, O2 NSObject,
	// O3 the string, O4 NSString, O5 the dictionary, O6 NSDictionary, then
	// one per key and value.
	b = append(b, 0x84)
	lit("@")
	b = append(b, 0x84, 0x84, 0x84)
	lit("NSAttributedString")
	b = append(b, 0x00, 0x84, 0x84)
	lit("NSObject")
	b = append(b, 0x00, 0x85)
	// The string: "@" group, new object of new class NSString → NSObject.
	b = append(b, 0x92, 0x84, 0x84, 0x84)
	lit("NSString")
	b = append(b, 0x01, 0x94, 0x84)
	lit("+")
	lit("\uFFFC")
	b = append(b, 0x86)
	// One run: dictionary 1, one UTF-16 unit.
	b = append(b, 0x84)
	lit("iI")
	b = append(b, 0x01, 0x01)
	b = append(b, 0x92, 0x84, 0x84, 0x84)
	lit("NSDictionary")
	b = append(b, 0x00, 0x94, 0x84)
	lit("i")
	b = append(b, 0x03)     // three pairs
	str := func(s string) { // "@" group with an NSString object
		b = append(b, 0x92, 0x84, 0x96, 0x96)
		lit(s)
		b = append(b, 0x86)
	}
	str("__kIMFileTransferGUIDAttributeName")
	str(voiceMemoGUID)
	str("IMAudioTranscription")
	str(transcription)
	str("__kIMMessagePartAttributeName")
	// NSNumber 0: new classes NSNumber → NSValue → NSObject, "*" group
	// with the C string "i", then an "i" group.
	b = append(b, 0x92, 0x84, 0x84, 0x84)
	lit("NSNumber")
	b = append(b, 0x00, 0x84, 0x84)
	lit("NSValue")
	b = append(b, 0x00, 0x94, 0x84)
	lit("*")
	b = append(b, 0x84, 0x99, 0x99, 0x00, 0x86)
	return append(b, 0x86, 0x86) // end of dictionary, of attributed string
}

func TestAttributedTranscription(t *testing.T) {
	for _, want := range []string{"This is a test", "Ça marche, à demain 👋", strings.Repeat("long ", 60)} {
		blob := voiceMemoBody(want)
		if text, err := typedstream.Text(blob); err != nil || text != "\uFFFC" {
			t.Fatalf("typedstream.Text(fixture) = %q, %v; want the placeholder", text, err)
		}
		got, ok := attributedTranscription(blob)
		if !ok || got != strings.TrimSpace(want) {
			t.Errorf("attributedTranscription = %q, %v; want %q", got, ok, want)
		}
		// No prefix of the blob may panic or yield a partial text.
		end := bytes.Index(blob, []byte(want)) + len(want) // the value's end-of-object tag
		for n := range len(blob) {
			got, ok := attributedTranscription(blob[:n])
			if ok && (n <= end || got != strings.TrimSpace(want)) {
				t.Fatalf("prefix %d: got %q", n, got)
			}
		}
	}
	for _, blob := range [][]byte{nil, typedstream.Encode("IMAudioTranscription"), typedstream.Encode("hello")} {
		if got, ok := attributedTranscription(blob); ok {
			t.Errorf("attributedTranscription(%q) = %q", blob, got)
		}
	}
}

// voiceMemoGUID is the file transfer GUID voiceMemoBody carries.
const voiceMemoGUID = "4C339597-EBBB-4978-9B87-521C0471A848"

// The GUIDs of three attachments, for typedstream.EncodeParts.
const (
	guid1 = "F0668F79-20C2-49C9-A87F-1B007ABB0CED"
	guid2 = "D0551D89-4E11-43D0-9A0E-06F19704E97B"
	guid3 = "0C5C1B76-8D4E-4F5A-9B1E-6A2D3C4B5E6F"
)

// threeFiles is a body of text and three attachments interleaved. As in
// Messages' archives, only the first attachment's run spells out the
// transfer GUID attribute's name; the others refer back to it.
func threeFiles(t *testing.T) []byte {
	t.Helper()
	text := func(s string) typedstream.Part { return typedstream.Part{Text: s} }
	blob := typedstream.EncodeParts(text("here "), typedstream.Part{FileTransferGUID: guid1}, text(", "),
		typedstream.Part{FileTransferGUID: guid2}, text(" and "), typedstream.Part{FileTransferGUID: guid3}, text("!"))
	if n := bytes.Count(blob, []byte(transferAttribute)); n != 1 {
		t.Fatalf("the transfer attribute's name is spelled out %d times, want once", n)
	}
	return blob
}

func TestAttributeStrings(t *testing.T) {
	memo := voiceMemoBody("  This is a test ")
	parts := typedstream.EncodeParts(
		typedstream.Part{FileTransferGUID: guid1},
		typedstream.Part{Text: "between"},
		typedstream.Part{FileTransferGUID: guid2},
	)
	for _, tc := range []struct {
		name string
		blob []byte
		attr string
		want []string
	}{
		{"transcription", memo, transcriptionAttribute, []string{"  This is a test "}},
		{"transfer GUID", memo, transferAttribute, []string{voiceMemoGUID}},
		{"an NSNumber value", memo, "__kIMMessagePartAttributeName", nil},
		{"an absent attribute", memo, "__kIMLinkAttributeName", nil},
		{"one per attachment", parts, transferAttribute, []string{guid1, guid2}},
		{"names referred back to", threeFiles(t), transferAttribute, []string{guid1, guid2, guid3}},
		{"NSNumber values after references", parts, "__kIMMessagePartAttributeName", nil},
		{"nil", nil, transferAttribute, nil},
	} {
		if got := attributeStrings(tc.blob, tc.attr); !slices.Equal(got, tc.want) {
			t.Errorf("%s: attributeStrings(%s) = %q, want %q", tc.name, tc.attr, got, tc.want)
		}
	}
}

func TestFileTransferGUIDs(t *testing.T) {
	a1 := typedstream.Part{FileTransferGUID: guid1}
	a2 := typedstream.Part{FileTransferGUID: guid2}
	text := func(s string) typedstream.Part { return typedstream.Part{Text: s} }
	for _, tc := range []struct {
		name string
		blob []byte
		want []string
	}{
		{"two attachments, text between", typedstream.EncodeParts(a1, text("between"), a2), []string{guid1, guid2}},
		{"three attachments, the name referred back to", threeFiles(t), []string{guid1, guid2, guid3}},
		{"long text between", typedstream.EncodeParts(text("a"), a2, text(strings.Repeat("é", 20000)), a1), []string{guid2, guid1}},
		{"a repeated attachment", typedstream.EncodeParts(a2, a1, text(" "), a2), []string{guid2, guid1}},
		{"voice memo", voiceMemoBody("This is a test"), []string{voiceMemoGUID}},
		{"text only", typedstream.Encode("hello"), nil},
		{"the key as text", typedstream.Encode(`"` + transferAttribute), nil},
		{"nil", nil, nil},
		{"garbage", []byte("\x22__kIMFileTransferGUIDAttributeName\x86\x92\x84\xff"), nil},
		{"header only", []byte("\x04\x0bstreamtyped\x81\xe8\x03"), nil},
	} {
		if got := fileTransferGUIDs(tc.blob); !slices.Equal(got, tc.want) {
			t.Errorf("%s: fileTransferGUIDs = %q, want %q", tc.name, got, tc.want)
		}
	}

	// No prefix of a blob may panic or yield a partial GUID; a prefix that
	// holds whole runs yields their GUIDs.
	blob := threeFiles(t)
	seen := 0
	for n := range len(blob) {
		got := fileTransferGUIDs(blob[:n])
		if want := []string{guid1, guid2, guid3}[:len(got)]; !slices.Equal(got, want) {
			t.Fatalf("prefix %d: got %q", n, got)
		}
		seen = max(seen, len(got))
	}
	if seen != 3 {
		t.Errorf("prefixes gave at most %d GUIDs, want all three before the end", seen)
	}
}

func TestPlistTranscription(t *testing.T) {
	xmlPlist := `<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<plist version="1.0">
<dict>
	<key>other</key>
	<dict><key>audio-transcription</key><string>nested, not this</string></dict>
	<key>audio-transcription</key>
	<string>See you &amp; them</string>
</dict>
</plist>`
	if got, ok := plistTranscription([]byte(xmlPlist)); !ok || got != "See you & them" {
		t.Errorf("XML plist: %q, %v", got, ok)
	}
	for _, bad := range []string{"", "bplist00", "bplist00" + strings.Repeat("\xff", 40), "<plist><dict><key>x</key></dict></plist>", "not a plist"} {
		if got, ok := plistTranscription([]byte(bad)); ok {
			t.Errorf("plistTranscription(%q) = %q", bad, got)
		}
	}
}

func TestPermissionError(t *testing.T) {
	cause := errors.New("unable to open database file: authorization denied")
	if !isPermission(cause) {
		t.Fatal("not recognised as a permission failure")
	}
	if isPermission(errors.New("no such table: message")) {
		t.Fatal("schema error taken for a permission failure")
	}
	err := permissionError("/Users/me/Library/Messages/chat.db", cause)
	exe, _ := os.Executable()
	if !errors.Is(err, cause) || !strings.Contains(err.Error(), "Full Disk Access") || !strings.Contains(err.Error(), exe) {
		t.Errorf("permissionError = %v", err)
	}
}
