package typedstream

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// The stream format, as NSArchiver writes it.
//
// Every variable-width item starts with a head byte. Head bytes 0x80–0x91
// are tags; any other head byte is a one-byte signed integer, or, where a
// string, class or object belongs, a one-byte reference to an earlier one.
const (
	tagInt16 = 0x81 // a 2-byte little-endian integer follows
	tagInt32 = 0x82 // a 4-byte little-endian integer follows
	tagFloat = 0x83 // a 4-byte (f) or 8-byte (d) IEEE 754 value follows
	tagNew   = 0x84 // a literal string, class or object follows
	tagNil   = 0x85 // nil string, class or object
	tagEnd   = 0x86 // end of an object's fields
	tagInt64 = 0x87 // an 8-byte little-endian integer follows

	firstTag = 0x80
	lastTag  = 0x91

	// refBase is the reference number of table entry 0 (head byte 0x92):
	// one above the highest tag, read as a signed byte. Entry i is written as
	// the integer i + refBase.
	refBase = -110
)

// The header: streamer version, signature and system version.
const (
	streamerVersion = 4
	signature       = "streamtyped" // "typedstream" would mean big-endian
	systemVersion   = 1000          // every Mac OS X and macOS
)

// maxDepth bounds the nesting of objects, arrays and structs. Messages nests
// about ten deep; the bound keeps hostile input from recursing without end.
const maxDepth = 64

// errKind says what went wrong, which decides whether Text may fall back to
// scanning.
type errKind uint8

const (
	// errStructure: something this reader does not understand or accept.
	errStructure errKind = iota
	// errTruncated: the data ends early, or a length claims more than is left.
	errTruncated
	// errHeader: not a little-endian typedstream at all.
	errHeader
)

type formatError struct {
	kind errKind
	off  int // byte offset, or -1
	msg  string
}

func (e *formatError) Error() string {
	if e.off < 0 {
		return "typedstream: " + e.msg
	}
	return fmt.Sprintf("typedstream: %s at byte %d", e.msg, e.off)
}

func (e *formatError) Unwrap() error { return ErrFormat }

// entryKind is what an object-table entry holds. Objects, classes and C
// strings share one table, and a reference says which by where it appears.
type entryKind uint8

const (
	kindObject entryKind = iota + 1
	kindClass
	kindCString
)

type entry struct {
	kind entryKind
	// For a class: its name, and the index of its superclass entry (-1 for
	// a root class). For an object: the index of its class entry. For a C
	// string: its characters.
	name  []byte
	super int32
	class int32
	// val is what an object holds, once read, when the decoder keeps
	// values (see interpret): a string, an int64 or a map[string]any; nil
	// for anything else.
	val any
}

// field is one value read from the fields of an object whose value the
// decoder keeps, or from the attributed string's runs.
type field struct {
	kind fieldKind
	off  int    // where the value starts
	n    int64  // fieldInt
	b    []byte // fieldBytes, fieldCString
	obj  int    // fieldObject: its object-table index, -1 for nil
}

type fieldKind uint8

const (
	// fieldOther: a value no kept object is made of (a float, a class, an
	// atom, an array, a struct, a nil string). It is still recorded, so that
	// the fields of an object of an unexpected shape do not line up as if
	// they had the expected one.
	fieldOther fieldKind = iota
	fieldInt
	fieldBytes // an unshared string ("+")
	fieldCString
	fieldObject
)

// decoder reads one archive. Slices it returns point into buf.
type decoder struct {
	buf     []byte
	off     int
	strings [][]byte // the shared-string table
	objects []entry  // the object table: objects, classes, C strings
	depth   int
	budget  int // values left to read; bounds work on hostile type strings

	// values makes the decoder keep what NSString, NSNumber and
	// NSDictionary objects hold, which Runs needs and Text does not.
	values bool
	// rec, when not nil, receives each value read at the current level:
	// the fields of the object being read, if its value is kept.
	rec *[]field
}

func newDecoder(blob []byte) *decoder {
	return &decoder{
		buf:     blob,
		budget:  4*len(blob) + 1024,
		strings: make([][]byte, 0, 16),
		objects: make([]entry, 0, 16),
	}
}

