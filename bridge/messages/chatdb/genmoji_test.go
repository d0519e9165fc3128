package chatdb_test

import (
	"slices"
	"testing"

	"github.com/blueline-app/blueline/bridge/messages/chatdb"
	"github.com/blueline-app/blueline/bridge/messages/chatdb/chatdbtest"
)

// genmoji is a Genmoji as macOS 26 stores it: a HEIC image with the short
// description it was made from.
var genmoji = chatdbtest.FileSpec{Path: "/tmp/genmoji.heic", MimeType: "image/heic", UTI: "public.heic",
	TransferName: "Genmoji.heic", TotalBytes: 4096, EmojiDescription: "smiling frog"}

var photo = chatdbtest.FileSpec{Path: "/tmp/IMG_1.jpeg", MimeType: "image/jpeg", UTI: "public.jpeg", TransferName: "IMG_1.jpeg", TotalBytes: 99}

func TestGenmojiKeepsItsPlaceInText(t *testing.T) {
	f := chatdbtest.New(t, t.TempDir())
	chat := f.DirectChat("iMessage", alice)
	_, inText := f.Insert(chatdbtest.Msg{Chat: chat, From: alice, Text: "I'm so \uFFFC today", Attachments: []chatdbtest.FileSpec{genmoji}})
	_, ventura := f.Insert(chatdbtest.Msg{Chat: chat, From: alice, Ventura: true, Text: "I'm so \uFFFC today", Attachments: []chatdbtest.FileSpec{genmoji}})
	_, withPhoto := f.Insert(chatdbtest.Msg{Chat: chat, From: alice, Text: "\uFFFClook \uFFFC  here",
		Attachments: []chatdbtest.FileSpec{photo, genmoji}})
	_, only := f.Insert(chatdbtest.Msg{Chat: chat, From: alice, Ventura: true, Attachments: []chatdbtest.FileSpec{genmoji}})
	db := open(t, f)

	for _, c := range []struct {
		name, guid, text string
		emoji            []string // each attachment's EmojiDescription
	}{
		{"in the text", inText, "I'm so :smiling frog: today", []string{"smiling frog"}},
		{"attributedBody only", ventura, "I'm so :smiling frog: today", []string{"smiling frog"}},
		// The photo's placeholder goes; the text's own spaces stay.
		{"with a photo", withPhoto, "look :smiling frog:  here", []string{"", "smiling frog"}},
		{"Genmoji only", only, ":smiling frog:", []string{"smiling frog"}},
	} {
		r := byGUID(t, db, c.guid)
		if str(r.Text) != c.text || r.Kind() != chatdb.KindMessage {
			t.Errorf("%s: Text %q, Kind %v; want %q", c.name, str(r.Text), r.Kind(), c.text)
		}
		var emoji []string
		for _, a := range r.Attachments {
			emoji = append(emoji, a.EmojiDescription)
		}
		if !slices.Equal(emoji, c.emoji) {
			t.Errorf("%s: attachments' emoji descriptions %q, want %q", c.name, emoji, c.emoji)
		}
	}
	// The ROWID window reads the same texts.
	for _, r := range rows(t, db, 0) {
		if want := byGUID(t, db, r.GUID); str(r.Text) != str(want.Text) {
			t.Errorf("Rows: Text %q, RowsByGUID %q", str(r.Text), str(want.Text))
		}
	}
}

func TestGenmojiWithoutEmojiColumn(t *testing.T) {
	f := chatdbtest.New(t, t.TempDir())
	chat := f.DirectChat("iMessage", alice)
	_, g := f.Insert(chatdbtest.Msg{Chat: chat, From: alice, Text: "I'm so \uFFFC today", Attachments: []chatdbtest.FileSpec{genmoji}})
	f.DropColumn("attachment", "emoji_image_short_description")
	db := open(t, f)
	r := byGUID(t, db, g)
	if str(r.Text) != "I'm so  today" || len(r.Attachments) != 1 || r.Attachments[0].EmojiDescription != "" {
		t.Errorf("without the column: Text %q, attachments %+v; want the placeholder removed", str(r.Text), r.Attachments)
	}
}
