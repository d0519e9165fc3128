package typedstream

import (
	"encoding/binary"
	"math"
	"strings"
	"unicode/utf8"
)

// The attributes Messages puts on the runs of a message's text:
// partAttribute on every run, the index of the message part it belongs to;
// transferAttribute on an attachment's placeholder, the GUID of its file
// transfer (the attachment row).
const (
	partAttribute     = "__kIMMessagePartAttributeName"
	transferAttribute = "__kIMFileTransferGUIDAttributeName"
)

// attachmentText is the text of an attachment part: the object replacement
// character that stands for the attachment in the string.
const attachmentText = "\uFFFC"

// classVersions are the versions Foundation archives these classes with.
var classVersions = map[string]int64{
	"NSMutableAttributedString": 0,
	"NSAttributedString":        0,
	"NSMutableString":           1,
	"NSString":                  1,
	"NSDictionary":              0,
	"NSNumber":                  0,
	"NSValue":                   0,
	"NSObject":                  0,
}

// Encode archives text as an NSAttributedString the way Messages writes
// attributedBody: the streamtyped header; an NSMutableAttributedString
// (NSMutableAttributedString → NSAttributedString → NSObject) whose string is
// an NSMutableString (→ NSString) holding the UTF-8 bytes as a "+" value;
// then one attribute run over the whole text (its UTF-16 length) with an
// NSDictionary of __kIMMessagePartAttributeName → NSNumber 0; then the end
// tags. Empty text has no run.
//
// It exists so tests can build realistic Ventura-style chat.db rows, whose
// text column is NULL. text should be valid UTF-8; Text refuses anything
// else. Encode panics if text is longer than math.MaxInt32 bytes, which an
// archive cannot express.
func Encode(text string) []byte {
	return EncodeParts(Part{Text: text})
}

// Part is one part of a message body: text, or an attachment (its U+FFFC
// placeholder carrying the file transfer GUID).
type Part struct {
	Text             string
	FileTransferGUID string
}

// EncodeParts archives a message body of several parts as Encode archives
// one: the string is the parts' texts joined, an attachment part (one with a
// FileTransferGUID) giving U+FFFC whatever its Text. Each part then has its
// own attribute run, in order, with a dictionary of its own (indexes 1, 2,
// 3…): __kIMMessagePartAttributeName → NSNumber of the part's index in
// parts, and for an attachment first __kIMFileTransferGUIDAttributeName →
// NSString of its GUID, the order Messages writes them in. An empty text
// part has no run (a run cannot be empty) but keeps its index, so the
// indexes still say which part of parts a run is.
//
// As NSArchiver does, an object already written is referred back to: an
// attribute name is spelled out (a new NSString object) in the first run
// that has it, and later runs refer to that object, so with several
// attachments only the first run names __kIMFileTransferGUIDAttributeName
// literally. Shared strings, classes and C strings too are written once and
// then referenced. The GUIDs and numbers are new objects in every run, and
// every run has a dictionary of its own, since no two runs have the same
// part index. (Messages' own archives sometimes spell a name out again in a
// later run: NSArchiver goes by object identity, and a dictionary may hold
// another copy of the name. A reader must take both.) EncodeParts panics if
// the text is longer than math.MaxInt32 bytes.
func EncodeParts(parts ...Part) []byte {
	texts := make([]string, len(parts))
	for i, p := range parts {
		texts[i] = p.Text
		if p.FileTransferGUID != "" {
			texts[i] = attachmentText
		}
	}
	text := strings.Join(texts, "")
	if len(text) > math.MaxInt32 {
		panic("typedstream: text too long to archive")
	}

	e := encoder{
		buf:      make([]byte, 0, len(text)+256+len(parts)*160),
		strings:  make(map[string]int, 16),
		classes:  make(map[string]int, 8),
		cStrings: make(map[string]int, 1),
		keys:     make(map[string]int, 2),
	}
	e.header()

	e.sharedString("@")
	e.beginObject("NSMutableAttributedString", "NSAttributedString", "NSObject")

	e.sharedString("@")
	e.beginObject("NSMutableString", "NSString", "NSObject")
	e.sharedString("+")
	e.int(int64(len(text)))
	e.buf = append(e.buf, text...)
	e.end()

	dict := 0
	for i, p := range parts {
		units := utf16Len(texts[i])
		if units == 0 {
			continue
		}
		dict++
		// The run: (its dictionary's index, its length in UTF-16 code
		// units), then the dictionary, since its index is new.
		e.sharedString("iI")
		e.int(int64(dict))
		e.int(int64(units))

		e.sharedString("@")
		e.beginObject("NSDictionary", "NSObject")
		e.sharedString("i")
		if p.FileTransferGUID != "" {
			e.int(2) // key-value pairs
			e.key(transferAttribute)
			e.nsString(p.FileTransferGUID)
		} else {
			e.int(1)
		}
		e.key(partAttribute)
		e.nsNumber(int64(i))
		e.end() // the dictionary
	}
	e.end() // the attributed string
	return e.buf
}

