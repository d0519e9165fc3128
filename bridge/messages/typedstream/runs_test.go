package typedstream_test

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/blueline-app/blueline/bridge/messages/typedstream"
)

// The attribute names Messages writes, and a third GUID.
const (
	transferKey = "__kIMFileTransferGUIDAttributeName"
	partKey     = "__kIMMessagePartAttributeName"
	boldKey     = "__kIMTextBoldAttributeName"
	guid3       = "0C5C1B76-8D4E-4F5A-9B1E-6A2D3C4B5E6F"
)

// mutablePrefix is mutableHi up to the end of its string, holding text
// (under 128 bytes) instead: objects O0–O6 and shared strings S0–S6 as
// annotated there. The runs follow.
func mutablePrefix(t testing.TB, text string) []byte {
	return asm(t,
		header,
		0x84, 0x01, "@",
		0x84,
		0x84, 0x84, 0x19, "NSMutableAttributedString", 0x00,
		0x84, 0x84, 0x12, "NSAttributedString", 0x00,
		0x84, 0x84, 0x08, "NSObject", 0x00,
		0x85,
		0x92, 0x84,
		0x84, 0x84, 0x0f, "NSMutableString", 0x01,
		0x84, 0x84, 0x08, "NSString", 0x01,
		0x95,
		0x84, 0x01, "+", len(text), text,
		0x86,
	)
}

// threeFiles is a body of three attachments, each followed by text, in the
// layout of the multipart archive published with imessage-exporter's
// typedstream tests ("MultiPart"): the first run spells out both attribute
// names; the second spells the part name out again (another copy of the
// string, so another object); from the third run on both names are
// references to the first run's objects.
func threeFiles(t testing.TB) []byte {
	return asm(t,
		mutablePrefix(t, "\ufffcone\ufffctwo!\ufffcthree"),
		0x84, 0x02, "iI", 0x01, 0x01, // S7 "iI": dictionary 1, 1 unit
		0x92, 0x84, 0x84, 0x84, 0x0c, "NSDictionary", 0x00, 0x95, // O7, class O8 (S8)
		0x84, 0x01, "i", 0x02, // S9 "i": two pairs
		0x92, 0x84, 0x98, 0x98, len(transferKey), transferKey, 0x86, // O9
		0x92, 0x84, 0x98, 0x98, len(guid1), guid1, 0x86, // O10
		0x92, 0x84, 0x98, 0x98, len(partKey), partKey, 0x86, // O11
		0x92, 0x84, // O12: NSNumber
		0x84, 0x84, 0x08, "NSNumber", 0x00, 0x84, 0x84, 0x07, "NSValue", 0x00, 0x95, // O13 (S10), O14 (S11)
		0x84, 0x01, "*", 0x84, 0x9b, // S12 "*", O15: C string "i"
		0x9b, 0x00, 0x86, // part 0
		0x86,
		0x99, 0x02, 0x03, // dictionary 2, 3 units
		0x92, 0x84, 0x9a, 0x9b, 0x01, // O16
		0x92, 0x84, 0x98, 0x98, len(partKey), partKey, 0x86, // O17: the part name again
		0x92, 0x84, 0x9f, 0x9e, 0xa1, 0x9b, 0x01, 0x86, // O18: part 1
		0x86,
		0x99, 0x03, 0x01, // dictionary 3, 1 unit
		0x92, 0x84, 0x9a, 0x9b, 0x02, // O19
		0x92, 0x9b, // the transfer name: O9
		0x92, 0x84, 0x98, 0x98, len(guid2), guid2, 0x86, // O20
		0x92, 0x9d, // the part name: O11
		0x92, 0x84, 0x9f, 0x9e, 0xa1, 0x9b, 0x02, 0x86, // O21: part 2
		0x86,
		0x99, 0x04, 0x04, // dictionary 4, 4 units
		0x92, 0x84, 0x9a, 0x9b, 0x01, // O22
		0x92, 0x9d,
		0x92, 0x84, 0x9f, 0x9e, 0xa1, 0x9b, 0x03, 0x86, // O23: part 3
		0x86,
		0x99, 0x05, 0x01, // dictionary 5, 1 unit
		0x92, 0x84, 0x9a, 0x9b, 0x02, // O24
		0x92, 0x9b,
		0x92, 0x84, 0x98, 0x98, len(guid3), guid3, 0x86, // O25
		0x92, 0x9d,
		0x92, 0x84, 0x9f, 0x9e, 0xa1, 0x9b, 0x04, 0x86, // O26: part 4
		0x86,
		0x99, 0x06, 0x05, // dictionary 6, 5 units
		0x92, 0x84, 0x9a, 0x9b, 0x01, // O27
		0x92, 0x9d,
		0x92, 0x84, 0x9f, 0x9e, 0xa1, 0x9b, 0x05, 0x86, // O28: part 5
		0x86,
		0x86, // end of O0
	)
}

