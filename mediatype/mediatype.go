// Package mediatype names and checks the media types of files: by a
// filename's extension, as a client's Content-Type, and whether one is audio.
// It is pure, so the bridges and the API share it without the file store.
package mediatype

import (
	"errors"
	"fmt"
	"mime"
	"path"
	"strings"
)

const octetStream = "application/octet-stream"

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

// ByName returns the media type of a filename's extension, ignoring case,
// or application/octet-stream.
func ByName(name string) string {
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

// Parse validates a media type such as a Content-Type header and returns it
// normalised: type lower-cased, parameters kept. "" means unknown,
// application/octet-stream.
func Parse(v string) (string, error) {
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