// decode returns the characters of the NSString held by the archived
// attributed string in blob.
func decode(blob []byte) ([]byte, error) {
	d := newDecoder(blob)
	text, err := d.root()
	if err != nil {
		return nil, err
	}
	// The rest of the attributed string (its attribute runs) is read, not
	// interpreted, so that a damaged archive is noticed.
	if err := d.fields(); err != nil {
		return nil, err
	}
	return text, nil
}

// root reads the header, the attributed string's head and its NSString, and
// returns the string's characters. The attributed string's remaining fields,
// its attribute runs, are left to the caller.
func (d *decoder) root() ([]byte, error) {
	if err := d.header(); err != nil {
		return nil, err
	}

	// One top-level value, of type "@": the attributed string.
	if err := d.expectType("@"); err != nil {
		return nil, err
	}
	root, err := d.literalObject()
	if err != nil {
		return nil, err
	}
	if !d.isA(root, "NSAttributedString") {
		return nil, d.failAt(errStructure, d.off, "root object is not an NSAttributedString")
	}

	// Its first field, of type "@": the string, an NSString (or a subclass
	// such as NSMutableString) holding its characters as a "+" value.
	if err := d.expectType("@"); err != nil {
		return nil, err
	}
	str, err := d.literalObject()
	if err != nil {
		return nil, err
	}
	if !d.isA(str, "NSString") {
		return nil, d.failAt(errStructure, d.off, "attributed string does not hold an NSString")
	}
	var text []byte
	found := false
	for {
		h, err := d.byte()
		if err != nil {
			return nil, err
		}
		if h == tagEnd {
			d.depth--
			break
		}
		types, err := d.typeString(h)
		if err != nil {
			return nil, err
		}
		for i := 0; i < len(types); {
			if types[i] == '+' && !found {
				s, isNil, err := d.unshared()
				if err != nil {
					return nil, err
				}
				if isNil {
					return nil, d.failAt(errStructure, d.off-1, "NSString with nil characters")
				}
				text, found = s, true
				i++
				continue
			}
			if i, err = d.value(types, i); err != nil {
				return nil, err
			}
		}
	}
	if !found {
		return nil, d.failAt(errStructure, d.off, "NSString without characters")
	}
	return text, nil
}

func (d *decoder) failAt(kind errKind, off int, msg string) error {
	return &formatError{kind: kind, off: off, msg: msg}
}

func (d *decoder) short() error {
	return &formatError{kind: errTruncated, off: len(d.buf), msg: "archive ends early"}
}

func (d *decoder) header() error {
	bad := func(msg string) error { return d.failAt(errHeader, 0, msg) }
	v, err := d.int()
	if err != nil {
		return bad("no typedstream header")
	}
	if v != streamerVersion {
		return bad("unsupported streamer version")
	}
	n, err := d.int()
	if err != nil || n != int64(len(signature)) {
		return bad("no typedstream signature")
	}
	sig, err := d.bytes(len(signature))
	if err != nil {
		return bad("no typedstream signature")
	}
	switch string(sig) {
	case signature:
	case "typedstream":
		return bad("big-endian typedstream not supported")
	default:
		return bad("no typedstream signature")
	}
	sys, err := d.int()
	if err != nil {
		return bad("no system version")
	}
	if sys != systemVersion {
		return bad("unsupported system version")
	}
	return nil
}

func (d *decoder) byte() (byte, error) {
	if d.off >= len(d.buf) {
		return 0, d.short()
	}
	b := d.buf[d.off]
	d.off++
	return b, nil
}

func (d *decoder) bytes(n int) ([]byte, error) {
	if n < 0 || n > len(d.buf)-d.off {
		return nil, d.short()
	}
	b := d.buf[d.off : d.off+n : d.off+n]
	d.off += n
	return b, nil
}

func (d *decoder) int() (int64, error) {
	h, err := d.byte()
	if err != nil {
		return 0, err
	}
	return d.intAfter(h)
}

