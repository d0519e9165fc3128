package files

import (
	"path"
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxFilename is the longest filename most file systems accept, in bytes.
const maxFilename = 255

// SanitizeFilename makes a client's filename safe to store and hand back in
// Content-Disposition: its last path element, without control characters,
// line and paragraph separators, bidi overrides (which can make a .exe read
// as a .jpg), invalid UTF-8 or surrounding spaces, at most 255 bytes. ""
// means no usable name.
func SanitizeFilename(name string) string {
	name = name[strings.LastIndexAny(name, `/\`)+1:]
	name = strings.ToValidUTF8(name, "")
	name = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' ||
			r >= '\u202a' && r <= '\u202e' || r >= '\u2066' && r <= '\u2069' {
			return -1
		}
		return r
	}, name)
	name = strings.TrimSpace(name)
	if name == "." || name == ".." {
		return ""
	}
	if len(name) <= maxFilename {
		return name
	}
	// Keep a short extension, so the name still says what the file is.
	if ext := path.Ext(name); len(ext) <= 16 {
		return truncate(name[:len(name)-len(ext)], maxFilename-len(ext)) + ext
	}
	return truncate(name, maxFilename)
}

// truncate cuts s to at most n bytes without splitting a rune.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