// threeFilesRuns is what Runs reads from threeFiles.
var threeFilesRuns = []typedstream.Run{
	{Length: 1, Attributes: map[string]any{transferKey: guid1, partKey: int64(0)}},
	{Length: 3, Attributes: map[string]any{partKey: int64(1)}},
	{Length: 1, Attributes: map[string]any{transferKey: guid2, partKey: int64(2)}},
	{Length: 4, Attributes: map[string]any{partKey: int64(3)}},
	{Length: 1, Attributes: map[string]any{transferKey: guid3, partKey: int64(4)}},
	{Length: 5, Attributes: map[string]any{partKey: int64(5)}},
}

// boldTwice is "so bold, so bold" with both "bold"s bold, in one message
// part: the third and fourth runs have the same attributes as the first and
// second, so they name those dictionaries by number and nothing follows.
// With viaReference the third run instead takes a new number whose
// dictionary is a reference to the first run's object.
func boldTwice(t testing.TB, viaReference bool) []byte {
	third := []byte{0x99, 0x01, 0x05} // dictionary 1, 5 units
	if viaReference {
		third = []byte{0x99, 0x03, 0x05, 0x92, 0x99} // dictionary 3: O7
	}
	return asm(t,
		mutablePrefix(t, "so bold, so bold"),
		0x84, 0x02, "iI", 0x01, 0x03, // dictionary 1, 3 units
		0x92, 0x84, 0x84, 0x84, 0x0c, "NSDictionary", 0x00, 0x95, // O7, O8
		0x84, 0x01, "i", 0x01, // one pair
		0x92, 0x84, 0x98, 0x98, len(partKey), partKey, 0x86, // O9
		0x92, 0x84, // O10: NSNumber
		0x84, 0x84, 0x08, "NSNumber", 0x00, 0x84, 0x84, 0x07, "NSValue", 0x00, 0x95, // O11, O12
		0x84, 0x01, "*", 0x84, 0x9b, // O13: C string "i"
		0x9b, 0x00, 0x86,
		0x86,
		0x99, 0x02, 0x04, // dictionary 2, 4 units
		0x92, 0x84, 0x9a, 0x9b, 0x02, // O14: two pairs
		0x92, 0x9b, // the part name: O9
		0x92, 0x84, 0x9d, 0x9e, 0x9f, 0x9b, 0x00, 0x86, // O15: part 0
		0x92, 0x84, 0x98, 0x98, len(boldKey), boldKey, 0x86, // O16
		0x92, 0x84, 0x9d, 0x9e, 0x9f, 0x9b, 0x01, 0x86, // O17: 1
		0x86,
		third,
		0x99, 0x02, 0x04, // dictionary 2, 4 units
		0x86,
	)
}

// boldTwiceRuns is what Runs reads from boldTwice.
var boldTwiceRuns = []typedstream.Run{
	{Length: 3, Attributes: map[string]any{partKey: int64(0)}},
	{Length: 4, Attributes: map[string]any{partKey: int64(0), boldKey: int64(1)}},
	{Length: 5, Attributes: map[string]any{partKey: int64(0)}},
	{Length: 4, Attributes: map[string]any{partKey: int64(0), boldKey: int64(1)}},
}