// intAfter reads a signed integer whose head byte h has been read.
func (d *decoder) intAfter(h byte) (int64, error) {
	switch h {
	case tagInt16:
		b, err := d.bytes(2)
		if err != nil {
			return 0, err
		}
		return int64(int16(binary.LittleEndian.Uint16(b))), nil
	case tagInt32:
		b, err := d.bytes(4)
		if err != nil {
			return 0, err
		}
		return int64(int32(binary.LittleEndian.Uint32(b))), nil
	case tagInt64:
		b, err := d.bytes(8)
		if err != nil {
			return 0, err
		}
		return int64(binary.LittleEndian.Uint64(b)), nil
	}
	if h >= firstTag && h <= lastTag {
		return 0, d.failAt(errStructure, d.off-1, "tag where an integer belongs")
	}
	return int64(int8(h)), nil
}

// length reads a string length or byte count whose head byte h has been
// read. Lengths are unsigned: the integer's bits are read as an unsigned
// value of the same width, as the reference readers do. A length longer than
// what is left of the input is refused before anything is allocated.
func (d *decoder) length(h byte) (int, error) {
	start := d.off - 1
	var n uint64
	switch h {
	case tagInt16:
		b, err := d.bytes(2)
		if err != nil {
			return 0, err
		}
		n = uint64(binary.LittleEndian.Uint16(b))
	case tagInt32:
		b, err := d.bytes(4)
		if err != nil {
			return 0, err
		}
		n = uint64(binary.LittleEndian.Uint32(b))
	case tagInt64:
		b, err := d.bytes(8)
		if err != nil {
			return 0, err
		}
		n = binary.LittleEndian.Uint64(b)
	default:
		if h >= firstTag && h <= lastTag {
			return 0, d.failAt(errStructure, d.off-1, "tag where a length belongs")
		}
		n = uint64(h)
	}
	if n > uint64(len(d.buf)-d.off) {
		return 0, d.failAt(errTruncated, start, "length runs past the end of the archive")
	}
	return int(n), nil
}

// ref reads a reference whose head byte h has been read, and returns the
// index it stands for, which must be below limit.
func (d *decoder) ref(h byte, limit int) (int, error) {
	start := d.off - 1
	v, err := d.intAfter(h)
	if err != nil {
		return 0, err
	}
	i := v - refBase
	if i < 0 || i >= int64(limit) {
		return 0, d.failAt(errStructure, start, "reference to an unknown entry")
	}
	return int(i), nil
}

// unshared reads an unshared string: nil, or a length and that many bytes.
func (d *decoder) unshared() (s []byte, isNil bool, err error) {
	h, err := d.byte()
	if err != nil {
		return nil, false, err
	}
	if h == tagNil {
		return nil, true, nil
	}
	n, err := d.length(h)
	if err != nil {
		return nil, false, err
	}
	s, err = d.bytes(n)
	return s, false, err
}

// shared reads a shared string whose head byte h has been read: nil, a
// literal (which joins the shared-string table), or a reference to one.
func (d *decoder) shared(h byte) (s []byte, isNil bool, err error) {
	switch h {
	case tagNil:
		return nil, true, nil
	case tagNew:
		s, isNil, err := d.unshared()
		if err != nil {
			return nil, false, err
		}
		if isNil {
			return nil, false, d.failAt(errStructure, d.off-1, "nil literal shared string")
		}
		d.strings = append(d.strings, s)
		return s, false, nil
	}
	i, err := d.ref(h, len(d.strings))
	if err != nil {
		return nil, false, err
	}
	return d.strings[i], false, nil
}

// typeString reads the type string that opens a group of typed values,
// whose head byte h has been read.
func (d *decoder) typeString(h byte) ([]byte, error) {
	start := d.off - 1
	s, isNil, err := d.shared(h)
	if err != nil {
		return nil, err
	}
	if isNil || len(s) == 0 {
		return nil, d.failAt(errStructure, start, "empty type string")
	}
	return s, nil
}

// expectType reads a type string and requires it to be want.
func (d *decoder) expectType(want string) error {
	start := d.off
	h, err := d.byte()
	if err != nil {
		return err
	}
	types, err := d.typeString(h)
	if err != nil {
		return err
	}
	if string(types) != want {
		return d.failAt(errStructure, start, fmt.Sprintf("type %q where %q belongs", types, want))
	}
	return nil
}

