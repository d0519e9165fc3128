package typedstream_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/blueline-app/blueline/bridge/messages/typedstream"
)

// asm assembles a blob by hand: an int is one byte, a string its bytes, a
// []byte itself. It lets the tests spell out archives byte by byte,
// independently of Encode.
func asm(t testing.TB, parts ...any) []byte {
	t.Helper()
	var b []byte
	for _, p := range parts {
		switch v := p.(type) {
		case int:
			if v < 0 || v > 0xff {
				t.Fatalf("asm: %d is not a byte", v)
			}
			b = append(b, byte(v))
		case string:
			b = append(b, v...)
		case []byte:
			b = append(b, v...)
		default:
			t.Fatalf("asm: unexpected %T", p)
		}
	}
	return b
}

// header is the 16 bytes every attributedBody starts with: streamer version
// 4, the 11-byte signature, system version 1000 (0x81 and a 2-byte integer).
const header = "\x04\x0bstreamtyped\x81\xe8\x03"

// fesker is the attributedBody hex dump published in the Stack Overflow
// question "Inspecting files of type NeXT/Apple typedstream version 4
// (NSArchiver)" (https://stackoverflow.com/questions/18834352), reassembled
// byte for byte from that dump and annotated here. S<n> is entry n of the
// shared-string table, O<n> entry n of the object table.
func fesker(t testing.TB) []byte {
	return asm(t,
		header,
		0x84, 0x01, "@", // type: S0 "@"
		0x84,                                         // O0: new object, the attributed string
		0x84, 0x84, 0x12, "NSAttributedString", 0x00, // O1: class S1, version 0
		0x84, 0x84, 0x08, "NSObject", 0x00, // O2: its superclass S2, version 0
		0x85,                               // nil: NSObject is a root class
		0x92,                               // type: S0 "@"
		0x84,                               // O3: new object, the string
		0x84, 0x84, 0x08, "NSString", 0x01, // O4: class S3, version 1
		0x94,            // superclass: O2 (NSObject)
		0x84, 0x01, "+", // type: S4 "+"
		0x06, "Fesker", // 6 bytes of UTF-8
		0x86,                         // end of O3
		0x84, 0x02, "iI", 0x01, 0x06, // type S5 "iI": attribute dictionary 1, 6 UTF-16 units
		0x92,                                   // type: S0 "@"
		0x84,                                   // O5: new object, the dictionary
		0x84, 0x84, 0x0c, "NSDictionary", 0x00, // O6: class S6, version 0
		0x94,                  // superclass: O2
		0x84, 0x01, "i", 0x01, // type S7 "i": one key-value pair
		0x92, 0x84, 0x96, // type "@", O7: new object of class O4 (NSString)
		0x96, 0x1d, "__kIMMessagePartAttributeName", // type S4 "+", 29 bytes
		0x86,       // end of O7
		0x92, 0x84, // type "@", O8: new object
		0x84, 0x84, 0x08, "NSNumber", 0x00, // O9: class S8
		0x84, 0x84, 0x07, "NSValue", 0x00, // O10: superclass S9
		0x94,            // superclass: O2
		0x84, 0x01, "*", // type: S10 "*"
		0x84, 0x99, // O11: new C string, S7 "i" (the number's type)
		0x99, 0x00, // type S7 "i", value 0
		0x86, 0x86, 0x86, // end of O8, O5, O0
	)
}

