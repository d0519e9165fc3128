package typedstream

import (
	"bytes"
	"encoding/binary"
)

// The markers scan looks for: the literal class name NSString (its length
// byte, then the name), and soon after it the literal type string "+"
// (tagNew, length 1, '+') that introduces the string's characters.
var (
	nsStringMarker = []byte("\x08NSString")
	plusMarker     = []byte{tagNew, 0x01, '+'}
)

// plusWindow is how far past the class name the "+" may be: the class
// version and the superclass reference come between (three bytes in every
// archive Messages writes), leaving room for a longer reference.
const plusWindow = 16

// scan is the fallback for archives the structured reader refuses: it finds
// the first NSString class name, then the "+" type string just after it,
// then a length and that many bytes, which must be followed by the end tag
// of the string object. It reports false if any of that is missing.
func scan(blob []byte) ([]byte, bool) {
	i := bytes.Index(blob, nsStringMarker)
	if i < 0 {
		return nil, false
	}
	rest := blob[i+len(nsStringMarker):]
	j := bytes.Index(rest[:min(len(rest), plusWindow)], plusMarker)
	if j < 0 {
		return nil, false
	}
	rest = rest[j+len(plusMarker):]
	if len(rest) == 0 {
		return nil, false
	}
	var n uint64
	switch h := rest[0]; {
	case h == tagInt16 && len(rest) >= 3:
		n, rest = uint64(binary.LittleEndian.Uint16(rest[1:])), rest[3:]
	case h == tagInt32 && len(rest) >= 5:
		n, rest = uint64(binary.LittleEndian.Uint32(rest[1:])), rest[5:]
	case h < firstTag || h > lastTag:
		n, rest = uint64(h), rest[1:]
	default:
		return nil, false
	}
	if n >= uint64(len(rest)) || rest[n] != tagEnd {
		return nil, false
	}
	return rest[:n:n], true
}