func TestRunsReferences(t *testing.T) {
	plain := map[string]any{partKey: int64(0)}
	for _, tc := range []struct {
		name string
		blob []byte
		want []typedstream.Run
	}{
		{"names referred back to", threeFiles(t), threeFilesRuns},
		{"dictionaries named by number", boldTwice(t, false), boldTwiceRuns},
		{"a dictionary referred back to", boldTwice(t, true), boldTwiceRuns},
		{"EncodeParts", attachmentHiAttachment(t), []typedstream.Run{
			{Length: 1, Attributes: map[string]any{transferKey: guid1, partKey: int64(0)}},
			{Length: 2, Attributes: map[string]any{partKey: int64(1)}},
			{Length: 1, Attributes: map[string]any{transferKey: guid2, partKey: int64(2)}},
		}},
		{"one run", mutableHi(t), []typedstream.Run{{Length: 2, Attributes: plain}}},
		{"stack overflow dump", fesker(t), []typedstream.Run{{Length: 6, Attributes: plain}}},
		{"no runs", typedstream.Encode(""), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := typedstream.Runs(tc.blob)
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Runs = %v, %v\nwant %v", got, err, tc.want)
			}
		})
	}

	// A dictionary named again is the same map, not a copy.
	runs, err := typedstream.Runs(boldTwice(t, false))
	if err != nil || reflect.ValueOf(runs[0].Attributes).UnsafePointer() != reflect.ValueOf(runs[2].Attributes).UnsafePointer() {
		t.Errorf("runs 1 and 3 do not share their dictionary (%v)", err)
	}
}

// TestRunsValues: a value other than a string, an integer number or a
// dictionary is kept as nil, and Run.String reads only strings.
func TestRunsValues(t *testing.T) {
	runs, err := typedstream.Runs(assorted(t))
	if err != nil || len(runs) != 1 {
		t.Fatalf("Runs = %v, %v", runs, err)
	}
	want := map[string]any{"data": nil, "range": nil, "thing": nil, "nil": nil}
	if !reflect.DeepEqual(runs[0].Attributes, want) {
		t.Errorf("attributes = %v, want %v", runs[0].Attributes, want)
	}

	r := threeFilesRuns[0]
	if s, ok := r.String(transferKey); !ok || s != guid1 {
		t.Errorf("String(transfer) = %q, %v", s, ok)
	}
	for _, key := range []string{partKey, "absent"} {
		if s, ok := r.String(key); ok {
			t.Errorf("String(%s) = %q", key, s)
		}
	}
	if s, ok := (typedstream.Run{}).String(transferKey); ok {
		t.Errorf("String on a run without attributes = %q", s)
	}
}

// TestRunsEncodeParts: the runs of any EncodeParts body are its non-empty
// parts, in order, with their lengths adding up to the text's.
func TestRunsEncodeParts(t *testing.T) {
	a1 := typedstream.Part{FileTransferGUID: guid1}
	a2 := typedstream.Part{FileTransferGUID: guid2}
	a3 := typedstream.Part{FileTransferGUID: guid3}
	text := func(s string) typedstream.Part { return typedstream.Part{Text: s} }
	for _, parts := range [][]typedstream.Part{
		{text("hello")},
		{a1},
		{a1, text(" and "), a2, text(" and "), a3},
		{a1, a2, a3},
		{text(""), a1, text(""), text("x"), a2, a1},
		{text("Zoë 👍🏽 "), a1, text(strings.Repeat("日", 11000)), a2, text(strings.Repeat("0123456789", 4000)), a3},
	} {
		blob := typedstream.EncodeParts(parts...)
		runs, err := typedstream.Runs(blob)
		if err != nil {
			t.Fatalf("%d parts: %v", len(parts), err)
		}
		var want []typedstream.Run
		for i, p := range parts {
			attrs := map[string]any{partKey: int64(i)}
			length := len(utf16.Encode([]rune(p.Text)))
			if p.FileTransferGUID != "" {
				attrs[transferKey] = p.FileTransferGUID
				length = 1
			}
			if length > 0 {
				want = append(want, typedstream.Run{Length: length, Attributes: attrs})
			}
		}
		if !reflect.DeepEqual(runs, want) {
			t.Errorf("Runs(EncodeParts(%d parts)) =\n%v\nwant\n%v", len(parts), abbrevRuns(runs), abbrevRuns(want))
		}
		body, _ := typedstream.Text(blob)
		total := 0
		for _, r := range runs {
			total += r.Length
		}
		if n := len(utf16.Encode([]rune(body))); total != n {
			t.Errorf("runs cover %d units of %d", total, n)
		}
	}
}