// literalObject reads a literal object's head and class chain and returns
// the index of its class. Its fields are left to the caller, who must read
// them up to the end tag and then decrement depth.
func (d *decoder) literalObject() (class int, err error) {
	h, err := d.byte()
	if err != nil {
		return 0, err
	}
	if h != tagNew {
		return 0, d.failAt(errStructure, d.off-1, "not a literal object")
	}
	return d.beginObject()
}

// beginObject reads the class chain of a literal object whose tagNew has
// been read, and returns the index of its class.
func (d *decoder) beginObject() (int, error) {
	d.depth++
	if d.depth > maxDepth {
		return 0, d.failAt(errStructure, d.off, "objects nested too deeply")
	}
	self := len(d.objects) // an object takes its slot before its class
	d.objects = append(d.objects, entry{kind: kindObject, super: -1, class: -1})
	h, err := d.byte()
	if err != nil {
		return 0, err
	}
	class, err := d.class(h)
	if err != nil {
		return 0, err
	}
	if class < 0 {
		return 0, d.failAt(errStructure, d.off-1, "object without a class")
	}
	d.objects[self].class = int32(class)
	return class, nil
}

// fields reads an object's remaining field groups and its end tag.
func (d *decoder) fields() error {
	for {
		h, err := d.byte()
		if err != nil {
			return err
		}
		if h == tagEnd {
			d.depth--
			return nil
		}
		if err := d.group(h); err != nil {
			return err
		}
	}
}

// group reads a group of typed values whose head byte h has been read: a
// type string, then one value for each type in it.
func (d *decoder) group(h byte) error {
	types, err := d.typeString(h)
	if err != nil {
		return err
	}
	for i := 0; i < len(types); {
		if i, err = d.value(types, i); err != nil {
			return err
		}
	}
	return nil
}

// class reads a class whose head byte h has been read and returns the index
// of its entry, or -1 for Nil. A literal class is followed by its
// superclass, and so on, until a root class (then Nil) or a class stored
// earlier (then a reference).
func (d *decoder) class(h byte) (int, error) {
	before := len(d.objects)
	first, prev := -1, -1
	for h == tagNew {
		start := d.off - 1
		nh, err := d.byte()
		if err != nil {
			return 0, err
		}
		name, isNil, err := d.shared(nh)
		if err != nil {
			return 0, err
		}
		if isNil {
			return 0, d.failAt(errStructure, start, "class without a name")
		}
		if _, err := d.int(); err != nil { // the class version
			return 0, err
		}
		i := len(d.objects)
		d.objects = append(d.objects, entry{kind: kindClass, name: name, super: -1, class: -1})
		if prev >= 0 {
			d.objects[prev].super = int32(i)
		} else {
			first = i
		}
		prev = i
		if h, err = d.byte(); err != nil {
			return 0, err
		}
	}
	last := -1
	if h != tagNil {
		// Only a class stored before this chain began: that keeps the
		// superclass links free of cycles.
		i, err := d.ref(h, before)
		if err != nil {
			return 0, err
		}
		if d.objects[i].kind != kindClass {
			return 0, d.failAt(errStructure, d.off-1, "reference to a non-class where a class belongs")
		}
		last = i
	}
	if prev < 0 {
		return last, nil
	}
	d.objects[prev].super = int32(last)
	return first, nil
}

// isA reports whether class entry c, or one of its superclasses, is named name.
func (d *decoder) isA(c int, name string) bool {
	for steps := 0; c >= 0 && c < len(d.objects) && steps < len(d.objects); steps++ {
		e := d.objects[c]
		if e.kind != kindClass {
			return false
		}
		if string(e.name) == name {
			return true
		}
		c = int(e.super)
	}
	return false
}

