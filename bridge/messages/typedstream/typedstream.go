// Package typedstream reads the text of a message out of the
// attributedBody column of the macOS Messages database (chat.db).
//
// Since macOS 13 Ventura many rows leave message.text NULL and keep the body
// only in attributedBody: an NSAttributedString archived with NSArchiver, in
// the NeXTSTEP "typedstream" format (header "streamtyped"). Text walks that
// archive to the attributed string's NSString and returns its characters;
// Runs reads the attribute runs that follow, where Messages names a
// message's attachments. Encode and EncodeParts write the same layout
// Messages writes, for test fixtures.
//
// The package is pure Go and reads the little-endian ("streamtyped")
// variant only, the one every Mac writes.
package typedstream

import (
	"errors"
	"unicode/utf8"
)

// ErrFormat is wrapped by every error Text and Runs return: the blob is not
// an archived attributed string this package can read.
var ErrFormat = errors.New("typedstream: not a readable archived attributed string")

// Text returns the plain text of an archived attributed string: the UTF-8
// string of its NSString. Attachment placeholders (U+FFFC) are returned as
// they are; the caller decides what to do with them.
//
// Text reads the archive with a structured reader first. If that reader
// meets something it does not understand (an unknown type or tag, an
// unexpected class), Text falls back to scanning for the NSString's
// characters by their markers. A blob that is not a typedstream, or that
// ends early, is not scanned: guessing there risks returning part of a
// message. The text must be valid UTF-8.
//
// Every error wraps ErrFormat. Text never panics, whatever the input, and
// its memory and work are bounded by the input's size, never by a length or
// count the input claims.
func Text(blob []byte) (string, error) {
	text, err := decode(blob)
	if err != nil {
		var fe *formatError
		if !errors.As(err, &fe) || fe.kind != errStructure {
			return "", err
		}
		scanned, ok := scan(blob)
		if !ok {
			return "", err
		}
		text = scanned
	}
	if !utf8.Valid(text) {
		return "", &formatError{kind: errStructure, off: -1, msg: "text is not valid UTF-8"}
	}
	return string(text), nil
}