// edited is a real chat.db blob of an edited message, published as a test
// vector in a public project's attributedBody test ("I think Zoë really
// wants to see it"), reassembled byte for byte. Unlike fesker it has two
// attributes, an NSNumber of type "q" holding -1, and a second NSNumber whose
// C-string type is a back-reference into the object table.
func edited(t testing.TB) []byte {
	return asm(t,
		header,
		0x84, 0x01, "@",
		0x84,
		0x84, 0x84, 0x12, "NSAttributedString", 0x00,
		0x84, 0x84, 0x08, "NSObject", 0x00,
		0x85,
		0x92, 0x84,
		0x84, 0x84, 0x08, "NSString", 0x01,
		0x94,
		0x84, 0x01, "+",
		0x23, "I think Zo\xc3\xab really wants to see it", // 35 bytes
		0x86,
		0x84, 0x02, "iI", 0x01, 0x22, // dictionary 1, 34 UTF-16 units
		0x92, 0x84, // O5: the dictionary
		0x84, 0x84, 0x0c, "NSDictionary", 0x00,
		0x94,
		0x84, 0x01, "i", 0x02, // two pairs
		0x92, 0x84, 0x96, 0x96, 0x26, "__kIMBaseWritingDirectionAttributeName", 0x86, // O7
		0x92, 0x84, // O8: NSNumber
		0x84, 0x84, 0x08, "NSNumber", 0x00, // O9
		0x84, 0x84, 0x07, "NSValue", 0x00, // O10
		0x94,
		0x84, 0x01, "*", // S10 "*"
		0x84, 0x84, 0x01, "q", // O11: new C string, new shared string S11 "q"
		0x9d, 0xff, // type S11 "q", value -1
		0x86,
		0x92, 0x84, 0x96, 0x96, 0x1d, "__kIMMessagePartAttributeName", 0x86, // O12
		0x92, 0x84, 0x9b, // O13: new object of class O9 (NSNumber)
		0x9c,       // type S10 "*"
		0x9d,       // C string: reference to O11 ("q")
		0x9d, 0x00, // type S11 "q", value 0
		0x86, 0x86, 0x86,
	)
}

// plainPrefix is the start of a plain (NSAttributedString) blob up to and
// including the attribute dictionary's pair count, for text under 128 bytes.
// Tables afterwards: S0 "@", S1 NSAttributedString, S2 NSObject,
// S3 NSString, S4 "+", S5 "iI", S6 NSDictionary, S7 "i"; O0 the attributed
// string, O1 NSAttributedString, O2 NSObject, O3 the string, O4 NSString,
// O5 the dictionary, O6 NSDictionary.
func plainPrefix(t testing.TB, text string, pairs int) []byte {
	units := 0 // UTF-16 code units: two for a rune of four UTF-8 bytes
	for _, r := range text {
		units += utf8.RuneLen(r)/4 + 1
	}
	return asm(t,
		header,
		0x84, 0x01, "@",
		0x84,
		0x84, 0x84, 0x12, "NSAttributedString", 0x00,
		0x84, 0x84, 0x08, "NSObject", 0x00,
		0x85,
		0x92, 0x84,
		0x84, 0x84, 0x08, "NSString", 0x01,
		0x94,
		0x84, 0x01, "+", len(text), text,
		0x86,
		0x84, 0x02, "iI", 0x01, units,
		0x92, 0x84,
		0x84, 0x84, 0x0c, "NSDictionary", 0x00,
		0x94,
		0x84, 0x01, "i", pairs,
	)
}

// assorted is a plain blob whose attributes hold every kind of value the
// structured reader knows but Messages rarely writes: a byte array, a
// struct, floats, a class, a short array and a nil object.
func assorted(t testing.TB) []byte {
	f32 := binary.LittleEndian.AppendUint32(nil, math.Float32bits(1.5))
	f64 := binary.LittleEndian.AppendUint64(nil, math.Float64bits(2.25))
	return asm(t,
		plainPrefix(t, "a\ufffcb", 4),
		// "data" → NSData: an "i" length, then "[3c]" and three raw bytes.
		0x92, 0x84, 0x96, 0x96, 0x04, "data", 0x86,
		0x92, 0x84, 0x84, 0x84, 0x06, "NSData", 0x00, 0x94, // S8 NSData
		0x99, 0x03,
		0x84, 0x04, "[3c]", 0x01, 0x02, 0x03, // S9 "[3c]"
		0x86,
		// "range" → NSValue holding an NSRange struct of two "Q".
		0x92, 0x84, 0x96, 0x96, 0x05, "range", 0x86,
		0x92, 0x84, 0x84, 0x84, 0x07, "NSValue", 0x00, 0x94, // S10 NSValue
		0x84, 0x01, "*", // S11 "*"
		0x84, 0x84, 0x0d, "{_NSRange=QQ}", // a new C string, S12
		0x9e, 0x05, 0x81, 0x00, 0x01, // type S12: 5, 256
		0x86,
		// "thing" → an object of an unknown class with one group "fd[2s]{p=#}".
		0x92, 0x84, 0x96, 0x96, 0x05, "thing", 0x86,
		0x92, 0x84, 0x84, 0x84, 0x05, "Thing", 0x00, 0x94, // S13 Thing
		0x84, 0x0b, "fd[2s]{p=#}", // S14
		0x83, f32, 0x83, f64, // 1.5, 2.25
		0x01, 0xff, // [2s]: 1, -1
		0x93, // {p=#}: class O1 (NSAttributedString)
		0x86,
		// "nil" → nil.
		0x92, 0x84, 0x96, 0x96, 0x03, "nil", 0x86,
		0x92, 0x85,
		0x86, 0x86,
	)
}

