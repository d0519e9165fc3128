package typedstream

import (
	"encoding/binary"
	"math"
	"unicode/utf8"
)

// partAttribute is the attribute Messages puts on every run of a message's
// text: the index of the message part the run belongs to.
const partAttribute = "__kIMMessagePartAttributeName"

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
	if len(text) > math.MaxInt32 {
		panic("typedstream: text too long to archive")
	}
	e := encoder{
		buf:     make([]byte, 0, len(text)+256),
		strings: make(map[string]int, 16),
		classes: make(map[string]int, 8),
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

	if units := utf16Len(text); units > 0 {
		// The run: (dictionary index 1, length in UTF-16 code units).
		e.sharedString("iI")
		e.int(1)
		e.int(int64(units))

		e.sharedString("@")
		e.beginObject("NSDictionary", "NSObject")
		e.sharedString("i")
		e.int(1) // one key-value pair

		e.sharedString("@")
		e.beginObject("NSString", "NSObject")
		e.sharedString("+")
		e.int(int64(len(partAttribute)))
		e.buf = append(e.buf, partAttribute...)
		e.end()

		e.sharedString("@")
		e.beginObject("NSNumber", "NSValue", "NSObject")
		e.sharedString("*")
		e.cString("i") // the number's Objective-C type
		e.sharedString("i")
		e.int(0)
		e.end()

		e.end() // the dictionary
	}
	e.end() // the attributed string
	return e.buf
}

// encoder writes an archive, keeping the tables a reader rebuilds so that a
// repeated string or class is written as a reference, as NSArchiver does.
type encoder struct {
	buf     []byte
	strings map[string]int // shared string → its index
	classes map[string]int // class name → its object-table index
	objects int            // object-table entries so far
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

func (e *encoder) cString(s string) {
	e.buf = append(e.buf, tagNew)
	e.sharedString(s)
	e.objects++
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