// object reads an object value whose head byte h has been read, and returns
// its object-table index, or -1 for nil.
func (d *decoder) object(h byte) (int, error) {
	switch h {
	case tagNil:
		return -1, nil
	case tagNew:
		self := len(d.objects) // beginObject gives the object this slot
		class, err := d.beginObject()
		if err != nil {
			return 0, err
		}
		// Each object records its own fields, or none: the caller's
		// record goes on after it.
		outer := d.rec
		d.rec = nil
		var fields *[]field // allocated only for a value that is kept
		kind := d.valueKind(class)
		if kind != keepNone {
			fields = new([]field)
			d.rec = fields
		}
		err = d.fields()
		d.rec = outer
		if err != nil {
			return 0, err
		}
		if fields != nil {
			d.objects[self].val = d.interpret(kind, *fields)
		}
		return self, nil
	}
	// A reference may name the object being read (archives can hold
	// cycles); it is never followed, so that is harmless.
	i, err := d.ref(h, len(d.objects))
	if err != nil {
		return 0, err
	}
	if d.objects[i].kind != kindObject {
		return 0, d.failAt(errStructure, d.off-1, "reference to a non-object where an object belongs")
	}
	return i, nil
}

// cString reads a C string value: nil, a literal (which takes a slot in the
// object table), or a reference to one.
func (d *decoder) cString() (s []byte, isNil bool, err error) {
	h, err := d.byte()
	if err != nil {
		return nil, false, err
	}
	switch h {
	case tagNil:
		return nil, true, nil
	case tagNew:
		nh, err := d.byte()
		if err != nil {
			return nil, false, err
		}
		s, isNil, err := d.shared(nh)
		if err != nil {
			return nil, false, err
		}
		if isNil {
			return nil, false, d.failAt(errStructure, d.off-1, "nil literal C string")
		}
		d.objects = append(d.objects, entry{kind: kindCString, name: s, super: -1, class: -1})
		return s, false, nil
	}
	i, err := d.ref(h, len(d.objects))
	if err != nil {
		return nil, false, err
	}
	if d.objects[i].kind != kindCString {
		return nil, false, d.failAt(errStructure, d.off-1, "reference to a non-C-string where a C string belongs")
	}
	return d.objects[i].name, false, nil
}

// isQualifier reports whether c is an Objective-C type qualifier (const,
// in, inout, out, bycopy, byref, oneway), which may prefix a type.
func isQualifier(c byte) bool {
	switch c {
	case 'r', 'n', 'N', 'o', 'O', 'R', 'V':
		return true
	}
	return false
}

// typeEnd returns the index just past the single type that starts at i in
// types (qualifiers included).
func typeEnd(types []byte, i int) (int, error) {
	for i < len(types) && isQualifier(types[i]) {
		i++
	}
	if i >= len(types) {
		return 0, errBadType
	}
	switch types[i] {
	case '[', '{', '(':
	case ']', '}', ')':
		return 0, errBadType
	default:
		return i + 1, nil
	}
	depth := 0
	for ; i < len(types); i++ {
		switch types[i] {
		case '[', '{', '(':
			depth++
		case ']', '}', ')':
			depth--
			if depth == 0 {
				return i + 1, nil
			}
		}
	}
	return 0, errBadType
}

var errBadType = &formatError{kind: errStructure, off: -1, msg: "malformed type string"}

