package e2e

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/blueline-app/blueline/bridge/messages/chatdb/chatdbtest"
)

// A Genmoji keeps its place in the text: the webhook and the API give the
// text with its description where the image sits, and the image as an
// inline attachment beside a photo that is not.
func TestMessagesGenmoji(t *testing.T) {
	const alice = "+15551230001"
	app := newMessagesApp(t, func(int, osaRun) answer { return accepted })
	dm := app.db.DirectChat("imessage", alice)
	rc := newReceiver(t, nil)
	td, key := app.macDaemon(t, "", webhookConfig(t, rc, ""), alice, dm)
	td.register(key, macLine, rc, "message.received")
	ev := newEventLog(t, rc)
	file := func(rel, content string) (stored string) {
		p := filepath.Join(app.home, "Library", "Messages", "Attachments", rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		writeFile(t, p, content)
		return "~/Library/Messages/Attachments/" + rel
	}

	_, guid := app.db.Insert(chatdbtest.Msg{Chat: dm, From: alice, Text: "\uFFFCI'm so \uFFFC today", Attachments: []chatdbtest.FileSpec{
		{Path: file("ph/01/IMG_1.jpeg", "jpeg"), MimeType: "image/jpeg", UTI: "public.jpeg", TransferName: "IMG_1.jpeg", TotalBytes: 4},
		{Path: file("gm/01/Genmoji.heic", "heic"), MimeType: "image/heic", UTI: "public.heic", TransferName: "Genmoji.heic",
			TotalBytes: 4, EmojiDescription: "smiling frog"},
	}})
	check := func(where string, m map[string]any) {
		t.Helper()
		atts, _ := m["attachments"].([]any)
		if m["text"] != "I'm so :smiling frog: today" || len(atts) != 2 {
			t.Fatalf("%s: %v", where, m)
		}
		for i, want := range []bool{false, true} {
			if a := atts[i].(map[string]any); a["inline"] != want || a["url"] == nil {
				t.Fatalf("%s: attachment %d: %v, want inline %v with a URL", where, i, a, want)
			}
		}
	}
	check("message.received", ev.next("message.received", guidIs(guid)))
	check("GET /v1/messages", td.messageByGUID(key, alice, guid))
}