// withValue is a plain blob with one attribute "k" whose value object (of
// class Thing) holds one group of the given type string and value bytes.
func withValue(t testing.TB, text, types string, value ...any) []byte {
	return asm(t,
		plainPrefix(t, text, 1),
		0x92, 0x84, 0x96, 0x96, 0x01, "k", 0x86,
		0x92, 0x84, 0x84, 0x84, 0x05, "Thing", 0x00, 0x94,
		0x84, len(types), types,
		asm(t, value...),
		0x86, 0x86, 0x86,
	)
}

// mutableHi is the blob Messages writes for "hi" with a mutable root
// (NSMutableAttributedString holding an NSMutableString), spelled out by
// hand. The layout is the one annotated in the public chat.db typedstream
// write-ups (the golden dumps of a one-part text message with a mutable
// root), whose prefix up to the "+" also appears, captured from a real
// database, in public test fixtures. It is the Stack Overflow dump above
// with two more classes, so every later reference is one higher.
func mutableHi(t testing.TB) []byte {
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
		0x02, "hi",
		0x86,
		0x84, 0x02, "iI", 0x01, 0x02, // S7 "iI": dictionary 1, 2 units
		0x92, 0x84, // O7: the dictionary
		0x84, 0x84, 0x0c, "NSDictionary", 0x00, // O8, S8
		0x95,
		0x84, 0x01, "i", 0x01, // S9 "i": one pair
		0x92, 0x84, 0x98, // O9: object of class O6 (NSString)
		0x98, 0x1d, "__kIMMessagePartAttributeName", // type S6 "+"
		0x86,
		0x92, 0x84, // O10: NSNumber
		0x84, 0x84, 0x08, "NSNumber", 0x00, // O11, S10
		0x84, 0x84, 0x07, "NSValue", 0x00, // O12, S11
		0x95,
		0x84, 0x01, "*", // S12 "*"
		0x84, 0x9b, // O13: C string S9 "i"
		0x9b, 0x00, // type S9 "i", value 0
		0x86, 0x86, 0x86,
	)
}

// roundTrips are the texts Encode → Text must give back unchanged.
var roundTrips = []struct {
	name string
	text string
}{
	{"empty", ""},
	{"ascii", "Running 5 min late, sorry!"},
	{"127 bytes", strings.Repeat("a", 127)},
	{"128 bytes", strings.Repeat("b", 128)},
	{"300 bytes", strings.Repeat("c", 300)},
	{"40000 bytes", strings.Repeat("0123456789", 4000)},
	{"70000 bytes", strings.Repeat("x", 70000)},
	{"emoji", "👍🏽 on my way 🚗💨 family: 👨‍👩‍👧‍👦 flag: 🇯🇵"},
	{"multibyte", "Zoë, naïve café — 日本語のテキスト, Ελληνικά, עברית, русский"},
	{"attachments", "\ufffc"},
	{"attachments and text", "\ufffcsee these\ufffc\ufffc ok"},
	{"quotes and escapes", `He said "hi" and 'bye' \ back\slash \n not a newline`},
	{"control characters", "line 1\nline 2\r\n\ttab\x00nul\x7f"},
	{"4-byte at the edge", strings.Repeat("a", 126) + "😀"},
}

func TestEncodeTextRoundTrip(t *testing.T) {
	for _, tc := range roundTrips {
		t.Run(tc.name, func(t *testing.T) {
			blob := typedstream.Encode(tc.text)
			got, err := typedstream.Text(blob)
			if err != nil {
				t.Fatalf("Text: %v", err)
			}
			if got != tc.text {
				t.Fatalf("Text = %q, want %q", abbrev(got), abbrev(tc.text))
			}
			// The structured reader reads it, not the fallback...
			if got, err := typedstream.Structured(blob); err != nil || got != tc.text {
				t.Fatalf("structured reader = %q, %v", abbrev(got), err)
			}
			// ...but the fallback would have read it too.
			if got, ok := typedstream.Scan(blob); !ok || got != tc.text {
				t.Fatalf("scan = %q, %v", abbrev(got), ok)
			}
		})
	}
}

