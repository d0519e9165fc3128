package cli

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// printable is s with every character that could act on a terminal rather
// than be shown by it replaced by a visible escape: C0 controls (ESC
// starts the sequences that clear a screen or retitle a window; a bare CR
// lets a line overwrite itself), DEL, C1 controls (U+009B is a one-character
// CSI), the bidirectional controls that reorder a line (U+202A–U+202E,
// U+2066–U+2069, and the marks U+061C, U+200E, U+200F), the line and
// paragraph separators, and bytes that are not UTF-8.
//
// It is the one place where text that came from elsewhere (a contact's
// message, a chat's name, a file's name, what a webhook's receiver
// answered) is made safe to print. The human output passes everything
// through it always, not only on a terminal: a log or a pager shows the
// same bytes later. --json output does not: it is exact, and JSON escapes
// its own controls. Tabs and newlines are escaped too: every place that
// prints text puts a value on one line, or in a tab-separated cell.
// Backslashes are left alone, so "\x1b" typed by a contact reads as an
// escaped ESC would; --json tells them apart.
func printable(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case unsafeRune(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
		i += size
	}
	return b.String()
}

// unsafeRune reports whether r, beyond C0 and DEL, acts on a terminal line.
func unsafeRune(r rune) bool {
	return r >= 0x80 && r <= 0x9f || // C1
		r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069 || // bidi embeddings, overrides, isolates
		r == 0x061c || r == 0x200e || r == 0x200f || // bidi marks
		r == 0x2028 || r == 0x2029
}

// oneLine joins the lines and words of s with single spaces, for a
// one-line summary of a text. A CR of a CRLF goes with its LF; a bare CR
// stays, for printable to show.
func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	return strings.Join(strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == '\t' || r == '\n' }), " ")
}
