package typedstream

import (
	"math"
	"unicode/utf8"
)

// Run is one attribute run of an archived attributed string: a stretch of
// its text and the attributes that stretch carries.
type Run struct {
	// Length is the run's length in UTF-16 code units, as NSString counts.
	Length int
	// Attributes maps each attribute's name to its value: an NSString is a
	// string, an NSNumber of an integer type an int64, an NSDictionary a
	// map[string]any like this one; any other value is nil. Nil when the
	// run has no dictionary. Runs that share a dictionary share its map, so
	// it must not be modified.
	Attributes map[string]any
}

// String returns the string value of the attribute named key, if the run
// has one.
func (r Run) String(key string) (string, bool) {
	s, ok := r.Attributes[key].(string)
	return s, ok
}

// Runs returns the attribute runs of an archived attributed string, in
// order; Messages puts the file transfer GUID of each attachment and the
// transcription of a voice memo there.
//
// NSArchiver writes an object once and refers back to it when it meets it
// again, so an attribute's name may be spelled out in one run and be a
// reference in the next: Runs keeps every object it reads (strings, numbers,
// dictionaries) and resolves references to them. A run whose dictionary is
// the same as an earlier run's names it by number instead of repeating it,
// and gets the same map.
//
// If the archive is damaged, Runs returns the runs read before the damage
// with the error: each of them is whole. Every error wraps ErrFormat. Runs
// never panics, and its memory and work are bounded by the input's size, as
// Text's are.
func Runs(blob []byte) ([]Run, error) {
	d := newDecoder(blob)
	d.values = true
	if _, err := d.root(); err != nil {
		return nil, err
	}
	var fields []field
	d.rec = &fields
	err := d.fields()
	d.rec = nil
	runs, bad := d.runs(fields, err != nil)
	if err == nil {
		err = bad
	}
	return runs, err
}

// runs interprets the attributed string's fields after its string: for each
// run an integer naming its dictionary (1, 2, 3… in order of appearance)
// and its length, then, when the number is new, the dictionary object.
// When the fields stop early (partial), a run left without its length or
// dictionary is dropped, not reported.
func (d *decoder) runs(fields []field, partial bool) ([]Run, error) {
	var runs []Run
	dicts := make(map[int64]map[string]any)
	for i := 0; i < len(fields); {
		if i+1 >= len(fields) {
			if partial {
				break
			}
			return runs, d.failAt(errStructure, fields[i].off, "attribute run without a length")
		}
		num, length := fields[i], fields[i+1]
		if num.kind != fieldInt || length.kind != fieldInt {
			return runs, d.failAt(errStructure, num.off, "attribute run without a number and a length")
		}
		if length.n < 0 || length.n > math.MaxInt32 {
			return runs, d.failAt(errStructure, length.off, "attribute run of impossible length")
		}
		i += 2
		attrs, seen := dicts[num.n]
		if !seen {
			if i >= len(fields) {
				if partial {
					break
				}
				return runs, d.failAt(errStructure, length.off, "attribute run without its dictionary")
			}
			f := fields[i]
			i++
			if f.kind != fieldObject {
				return runs, d.failAt(errStructure, f.off, "attribute run without its dictionary")
			}
			if f.obj >= 0 {
				m, ok := d.objects[f.obj].val.(map[string]any)
				if !ok {
					return runs, d.failAt(errStructure, f.off, "attribute run whose dictionary is not a readable NSDictionary")
				}
				attrs = m
			}
			dicts[num.n] = attrs
		}
		runs = append(runs, Run{Length: int(length.n), Attributes: attrs})
	}
	return runs, nil
}

// keepKind says which kind of value the decoder keeps for an object.
type keepKind uint8

const (
	keepNone keepKind = iota
	keepString
	keepNumber
	keepDictionary
)

// valueKind says what to keep of an object of class entry c.
func (d *decoder) valueKind(c int) keepKind {
	switch {
	case !d.values:
		return keepNone
	case d.isA(c, "NSString"):
		return keepString
	case d.isA(c, "NSNumber"):
		return keepNumber
	case d.isA(c, "NSDictionary"):
		return keepDictionary
	}
	return keepNone
}

// interpret returns the value an object holds from its recorded fields, or
// nil if they are not the shape NSArchiver gives its class. That is not an
// error: the object was read, only its value is unknown.
func (d *decoder) interpret(kind keepKind, fields []field) any {
	switch kind {
	case keepString:
		// The characters: one "+" value, UTF-8.
		for _, f := range fields {
			if f.kind == fieldBytes {
				if !utf8.Valid(f.b) {
					return nil
				}
				return string(f.b)
			}
		}
	case keepNumber:
		// The number's Objective-C type as a C string, then its value of
		// that type; an integer type's value is read as an integer.
		if len(fields) == 2 && fields[0].kind == fieldCString && fields[1].kind == fieldInt {
			return fields[1].n
		}
	case keepDictionary:
		// A count, then that many keys and values, each an object.
		if len(fields) == 0 || fields[0].kind != fieldInt || fields[0].n < 0 || fields[0].n > int64(len(fields)) ||
			int64(len(fields)) != 1+2*fields[0].n {
			return nil
		}
		m := make(map[string]any, fields[0].n)
		for i := 1; i < len(fields); i += 2 {
			k, v := fields[i], fields[i+1]
			if k.kind != fieldObject || v.kind != fieldObject {
				return nil
			}
			if k.obj < 0 {
				continue // a nil key is not an attribute
			}
			key, ok := d.objects[k.obj].val.(string)
			if !ok {
				continue // nor is a key that is not a string
			}
			var val any
			if v.obj >= 0 {
				val = d.objects[v.obj].val
			}
			m[key] = val
		}
		return m
	}
	return nil
}
