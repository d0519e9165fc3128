package mediatype_test

import (
	"testing"

	"github.com/blueline-app/blueline/mediatype"
)

func TestByName(t *testing.T) {
	tests := map[string]string{
		"a.caf": "audio/x-caf", "a.M4A": "audio/mp4", "a.mp3": "audio/mpeg", "a.wav": "audio/wav",
		"a.aac": "audio/aac", "a.amr": "audio/amr", "a.opus": "audio/ogg", "a.ogg": "audio/ogg",
		"a.vcf": "text/vcard", "IMG_1.HEIC": "image/heic", "a.heif": "image/heif", "a.jpg": "image/jpeg",
		"a.JPEG": "image/jpeg", "a.png": "image/png", "a.gif": "image/gif", "a.webp": "image/webp",
		"a.mov": "video/quicktime", "a.mp4": "video/mp4", "a.m4v": "video/x-m4v", "a.pdf": "application/pdf",
		"a.txt": "text/plain", "a.tar.gz": "application/gzip", "a.json": "application/json",
		"a.unknownext": "application/octet-stream", "noext": "application/octet-stream",
		"": "application/octet-stream", "trailing.": "application/octet-stream",
	}
	for name, want := range tests {
		if got := mediatype.ByName(name); got != want {
			t.Errorf("ByName(%q) = %q, want %q", name, got, want)
		}
	}
}

func TestIsAudio(t *testing.T) {
	tests := map[string]bool{
		"audio/x-caf": true, "Audio/MP4": true, "audio/ogg; codecs=opus": true, " audio/amr ": true,
		"video/mp4": false, "audio/": false, "audio": false, "": false, "application/audio": false,
	}
	for mimeType, want := range tests {
		if got := mediatype.IsAudio(mimeType); got != want {
			t.Errorf("IsAudio(%q) = %v, want %v", mimeType, got, want)
		}
	}
}

func TestParse(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", "application/octet-stream"},
		{"image/png", "image/png"},
		{"IMAGE/PNG", "image/png"},
		{`Text/Plain;Charset="utf-8"`, "text/plain; charset=utf-8"},
		{"text", ""},
		{"text/", ""},
		{"text/plain; charset", ""},
		{"text/plain\r\nX-Evil: 1", ""},
	}
	for _, tt := range tests {
		got, err := mediatype.Parse(tt.in)
		if got != tt.want || (err != nil) != (tt.want == "") {
			t.Errorf("Parse(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}