// value reads the value of the single type that starts at i in types and
// returns the index just past that type.
func (d *decoder) value(types []byte, i int) (int, error) {
	d.budget--
	if d.budget < 0 {
		return 0, d.failAt(errStructure, d.off, "archive too complex")
	}
	for i < len(types) && isQualifier(types[i]) {
		i++
	}
	if i >= len(types) {
		return 0, errBadType
	}
	start := d.off
	switch types[i] {
	case 'c', 'C', 'B': // chars are one raw byte, never tagged
		b, err := d.bytes(1)
		if err != nil {
			return 0, err
		}
		n := int64(b[0])
		if types[i] == 'c' {
			n = int64(int8(b[0]))
		}
		d.record(field{kind: fieldInt, off: start, n: n})
		return i + 1, nil
	case 's', 'S', 'i', 'I', 'l', 'L', 'q', 'Q':
		n, err := d.int()
		if err != nil {
			return 0, err
		}
		d.record(field{kind: fieldInt, off: start, n: n})
		return i + 1, nil
	case 'f', 'd':
		h, err := d.byte()
		if err != nil {
			return 0, err
		}
		if h == tagFloat {
			n := 4
			if types[i] == 'd' {
				n = 8
			}
			_, err = d.bytes(n)
		} else {
			_, err = d.intAfter(h) // a whole number may be written as an integer
		}
		if err != nil {
			return 0, err
		}
		d.record(field{kind: fieldOther, off: start})
		return i + 1, nil
	case '*':
		s, isNil, err := d.cString()
		if err != nil {
			return 0, err
		}
		if isNil {
			d.record(field{kind: fieldOther, off: start})
		} else {
			d.record(field{kind: fieldCString, off: start, b: s})
		}
		return i + 1, nil
	case '%', ':': // atom, selector: shared strings
		h, err := d.byte()
		if err != nil {
			return 0, err
		}
		if _, _, err = d.shared(h); err != nil {
			return 0, err
		}
		d.record(field{kind: fieldOther, off: start})
		return i + 1, nil
	case '+':
		s, isNil, err := d.unshared()
		if err != nil {
			return 0, err
		}
		if isNil {
			d.record(field{kind: fieldOther, off: start})
		} else {
			d.record(field{kind: fieldBytes, off: start, b: s})
		}
		return i + 1, nil
	case '#':
		h, err := d.byte()
		if err != nil {
			return 0, err
		}
		if _, err = d.class(h); err != nil {
			return 0, err
		}
		d.record(field{kind: fieldOther, off: start})
		return i + 1, nil
	case '@':
		h, err := d.byte()
		if err != nil {
			return 0, err
		}
		obj, err := d.object(h)
		if err != nil {
			return 0, err
		}
		d.record(field{kind: fieldObject, off: start, obj: obj})
		return i + 1, nil
	case '!': // an ignored int-sized field: in the type string only
		return i + 1, nil
	case '[', '{':
		// An array or struct is one field; what it is made of is not
		// recorded.
		outer := d.rec
		d.rec = nil
		var end int
		var err error
		if types[i] == '[' {
			end, err = d.array(types, i)
		} else {
			end, err = d.structure(types, i)
		}
		d.rec = outer
		if err != nil {
			return 0, err
		}
		d.record(field{kind: fieldOther, off: start})
		return end, nil
	}
	return 0, d.failAt(errStructure, d.off, fmt.Sprintf("unsupported type %q", types[i]))
}

// record adds f to the fields being recorded, if any.
func (d *decoder) record(f field) {
	if d.rec != nil {
		*d.rec = append(*d.rec, f)
	}
}

// array reads a C array "[<count><element type>]" that starts at i.
func (d *decoder) array(types []byte, i int) (int, error) {
	end, err := typeEnd(types, i)
	if err != nil {
		return 0, err
	}
	j := i + 1
	n := 0
	for j < end && types[j] >= '0' && types[j] <= '9' {
		if n > len(d.buf) { // no array of any element type can be longer
			return 0, d.failAt(errTruncated, d.off, "array count runs past the end of the archive")
		}
		n = n*10 + int(types[j]-'0')
		j++
	}
	if j == i+1 {
		return 0, errBadType
	}
	elemEnd, err := typeEnd(types[:end-1], j)
	if err != nil || elemEnd != end-1 {
		return 0, errBadType
	}
	if elemEnd-j == 1 && (types[j] == 'c' || types[j] == 'C') {
		_, err := d.bytes(n) // a byte array is stored as raw bytes
		return end, err
	}
	d.depth++
	if d.depth > maxDepth {
		return 0, d.failAt(errStructure, d.off, "types nested too deeply")
	}
	for k := 0; k < n; k++ {
		if _, err := d.value(types[:elemEnd], j); err != nil {
			return 0, err
		}
	}
	d.depth--
	return end, nil
}

// structure reads a C struct "{<name>=<field types>}" that starts at i.
func (d *decoder) structure(types []byte, i int) (int, error) {
	end, err := typeEnd(types, i)
	if err != nil {
		return 0, err
	}
	body := types[i+1 : end-1]
	j := i + 1
	if eq := bytes.IndexByte(body, '='); eq >= 0 && bytes.IndexAny(body[:eq], "[]{}()") < 0 {
		j += eq + 1 // skip the name
	}
	d.depth++
	if d.depth > maxDepth {
		return 0, d.failAt(errStructure, d.off, "types nested too deeply")
	}
	for j < end-1 {
		if j, err = d.value(types[:end-1], j); err != nil {
			return 0, err
		}
	}
	d.depth--
	return end, nil
}