func abbrevRuns(runs []typedstream.Run) string {
	var b strings.Builder
	for _, r := range runs {
		fmt.Fprintf(&b, "%d %v\n", r.Length, r.Attributes)
	}
	return b.String()
}

// TestRunsTruncated: every prefix of a blob is refused, and what comes back
// with the error is whole runs, the first ones.
func TestRunsTruncated(t *testing.T) {
	for name, blob := range map[string][]byte{
		"three files":  threeFiles(t),
		"bold twice":   boldTwice(t, false),
		"EncodeParts":  attachmentHiAttachment(t),
		"assorted":     assorted(t),
		"edited":       edited(t),
		"encode empty": typedstream.Encode(""),
	} {
		full, err := typedstream.Runs(blob)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for n := range len(blob) {
			got, err := typedstream.Runs(blob[:n])
			if !errors.Is(err, typedstream.ErrFormat) {
				t.Fatalf("%s cut to %d of %d bytes: Runs = %v, %v; want ErrFormat", name, n, len(blob), got, err)
			}
			if len(got) > len(full) || len(got) > 0 && !reflect.DeepEqual(got, full[:len(got)]) {
				t.Fatalf("%s cut to %d bytes: Runs = %v, want a prefix of %v", name, n, got, full)
			}
		}
	}
}

func TestRunsCorrupt(t *testing.T) {
	three := threeFiles(t)
	bold := boldTwice(t, false)
	guid2Pair := "\x92\x9b\x92\x84\x98\x98\x24" + guid2 // run 3: the transfer name (O9), then the GUID
	for _, tc := range []struct {
		name string
		blob []byte
		want []typedstream.Run // returned with the error
	}{
		{"nil", nil, nil},
		{"not an archive", []byte(transferKey), nil},
		{"header only", []byte(header), nil},
		{"root of another class", replace(t, three, "\x12NSAttributedString", "\x12NSAttributedStrinG"), nil},
		{"dictionary number not an integer", replace(t, three, "\x84\x02iI", "\x84\x02fI"), nil},
		{"negative length", replace(t, three, "\x99\x04\x04", "\x99\x04\xff"), threeFilesRuns[:3]},
		{"number without a length", replace(t, bold, "\x99\x02\x04\x86", "\x9b\x02\x86"), boldTwiceRuns[:3]},
		{"run without its dictionary", replace(t, bold, "\x99\x02\x04\x86", "\x99\x03\x04\x86"), boldTwiceRuns[:3]},
		{"a string where the dictionary belongs", replace(t, three, "\x99\x02\x03\x92\x84\x9a", "\x99\x02\x03\x92\x84\x98\x98\x01x\x86\x92\x84\x9a"), threeFilesRuns[:1]},
		{"nil dictionary, then pairs", replace(t, three, "\x99\x02\x03\x92\x84\x9a", "\x99\x02\x03\x92\x85\x92\x84\x9a"),
			[]typedstream.Run{threeFilesRuns[0], {Length: 3}}},
		{"reference to a later object", replace(t, three, guid2Pair, "\x92\xc0"+guid2Pair[2:]), threeFilesRuns[:2]},
		{"reference to a class", replace(t, three, guid2Pair, "\x92\x9a"+guid2Pair[2:]), threeFilesRuns[:2]},
		{"pair count beyond the pairs", replace(t, three, "\x99\x02\x03\x92\x84\x9a\x9b\x01", "\x99\x02\x03\x92\x84\x9a\x9b\x02"), threeFilesRuns[:1]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := typedstream.Runs(tc.blob)
			if !errors.Is(err, typedstream.ErrFormat) {
				t.Fatalf("Runs = %v, %v; want an error wrapping ErrFormat", got, err)
			}
			t.Log(err)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Runs = %v with the error, want %v", got, tc.want)
			}
		})
	}
}

