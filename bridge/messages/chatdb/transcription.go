package chatdb

import (
	"bytes"
	"slices"
	"strings"

	"howett.net/plist"

	"github.com/blueline-app/blueline/bridge/messages/typedstream"
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

var transferAttributeBytes = []byte(transferAttribute)

// fileTransferGUIDs returns the attachment GUIDs an attributedBody names
// (__kIMFileTransferGUIDAttributeName), in order, without duplicates.
func fileTransferGUIDs(blob []byte) []string {
	// An archive writes an attribute's name out the first time it uses
	// it (later uses refer back to it): a body without the name has no
	// such attribute, and most bodies are plain text. Decoding every
	// body's runs to learn that was a fifth of a first start's reading.
	if !bytes.Contains(blob, transferAttributeBytes) {
		return nil
	}
	var guids []string
	for _, g := range attributeStrings(blob, transferAttribute) {
		if g != "" && !slices.Contains(guids, g) {
			guids = append(guids, g)
		}
	}
	return guids
}

// attributeStrings returns the string values of the attribute named name
// on the runs of an attributedBody blob, in order.
//
// A damaged blob gives the values of the runs read before the damage: each
// of those runs was read whole, and a file or transcription they name is
// worth having even if a later run is lost. A blob that is not an archived
// attributed string gives none.
func attributeStrings(blob []byte, name string) []string {
	runs, _ := typedstream.Runs(blob)
	var values []string
	for _, r := range runs {
		if s, ok := r.String(name); ok {
			values = append(values, s)
		}
	}
	return values
}

// plistTranscription returns the "audio-transcription" string of a property
// list (binary or XML) whose top object is a dictionary.
func plistTranscription(data []byte) (string, bool) {
	var info struct {
		Transcription string `plist:"audio-transcription"`
	}
	if _, err := plist.Unmarshal(data, &info); err != nil {
		return "", false
	}
	s := strings.TrimSpace(info.Transcription)
	return s, s != ""
}
