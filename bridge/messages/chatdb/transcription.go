package chatdb

import (
	"bytes"
	"encoding/binary"
	"encoding/xml"
	"math"
	"slices"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Where macOS keeps the transcription of a voice memo (is_audio_message = 1):
// the row's body is only the U+FFFC attachment placeholder, and
//
//   - attributedBody gives that placeholder an "IMAudioTranscription"
//     attribute holding the text (BlueBubbles and imessage-exporter read it
//     there), and
//   - the attachment's user_info column holds a property list with the key
//     "audio-transcription" (openclaw/imsg reads it there).
//
// Both may be written after the row itself. Rows prefers the attribute, then
// user_info, then a plain body text.

// Typedstream head bytes (see the typedstream package for the format).
const (
	tsInt16 = 0x81
	tsInt32 = 0x82
	tsNew   = 0x84
	tsNil   = 0x85
	tsEnd   = 0x86
)

// The attributes of an attachment's U+FFFC placeholder that are read here.
const (
	transcriptionAttribute = "IMAudioTranscription"
	transferAttribute      = "__kIMFileTransferGUIDAttributeName"
)

// attributedTranscription finds the IMAudioTranscription attribute in an
// attributedBody blob and returns its NSString value, the first that is not
// blank, trimmed.
func attributedTranscription(blob []byte) (string, bool) {
	for _, s := range attributeStrings(blob, transcriptionAttribute) {
		if t := strings.TrimSpace(s); t != "" {
			return t, true
		}
	}
	return "", false
}

// fileTransferGUIDs returns the attachment GUIDs an attributedBody names
// (__kIMFileTransferGUIDAttributeName), in order, without duplicates.
func fileTransferGUIDs(blob []byte) []string {
	var guids []string
	for _, g := range attributeStrings(blob, transferAttribute) {
		if g != "" && !slices.Contains(guids, g) {
			guids = append(guids, g)
		}
	}
	return guids
}

// attributeStrings returns the NSString values of every attribute named
// name in an attributedBody blob, in stream order.
//
// It does not walk the archive: it finds each literal key (the characters
// of a new NSString object: their length, then their bytes) and reads only
// the layout macOS writes after it for a key/value pair (end of the key
// object, "@" group, a new NSString object, its "+" group). What it skips:
// a key or value written as a reference to an earlier object (NSArchiver
// does that for an object it has archived before) and a value of another
// class.
func attributeStrings(blob []byte, name string) []string {
	key := unsharedString(name)
	var values []string
	for at := 0; ; {
		i := bytes.Index(blob[at:], key)
		if i < 0 {
			return values
		}
		i += at
		at = i + 1 // a failed match may overlap the next one
		if s, end, ok := stringValue(blob, i+len(key)); ok {
			values = append(values, s)
			at = end
		}
	}
}

// unsharedString is s as a typedstream writes an unshared string: its
// length (one byte, or a tag and 2 or 4 bytes), then its bytes.
func unsharedString(s string) []byte {
	var b []byte
	switch n := len(s); {
	case n < 0x80:
		b = append(b, byte(n))
	case n <= math.MaxInt16:
		b = binary.LittleEndian.AppendUint16(append(b, tsInt16), uint16(n))
	default:
		b = binary.LittleEndian.AppendUint32(append(b, tsInt32), uint32(n))
	}
	return append(b, s...)
}

// stringValue reads, at p just past a dictionary key's characters, the rest
// of the key object and a value that is a new NSString, and returns the
// value's characters and where its object ends.
func stringValue(blob []byte, p int) (string, int, bool) {
	r := tsReader{b: blob, p: p}
	if !r.byte(tsEnd) || // end of the key object
		!r.sharedString("@") || // the value's group type
		!r.byte(tsNew) || // a new object…
		!r.classChain() || // …of class NSString
		!r.sharedString("+") { // its one field: the characters
		return "", 0, false
	}
	n, ok := r.uint()
	if !ok || r.p+n >= len(blob) || blob[r.p+n] != tsEnd {
		return "", 0, false
	}
	s := blob[r.p : r.p+n]
	if !utf8.Valid(s) {
		return "", 0, false
	}
	return string(s), r.p + n + 1, true
}

// tsReader walks a typedstream just far enough for attributeStrings.
type tsReader struct {
	b []byte
	p int
}

// byte consumes want.
func (r *tsReader) byte(want byte) bool {
	if r.p >= len(r.b) || r.b[r.p] != want {
		return false
	}
	r.p++
	return true
}

// uint reads an unsigned integer: one byte, or a tag and 2 or 4 bytes.
func (r *tsReader) uint() (int, bool) {
	if r.p >= len(r.b) {
		return 0, false
	}
	h := r.b[r.p]
	r.p++
	switch {
	case h == tsInt16:
		if r.p+2 > len(r.b) {
			return 0, false
		}
		v := binary.LittleEndian.Uint16(r.b[r.p:])
		r.p += 2
		return int(v), true
	case h == tsInt32:
		if r.p+4 > len(r.b) {
			return 0, false
		}
		v := int32(binary.LittleEndian.Uint32(r.b[r.p:]))
		r.p += 4
		return int(v), v >= 0
	case h >= 0x80 && h <= 0x91:
		return 0, false
	}
	return int(h), true
}

// ref skips a reference number: a byte outside the tag range, or a tag and
// 2 or 4 bytes.
func (r *tsReader) ref() bool {
	if r.p >= len(r.b) {
		return false
	}
	switch h := r.b[r.p]; {
	case h == tsInt16:
		r.p += 3
	case h == tsInt32:
		r.p += 5
	case h >= 0x80 && h <= 0x91:
		return false
	default:
		r.p++
	}
	return r.p <= len(r.b)
}

// sharedString reads a shared string: a literal must equal want, a
// reference to an earlier one is taken on trust.
func (r *tsReader) sharedString(want string) bool {
	if r.p >= len(r.b) {
		return false
	}
	if r.b[r.p] != tsNew {
		return r.ref()
	}
	r.p++
	s, ok := r.literal()
	return ok && s == want
}

func (r *tsReader) literal() (string, bool) {
	n, ok := r.uint()
	if !ok || r.p+n > len(r.b) {
		return "", false
	}
	s := string(r.b[r.p : r.p+n])
	r.p += n
	return s, true
}

// classChain reads an object's class: a reference to a class seen before,
// or new classes (name, version), most derived first, ending in nil or a
// reference. A new class must be a string class.
func (r *tsReader) classChain() bool {
	first := true
	for r.p < len(r.b) {
		switch r.b[r.p] {
		case tsNil:
			r.p++
			return !first
		case tsNew:
			r.p++
			var name string
			if r.p < len(r.b) && r.b[r.p] == tsNew {
				r.p++
				var ok bool
				if name, ok = r.literal(); !ok {
					return false
				}
			} else if !r.ref() {
				return false
			}
			if first && name != "NSString" && name != "NSMutableString" {
				return false
			}
			if _, ok := r.uint(); !ok { // class version
				return false
			}
			first = false
		default:
			return r.ref()
		}
	}
	return false
}

// plistTranscription returns the "audio-transcription" string of a property
// list (binary or XML) whose top object is a dictionary.
func plistTranscription(data []byte) (string, bool) {
	var s string
	var ok bool
	switch {
	case bytes.HasPrefix(data, []byte("bplist00")):
		s, ok = bplistString(data, "audio-transcription")
	case bytes.HasPrefix(bytes.TrimSpace(data), []byte("<")):
		s, ok = xmlPlistString(data, "audio-transcription")
	}
	s = strings.TrimSpace(s)
	return s, ok && s != ""
}

// bplistString reads the string value of key in the top-level dictionary
// of a binary property list (bplist00).
func bplistString(data []byte, key string) (string, bool) {
	if len(data) < 8+32 {
		return "", false
	}
	trailer := data[len(data)-32:]
	offSize, refSize := int(trailer[6]), int(trailer[7])
	numObjects := binary.BigEndian.Uint64(trailer[8:])
	top := binary.BigEndian.Uint64(trailer[16:])
	tableAt := binary.BigEndian.Uint64(trailer[24:])
	if offSize < 1 || offSize > 8 || refSize < 1 || refSize > 8 ||
		numObjects > uint64(len(data)) || top >= numObjects ||
		tableAt >= uint64(len(data)) || tableAt+numObjects*uint64(offSize) > uint64(len(data)-32) {
		return "", false
	}
	offset := func(obj uint64) (int, bool) {
		if obj >= numObjects {
			return 0, false
		}
		at := int(tableAt) + int(obj)*offSize
		o := beUint(data[at : at+offSize])
		return int(o), o < uint64(len(data)-32)
	}
	// count reads the length of the object whose marker is at p: the low
	// nibble, or an integer object after it when the nibble is 0xF.
	count := func(p int) (n, start int, ok bool) {
		n = int(data[p] & 0x0f)
		start = p + 1
		if n != 0x0f {
			return n, start, true
		}
		if start >= len(data) || data[start]>>4 != 0x1 {
			return 0, 0, false
		}
		size := 1 << (data[start] & 0x0f)
		if size > 8 || start+1+size > len(data) {
			return 0, 0, false
		}
		v := beUint(data[start+1 : start+1+size])
		if v > uint64(len(data)) {
			return 0, 0, false
		}
		return int(v), start + 1 + size, true
	}
	str := func(obj uint64) (string, bool) {
		p, ok := offset(obj)
		if !ok {
			return "", false
		}
		n, start, ok := count(p)
		if !ok {
			return "", false
		}
		switch data[p] >> 4 {
		case 0x5: // ASCII
			if start+n > len(data) {
				return "", false
			}
			return string(data[start : start+n]), true
		case 0x6: // UTF-16BE
			if start+2*n > len(data) {
				return "", false
			}
			u := make([]uint16, n)
			for i := range u {
				u[i] = binary.BigEndian.Uint16(data[start+2*i:])
			}
			return string(utf16.Decode(u)), true
		}
		return "", false
	}
	p, ok := offset(top)
	if !ok || data[p]>>4 != 0xd {
		return "", false
	}
	n, start, ok := count(p)
	if !ok || start+2*n*refSize > len(data) {
		return "", false
	}
	for i := range n {
		k := beUint(data[start+i*refSize : start+(i+1)*refSize])
		if name, ok := str(k); ok && name == key {
			v := beUint(data[start+(n+i)*refSize : start+(n+i+1)*refSize])
			return str(v)
		}
	}
	return "", false
}

func beUint(b []byte) uint64 {
	var v uint64
	for _, c := range b {
		v = v<<8 | uint64(c)
	}
	return v
}

// xmlPlistString reads the string value of key in the top-level dictionary
// of an XML property list.
func xmlPlistString(data []byte, key string) (string, bool) {
	d := xml.NewDecoder(bytes.NewReader(data))
	depth := 0 // nesting below <plist>
	wantValue := false
	for {
		tok, err := d.Token()
		if err != nil {
			return "", false
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if t.Name.Local == "plist" {
				continue
			}
			depth++
			if depth != 2 {
				continue // <dict> itself
			}
			var text string
			if err := d.DecodeElement(&text, &t); err != nil {
				return "", false
			}
			depth--
			switch {
			case wantValue:
				return text, t.Name.Local == "string"
			case t.Name.Local == "key" && text == key:
				wantValue = true
			}
		case xml.EndElement:
			if t.Name.Local != "plist" {
				depth--
			}
		}
	}
}