// TestRunsDictionaryShapes: a dictionary whose fields are not a count and
// that many key–value pairs is refused; a pair whose key is not a string is
// left out.
func TestRunsDictionaryShapes(t *testing.T) {
	dict := func(fields ...any) []byte {
		return asm(t, mutablePrefix(t, "x"),
			0x84, 0x02, "iI", 0x01, 0x01,
			0x92, 0x84, 0x84, 0x84, 0x0c, "NSDictionary", 0x00, 0x95, // O7, O8
			asm(t, fields...),
			0x86, 0x86)
	}
	key := func(s string) []byte { return asm(t, 0x92, 0x84, 0x98, 0x98, len(s), s, 0x86) }
	for _, tc := range []struct {
		name string
		blob []byte
		want map[string]any // nil: refused
	}{
		{"empty", dict(0x84, 0x01, "i", 0x00), map[string]any{}},
		{"one pair", dict(0x84, 0x01, "i", 0x01, key("k"), key("v")), map[string]any{"k": "v"}},
		{"nil value", dict(0x84, 0x01, "i", 0x01, key("k"), 0x92, 0x85), map[string]any{"k": nil}},
		{"nil key", dict(0x84, 0x01, "i", 0x01, 0x92, 0x85, key("v")), map[string]any{}},
		{"a key that is the dictionary itself", dict(0x84, 0x01, "i", 0x01, 0x92, 0x99, key("v")), map[string]any{}},
		{"no count", dict(), nil},
		{"a key without a value", dict(0x84, 0x01, "i", 0x01, key("k")), nil},
		{"a count of -1", dict(0x84, 0x01, "i", 0xff), nil},
		{"an integer where a key belongs", dict(0x84, 0x01, "i", 0x01, 0x84, 0x02, "ii", 0x01, 0x02), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runs, err := typedstream.Runs(tc.blob)
			if tc.want == nil {
				if !errors.Is(err, typedstream.ErrFormat) || len(runs) != 0 {
					t.Fatalf("Runs = %v, %v; want none and ErrFormat", runs, err)
				}
				return
			}
			if err != nil || len(runs) != 1 || !reflect.DeepEqual(runs[0].Attributes, tc.want) {
				t.Fatalf("Runs = %v, %v; want one run with %v", runs, err, tc.want)
			}
		})
	}
}

// TestRunsMutations flips every byte of a few blobs to a few values: Runs
// must not panic, must wrap ErrFormat when it fails, and every run it
// returns must have a length.
func TestRunsMutations(t *testing.T) {
	for _, blob := range [][]byte{threeFiles(t), boldTwice(t, true), assorted(t), attachmentHiAttachment(t)} {
		for i := range blob {
			for _, v := range []byte{0x00, 0x01, 0x7f, 0x80, 0x81, 0x82, 0x84, 0x85, 0x86, 0x87, 0x92, 0x9b, 0xff, blob[i] ^ 0x01} {
				m := bytes.Clone(blob)
				m[i] = v
				checkRuns(t, m)
			}
		}
	}
}

func checkRuns(t *testing.T, blob []byte) {
	t.Helper()
	runs, err := typedstream.Runs(blob)
	if err != nil && !errors.Is(err, typedstream.ErrFormat) {
		t.Fatalf("%x: error %v does not wrap ErrFormat", blob, err)
	}
	for _, r := range runs {
		if r.Length < 0 {
			t.Fatalf("%x: run of length %d", blob, r.Length)
		}
	}
}

func FuzzRuns(f *testing.F) {
	f.Add(threeFiles(f))
	f.Add(boldTwice(f, false))
	f.Add(boldTwice(f, true))
	f.Add(attachmentHiAttachment(f))
	f.Add(assorted(f))
	f.Add(fesker(f))
	f.Add(typedstream.EncodeParts(typedstream.Part{FileTransferGUID: guid1}, typedstream.Part{Text: "x"}, typedstream.Part{FileTransferGUID: guid2}))
	f.Add([]byte(header))
	f.Fuzz(func(t *testing.T, blob []byte) {
		checkRuns(t, blob)
	})
}