func abbrev(s string) string {
	if len(s) > 60 {
		return fmt.Sprintf("%s…(%d bytes)", s[:60], len(s))
	}
	return s
}

func TestEncodeMatchesMessagesLayout(t *testing.T) {
	got := typedstream.Encode("hi")
	want := mutableHi(t)
	if !bytes.Equal(got, want) {
		t.Fatalf("Encode(\"hi\") =\n%x\nwant\n%x", got, want)
	}
}

// TestEncodeLengths checks the integer widths around the text: the byte
// length after the "+" type and the UTF-16 run length after "iI".
func TestEncodeLengths(t *testing.T) {
	for _, tc := range []struct {
		text      string
		byteLen   string // the length as archived
		runLength string
	}{
		{strings.Repeat("a", 127), "\x7f", "\x7f"},
		{strings.Repeat("a", 128), "\x81\x80\x00", "\x81\x80\x00"},
		{strings.Repeat("a", 300), "\x81\x2c\x01", "\x81\x2c\x01"},
		{strings.Repeat("a", 40000), "\x82\x40\x9c\x00\x00", "\x82\x40\x9c\x00\x00"},
		{"😀", "\x04", "\x02"},       // 4 UTF-8 bytes, 2 UTF-16 units
		{"é\ufffc", "\x05", "\x02"}, // 2 + 3 bytes, 2 units
	} {
		blob := typedstream.Encode(tc.text)
		if !bytes.Contains(blob, []byte("\x84\x01+"+tc.byteLen+tc.text+"\x86")) {
			t.Errorf("%q: no %x length before the text", abbrev(tc.text), tc.byteLen)
		}
		if !bytes.Contains(blob, []byte("\x84\x02iI\x01"+tc.runLength+"\x92")) {
			t.Errorf("%q: no run of %x UTF-16 units", abbrev(tc.text), tc.runLength)
		}
	}
	if blob := typedstream.Encode(""); bytes.Contains(blob, []byte("iI")) {
		t.Errorf("Encode(\"\") has an attribute run: %x", blob)
	}
}

