package typedstream_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/blueline-app/blueline/bridge/messages/typedstream"
)

// The GUIDs of two attachments, in the form attachment rows carry.
const (
	guid1 = "F0668F79-20C2-49C9-A87F-1B007ABB0CED"
	guid2 = "D0551D89-4E11-43D0-9A0E-06F19704E97B"
)

// attachmentHiAttachment is the blob Messages writes for an attachment, the
// text "hi" and another attachment, spelled out by hand: mutableHi's tables,
// then a run per part, in the order and shape of the multipart archive
// published with imessage-exporter's typedstream tests ("MultiPart": the
// transfer GUID pair before the part index, a new dictionary per run).
// Repeated strings, classes and the NSNumber's C string are references, and
// so are the attribute names after their first run: the third run below is
// that archive's third run but for its GUID. (Its second run spells the part
// name out again, a second copy of the string; EncodeParts refers back.)
func attachmentHiAttachment(t testing.TB) []byte {
	return asm(t,
		header,
		0x84, 0x01, "@", // S0 "@"
		0x84,                                                // O0: the attributed string
		0x84, 0x84, 0x19, "NSMutableAttributedString", 0x00, // O1, S1
		0x84, 0x84, 0x12, "NSAttributedString", 0x00, // O2, S2
		0x84, 0x84, 0x08, "NSObject", 0x00, // O3, S3
		0x85,
		0x92, 0x84, // "@", O4: the string
		0x84, 0x84, 0x0f, "NSMutableString", 0x01, // O5, S4
		0x84, 0x84, 0x08, "NSString", 0x01, // O6, S5
		0x95,            // superclass: O3 (NSObject)
		0x84, 0x01, "+", // S6 "+"
		0x08, "\ufffchi\ufffc", // 3 + 2 + 3 bytes
		0x86,
		0x84, 0x02, "iI", 0x01, 0x01, // S7 "iI": dictionary 1, 1 unit
		0x92, 0x84, // O7: the first dictionary
		0x84, 0x84, 0x0c, "NSDictionary", 0x00, // O8, S8
		0x95,
		0x84, 0x01, "i", 0x02, // S9 "i": two pairs
		0x92, 0x84, 0x98, 0x98, 0x22, "__kIMFileTransferGUIDAttributeName", 0x86, // O9
		0x92, 0x84, 0x98, 0x98, 0x24, guid1, 0x86, // O10
		0x92, 0x84, 0x98, 0x98, 0x1d, "__kIMMessagePartAttributeName", 0x86, // O11
		0x92, 0x84, // O12: NSNumber
		0x84, 0x84, 0x08, "NSNumber", 0x00, // O13, S10
		0x84, 0x84, 0x07, "NSValue", 0x00, // O14, S11
		0x95,
		0x84, 0x01, "*", // S12 "*"
		0x84, 0x9b, // O15: C string S9 "i"
		0x9b, 0x00, // type S9 "i", part 0
		0x86, 0x86, // end of O12, O7
		0x99, 0x02, 0x02, // type S7 "iI": dictionary 2, 2 units
		0x92, 0x84, 0x9a, // O16: object of class O8 (NSDictionary)
		0x9b, 0x01, // one pair
		0x92, 0x9d, // the part name: reference to O11
		0x92, 0x84, 0x9f, // O17: object of class O13 (NSNumber)
		0x9e,       // type S12 "*"
		0xa1,       // C string: reference to O15 ("i")
		0x9b, 0x01, // type S9 "i", part 1
		0x86, 0x86, // end of O17, O16
		0x99, 0x03, 0x01, // dictionary 3, 1 unit
		0x92, 0x84, 0x9a, 0x9b, 0x02, // O18: NSDictionary, two pairs
		0x92, 0x9b, // the transfer GUID name: reference to O9
		0x92, 0x84, 0x98, 0x98, 0x24, guid2, 0x86, // O19
		0x92, 0x9d, // the part name
		0x92, 0x84, 0x9f, 0x9e, 0xa1, 0x9b, 0x02, 0x86, // O20: NSNumber, part 2
		0x86, 0x86, // end of O18, O0
	)
}

func TestEncodePartsMatchesMessagesLayout(t *testing.T) {
	got := typedstream.EncodeParts(typedstream.Part{FileTransferGUID: guid1}, typedstream.Part{Text: "hi"}, typedstream.Part{FileTransferGUID: guid2})
	if want := attachmentHiAttachment(t); !bytes.Equal(got, want) {
		t.Fatalf("EncodeParts =\n%x\nwant\n%x", got, want)
	}
}

