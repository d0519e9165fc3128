package files

import (
	"errors"
	"fmt"
	"mime"
	"path"
	"strings"
	"unicode"
	"unicode/utf8"
)

const octetStream = "application/octet-stream"

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

// Message attachment types that Go's builtin table lacks or types
// differently, and that a system's mime.types may not have.
var attachmentTypes = map[string]string{
	".caf":  "audio/x-caf",
	".m4a":  "audio/mp4",
	".mp3":  "audio/mpeg",
	".wav":  "audio/wav",
	".aac":  "audio/aac",
	".amr":  "audio/amr",
	".opus": "audio/ogg",
	".ogg":  "audio/ogg",
	".vcf":  "text/vcard",
	".heic": "image/heic",
	".heif": "image/heif",
	".jpg":  "image/jpeg",
	".jpeg": "image/jpeg",
	".png":  "image/png",
	".gif":  "image/gif",
	".webp": "image/webp",
	".mov":  "video/quicktime",
	".mp4":  "video/mp4",
	".m4v":  "video/x-m4v",
	".pdf":  "application/pdf",
	".txt":  "text/plain",
}

// TypeByName returns the media type of a filename's extension, ignoring
// case, or application/octet-stream.
func TypeByName(name string) string {
	ext := strings.ToLower(path.Ext(name))
	if t, ok := attachmentTypes[ext]; ok {
		return t
	}
	if t := mime.TypeByExtension(ext); t != "" {
		return t
	}
	return octetStream
}

// IsAudio reports whether mimeType is audio/*, whatever its parameters.
func IsAudio(mimeType string) bool {
	t, _, _ := strings.Cut(mimeType, ";")
	t = strings.TrimSpace(t)
	return len(t) > len("audio/") && strings.EqualFold(t[:len("audio/")], "audio/")
}

// ParseMediaType validates a media type such as a Content-Type header and
// returns it normalised: type lower-cased, parameters kept. "" means unknown,
// application/octet-stream.
func ParseMediaType(v string) (string, error) {
	if v == "" {
		return octetStream, nil
	}
	t, params, err := mime.ParseMediaType(v)
	if err == nil && !strings.Contains(t, "/") {
		err = errors.New("no subtype")
	}
	if err != nil {
		return "", fmt.Errorf("invalid media type %q: %w", v, err)
	}
	return mime.FormatMediaType(t, params), nil
}