func TestTextHandAssembled(t *testing.T) {
	for _, tc := range []struct {
		name string
		blob func(testing.TB) []byte
		want string
	}{
		{"stack overflow dump", fesker, "Fesker"},
		{"edited message", edited, "I think Zoë really wants to see it"},
		{"mutable root", mutableHi, "hi"},
		{"assorted attribute values", assorted, "a\ufffcb"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			blob := tc.blob(t)
			got, err := typedstream.Structured(blob)
			if err != nil || got != tc.want {
				t.Fatalf("structured reader = %q, %v; want %q", got, err, tc.want)
			}
			if got, err := typedstream.Text(blob); err != nil || got != tc.want {
				t.Fatalf("Text = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestTextTruncated(t *testing.T) {
	blobs := map[string][]byte{
		"stack overflow dump": fesker(t),
		"edited message":      edited(t),
		"assorted":            assorted(t),
		"encode short":        typedstream.Encode("hello"),
		"encode 300":          typedstream.Encode(strings.Repeat("é", 150)),
		"encode emoji":        typedstream.Encode("👍🏽\ufffc"),
		"encode empty":        typedstream.Encode(""),
		"encode parts":        attachmentHiAttachment(t),
	}
	for name, blob := range blobs {
		for n := range len(blob) {
			got, err := typedstream.Text(blob[:n])
			if !errors.Is(err, typedstream.ErrFormat) {
				t.Fatalf("%s cut to %d of %d bytes: Text = %q, %v; want ErrFormat", name, n, len(blob), got, err)
			}
		}
	}
}

// replace returns a copy of blob with the first occurrence of old replaced.
func replace(t testing.TB, blob []byte, old, new string) []byte {
	t.Helper()
	if !bytes.Contains(blob, []byte(old)) {
		t.Fatalf("replace: %x not in blob", old)
	}
	return bytes.Replace(blob, []byte(old), []byte(new), 1)
}

func TestTextCorrupt(t *testing.T) {
	f := fesker(t)
	for _, tc := range []struct {
		name string
		blob []byte
	}{
		{"nil", nil},
		{"empty", []byte{}},
		{"not an archive", []byte("just some text that is not a typedstream")},
		{"header only", []byte(header)},
		{"streamer version 3", replace(t, f, "\x04\x0b", "\x03\x0b")},
		{"signature length", replace(t, f, "\x04\x0b", "\x04\x0c")},
		{"big-endian signature", replace(t, f, "streamtyped", "typedstream")},
		{"bad signature", replace(t, f, "streamtyped", "streamTyped")},
		{"system version 999", replace(t, f, "\x81\xe8\x03", "\x81\xe7\x03")},
		{"system version tag", replace(t, f, "\x81\xe8\x03", "\x80\xe8\x03")},
		{"text length 2 GiB", replace(t, f, "\x06Fesker", "\x82\xff\xff\xff\x7fFesker")},
		{"text length 4 GiB", replace(t, f, "\x06Fesker", "\x82\xff\xff\xff\xffFesker")},
		{"text length 64-bit", replace(t, f, "\x06Fesker", "\x87\xff\xff\xff\xff\xff\xff\xff\xffFesker")},
		{"text length 65535", replace(t, f, "\x06Fesker", "\x81\xff\xffFesker")},
		{"text length is a tag", replace(t, f, "\x06Fesker", "\x80Fesker")},
		{"text length is new", replace(t, f, "\x06Fesker", "\x84Fesker")},
		{"no end after the text", replace(t, f, "Fesker\x86", "Fesker\x80")},
		{"unknown type for the text", replace(t, f, "\x84\x01+", "\x84\x01-")},
		{"nil text", replace(t, f, "\x06Fesker", "\x85")},
		{"invalid UTF-8", replace(t, f, "Fesker", "Fe\xffker")},
		{"overlong UTF-8", replace(t, f, "Fesker", "Fe\xc0\xafer")},
		{"surrogate in UTF-8", replace(t, f, "Fesker", "\xed\xa0\x80ker")},
		{"renamed string class", replace(t, f, "\x08NSString", "\x08NSStrinG")},
		{"nil root", asm(t, header, 0x84, 0x01, "@", 0x85)},
		{"root is a reference", asm(t, header, 0x84, 0x01, "@", 0x92)},
		{"first type not @", asm(t, header, 0x84, 0x01, "i", 0x05)},
		{"shared-string reference out of range", asm(t, header, 0xa0)},
		{"byte array longer than the blob", withValue(t, "hi", "[4294967295c]", 0x00)},
		{"array count overflow", withValue(t, "hi", "[99999999999999999999999!]")},
		{"array count beyond the blob", withValue(t, "hi", "[100000!]")},
		{"raw bytes beyond the blob", withValue(t, "hi", "[3c]", 0x01)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := typedstream.Text(tc.blob)
			if !errors.Is(err, typedstream.ErrFormat) {
				t.Fatalf("Text = %q, %v; want an error wrapping ErrFormat", got, err)
			}
			t.Log(err)
			if got != "" {
				t.Fatalf("Text = %q with an error", got)
			}
		})
	}
}

// TestTextFallback: where the structured reader gives up on something it
// does not understand, the marker scan still finds the text.
func TestTextFallback(t *testing.T) {
	f := fesker(t)
	deep := asm(t, f[:bytes.Index(f, []byte("Fesker\x86"))+7])
	for range 10000 {
		deep = append(deep, 0x92, 0x84, 0x93) // "@", a new object of class O1, …
	}
	for _, tc := range []struct {
		name string
		blob []byte
	}{
		{"pointer type in an attribute", withValue(t, "Fesker", "^v", 0x00)},
		{"union type in an attribute", withValue(t, "Fesker", "(u=ic)", 0x00)},
		{"unknown tag in an attribute", withValue(t, "Fesker", "i", 0x83)},
		{"float tag in an integer", withValue(t, "Fesker", "q", 0x83, 0, 0, 0, 0)},
		{"nested arrays over the work budget", withValue(t, "Fesker", "[150[150[150!]]]")},
		{"objects nested 10000 deep", deep},
		{"bad superclass reference", replace(t, f, "\x01\x94\x84\x01+", "\x01\xf0\x84\x01+")},
		{"class where an object belongs", replace(t, f, "\x92\x84\x96\x96", "\x92\x96\x96\x96")},
		{"root of another class", replace(t, f, "\x12NSAttributedString", "\x12NSAttributedStrinG")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := typedstream.Structured(tc.blob); err == nil {
				t.Fatalf("the structured reader accepted it; the test does not reach the fallback")
			}
			got, err := typedstream.Text(tc.blob)
			if err != nil || got != "Fesker" {
				t.Fatalf("Text = %q, %v; want %q", got, err, "Fesker")
			}
		})
	}
}

// TestTextMutations flips every byte of a few blobs to a few values: Text
// must not panic, must wrap ErrFormat when it fails, and must return valid
// UTF-8 when it succeeds.
func TestTextMutations(t *testing.T) {
	for _, blob := range [][]byte{fesker(t), edited(t), assorted(t), typedstream.Encode("hé👍"), attachmentHiAttachment(t)} {
		for i := range blob {
			for _, v := range []byte{0x00, 0x01, 0x7f, 0x80, 0x81, 0x82, 0x84, 0x85, 0x86, 0x87, 0x92, 0xff, blob[i] ^ 0x01} {
				m := bytes.Clone(blob)
				m[i] = v
				got, err := typedstream.Text(m)
				if err != nil && !errors.Is(err, typedstream.ErrFormat) {
					t.Fatalf("byte %d = %#x: error %v does not wrap ErrFormat", i, v, err)
				}
				if err == nil && !utf8.ValidString(got) {
					t.Fatalf("byte %d = %#x: invalid UTF-8 %q", i, v, got)
				}
			}
		}
	}
}

func TestTextDoesNotAliasInput(t *testing.T) {
	blob := typedstream.Encode("hello")
	got, err := typedstream.Text(blob)
	if err != nil {
		t.Fatal(err)
	}
	for i := range blob {
		blob[i] = 'x'
	}
	if got != "hello" {
		t.Fatalf("Text result changed with its input: %q", got)
	}
}

func FuzzText(f *testing.F) {
	for _, tc := range roundTrips {
		if len(tc.text) < 1000 {
			f.Add(typedstream.Encode(tc.text))
		}
	}
	f.Add(fesker(f))
	f.Add(edited(f))
	f.Add(mutableHi(f))
	f.Add(assorted(f))
	f.Add(attachmentHiAttachment(f))
	f.Add(withValue(f, "hi", "[3c]{a=i[2d]}", 1, 2, 3, 4, 0x83, 0, 0, 0, 0, 0, 0, 0, 0, 5))
	f.Add([]byte(header))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, blob []byte) {
		got, err := typedstream.Text(blob)
		if err != nil {
			if !errors.Is(err, typedstream.ErrFormat) {
				t.Fatalf("error %v does not wrap ErrFormat", err)
			}
			if got != "" {
				t.Fatalf("Text = %q with an error", got)
			}
			return
		}
		if !utf8.ValidString(got) {
			t.Fatalf("Text = %q: invalid UTF-8", got)
		}
	})
}

func FuzzRoundTrip(f *testing.F) {
	for _, tc := range roundTrips {
		if len(tc.text) < 1000 {
			f.Add(tc.text)
		}
	}
	f.Fuzz(func(t *testing.T, text string) {
		if !utf8.ValidString(text) {
			t.Skip("Encode takes UTF-8")
		}
		got, err := typedstream.Text(typedstream.Encode(text))
		if err != nil || got != text {
			t.Fatalf("Text(Encode(%q)) = %q, %v", text, got, err)
		}
	})
}

func BenchmarkText(b *testing.B) {
	for _, bc := range []struct {
		name string
		blob []byte
	}{
		{"message", typedstream.Encode("Running 5 min late, see you at the café 👍")},
		{"4KiB", typedstream.Encode(strings.Repeat("lorem ipsum ", 342))},
		{"edited", edited(b)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(bc.blob)))
			for b.Loop() {
				if _, err := typedstream.Text(bc.blob); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkEncode(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		typedstream.Encode("Running 5 min late, see you at the café 👍")
	}
}