func TestEncodePartsRoundTrip(t *testing.T) {
	a1 := typedstream.Part{FileTransferGUID: guid1}
	a2 := typedstream.Part{FileTransferGUID: guid2}
	text := func(s string) typedstream.Part { return typedstream.Part{Text: s} }
	for _, tc := range []struct {
		name  string
		parts []typedstream.Part
		want  string
	}{
		{"none", nil, ""},
		{"one empty text", []typedstream.Part{text("")}, ""},
		{"one text", []typedstream.Part{text("hello")}, "hello"},
		{"one attachment", []typedstream.Part{a1}, "\ufffc"},
		{"attachment, text, attachment", []typedstream.Part{a1, text("hello"), a2}, "\ufffchello\ufffc"},
		{"text beside an attachment", []typedstream.Part{text("see "), a1, text(" ok")}, "see \ufffc ok"},
		{"an attachment's text is ignored", []typedstream.Part{{Text: "caption", FileTransferGUID: guid1}}, "\ufffc"},
		{"empty text parts", []typedstream.Part{text(""), a1, text(""), text("x"), text("")}, "\ufffcx"},
		{"non-ASCII", []typedstream.Part{text("Zoë 👍🏽 "), a1, text("日本語のテキスト, Ελληνικά")}, "Zoë 👍🏽 \ufffc日本語のテキスト, Ελληνικά"},
		{"over 127 bytes", []typedstream.Part{a1, text(strings.Repeat("é", 100)), a2}, "\ufffc" + strings.Repeat("é", 100) + "\ufffc"},
		{"over 32767 bytes", []typedstream.Part{text(strings.Repeat("日", 11000)), a1, text(strings.Repeat("0123456789", 4000))}, strings.Repeat("日", 11000) + "\ufffc" + strings.Repeat("0123456789", 4000)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			blob := typedstream.EncodeParts(tc.parts...)
			if got, err := typedstream.Structured(blob); err != nil || got != tc.want {
				t.Fatalf("structured reader = %q, %v; want %q", abbrev(got), err, abbrev(tc.want))
			}
			if got, err := typedstream.Text(blob); err != nil || got != tc.want {
				t.Fatalf("Text = %q, %v; want %q", abbrev(got), err, abbrev(tc.want))
			}
			if got, ok := typedstream.Scan(blob); !ok || got != tc.want {
				t.Fatalf("scan = %q, %v", abbrev(got), ok)
			}
		})
	}
}

// TestEncodePartsRuns checks each run's dictionary index and UTF-16 length,
// and that an empty text part has no run but keeps its part index.
func TestEncodePartsRuns(t *testing.T) {
	blob := typedstream.EncodeParts(
		typedstream.Part{Text: strings.Repeat("a", 200)},
		typedstream.Part{Text: ""},
		typedstream.Part{FileTransferGUID: guid1},
		typedstream.Part{Text: "😀" + strings.Repeat("x", 40000)},
	)
	for _, run := range []string{
		"\x84\x02iI\x01\x81\xc8\x00",                 // dictionary 1, 200 units
		"\x99\x02\x01",                               // "iI": dictionary 2, 1 unit
		"\x99\x03\x82\x42\x9c\x00\x00",               // dictionary 3, 2 + 40000 units
		"\x9b\x00\x86\x86",                           // part 0 ends the first dictionary
		"\x9f\x9b\x02\x86\x86",                       // C string O13 ("i"), "i", part 2 (part 1 has no run)
		"\x9f\x9b\x03\x86\x86\x86",                   // part 3 ends the archive
		"\x22__kIMFileTransferGUIDAttributeName\x86", // the attachment's key
		"\x24" + guid1 + "\x86",                      // and its GUID
	} {
		if !bytes.Contains(blob, []byte(run)) {
			t.Errorf("no %x in the archive", run)
		}
	}
	if n := bytes.Count(blob, []byte("iI")); n != 1 {
		t.Errorf("%d literal \"iI\" type strings, want 1 (then references)", n)
	}
	if n := bytes.Count(blob, []byte("\x1d__kIMMessagePartAttributeName\x86")); n != 1 {
		t.Errorf("%d literal part keys, want 1 (then references)", n)
	}
}