// encoder writes an archive, keeping the tables a reader rebuilds so that a
// repeated string, class or C string is written as a reference, as
// NSArchiver does.
type encoder struct {
	buf      []byte
	strings  map[string]int // shared string → its index
	classes  map[string]int // class name → its object-table index
	cStrings map[string]int // C string → its object-table index
	keys     map[string]int // attribute name → its NSString's object-table index
	objects  int            // object-table entries so far
}

func (e *encoder) header() {
	e.int(streamerVersion)
	e.int(int64(len(signature)))
	e.buf = append(e.buf, signature...)
	e.int(systemVersion)
}

// int writes v in the fewest bytes: one byte when it fits a signed byte
// outside the tag range, else a tag and 2 or 4 little-endian bytes.
func (e *encoder) int(v int64) {
	switch {
	case v >= refBase && v <= math.MaxInt8:
		e.buf = append(e.buf, byte(int8(v)))
	case v >= math.MinInt16 && v <= math.MaxInt16:
		e.buf = append(e.buf, tagInt16)
		e.buf = binary.LittleEndian.AppendUint16(e.buf, uint16(int16(v)))
	default:
		e.buf = append(e.buf, tagInt32)
		e.buf = binary.LittleEndian.AppendUint32(e.buf, uint32(int32(v)))
	}
}

func (e *encoder) ref(index int) { e.int(int64(index) + refBase) }

func (e *encoder) sharedString(s string) {
	if i, ok := e.strings[s]; ok {
		e.ref(i)
		return
	}
	e.strings[s] = len(e.strings)
	e.buf = append(e.buf, tagNew)
	e.int(int64(len(s)))
	e.buf = append(e.buf, s...)
}

// beginObject writes a literal object's head and class chain, most derived
// class first, ending at the first class already written (a reference) or
// after the root class (Nil).
func (e *encoder) beginObject(chain ...string) {
	e.buf = append(e.buf, tagNew)
	e.objects++ // the object's own slot, taken before its classes
	for _, name := range chain {
		if i, ok := e.classes[name]; ok {
			e.ref(i)
			return
		}
		e.buf = append(e.buf, tagNew)
		e.sharedString(name)
		e.int(classVersions[name])
		e.classes[name] = e.objects
		e.objects++
	}
	e.buf = append(e.buf, tagNil)
}

// cString writes a C string value: the first time a literal, which takes an
// object-table slot, then a reference to that slot.
func (e *encoder) cString(s string) {
	if i, ok := e.cStrings[s]; ok {
		e.ref(i)
		return
	}
	e.buf = append(e.buf, tagNew)
	e.sharedString(s)
	e.cStrings[s] = e.objects
	e.objects++
}

// key writes an "@" group holding the attribute name s: the first time a
// new NSString object, then a reference to it.
func (e *encoder) key(s string) {
	if i, ok := e.keys[s]; ok {
		e.sharedString("@")
		e.ref(i)
		return
	}
	e.keys[s] = e.objects // the slot nsString's object takes
	e.nsString(s)
}

// nsString writes an "@" group holding a new NSString object with s.
func (e *encoder) nsString(s string) {
	e.sharedString("@")
	e.beginObject("NSString", "NSObject")
	e.sharedString("+")
	e.int(int64(len(s)))
	e.buf = append(e.buf, s...)
	e.end()
}

// nsNumber writes an "@" group holding a new NSNumber object of type int
// with v.
func (e *encoder) nsNumber(v int64) {
	e.sharedString("@")
	e.beginObject("NSNumber", "NSValue", "NSObject")
	e.sharedString("*")
	e.cString("i") // the number's Objective-C type
	e.sharedString("i")
	e.int(v)
	e.end()
}

func (e *encoder) end() { e.buf = append(e.buf, tagEnd) }

// utf16Len is the length of s in UTF-16 code units, as NSString counts.
func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		if r >= 0x10000 && r <= utf8.MaxRune {
			n += 2
		} else {
			n++
		}
	}
	return n
}
