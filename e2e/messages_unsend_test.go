package e2e

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/blueline-app/blueline/bridge/messages/chatdb/chatdbtest"
)

// A contact takes back part of a message, as Messages records it in
// chat.db: one photo of a text and two photos, then the text of a text and
// a photo. Each is a message.unsent whose message keeps the rest and says
// in unsent_parts what went; taking back the rest then empties the message
// as a whole unsend does.
func TestMessagesUnsendParts(t *testing.T) {
	const alice = "+15551230001"
	app := newMessagesApp(t, func(int, osaRun) answer { return accepted })
	dm := app.db.DirectChat("imessage", alice)
	rc := newReceiver(t, nil)
	td, key := app.macDaemon(t, fastSends, webhookConfig(t, rc, ""), alice, dm)
	td.register(key, macLine, rc, "message.received", "message.edited", "message.unsent")
	ev := newEventLog(t, rc)
	photo := func(name string) chatdbtest.FileSpec {
		rel := filepath.Join("un", "01", name)
		p := filepath.Join(app.home, "Library", "Messages", "Attachments", rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		writeFile(t, p, name)
		return chatdbtest.FileSpec{Path: "~/Library/Messages/Attachments/" + rel, MimeType: "image/jpeg", TransferName: name, TotalBytes: int64(len(name))}
	}
	filenames := func(d map[string]any) []any {
		var out []any
		for _, a := range d["attachments"].([]any) {
			out = append(out, a.(map[string]any)["filename"])
		}
		return out
	}
	// unsentParts is a message's unsent_parts as "text" and the indexes of
	// the attachments, nil for null.
	unsentParts := func(d map[string]any) (text any, atts []any) {
		p, _ := d["unsent_parts"].(map[string]any)
		if p == nil {
			return nil, nil
		}
		return p["text"], p["attachments"].([]any)
	}

	// One photo of a text and two photos: parts 0 and 1 are the photos, 2
	// the text.
	_, both := app.db.Insert(chatdbtest.Msg{Chat: dm, From: alice, Text: "look at these",
		Attachments: []chatdbtest.FileSpec{photo("one.jpeg"), photo("two.jpeg")}})
	first := ev.next("message.received", guidIs(both))
	at := time.Now().Add(-time.Second)
	app.db.UnsendParts(both, []int{0}, at)
	d := ev.next("message.unsent", guidIs(both))
	text, atts := unsentParts(d)
	if d["id"] != first["id"] || d["text"] != "look at these" || len(filenames(d)) != 1 || filenames(d)[0] != "two.jpeg" ||
		text != false || len(atts) != 1 || atts[0] != float64(0) || d["unsent_at"] != nil || d["edited_at"] != nil {
		t.Fatalf("message.unsent (a photo): %v", d)
	}
	m := td.messageByGUID(key, alice, both)
	if text, atts := unsentParts(m); m["text"] != "look at these" || len(filenames(m)) != 1 || text != false || len(atts) != 1 || m["unsent_at"] != nil {
		t.Fatalf("a photo taken back, over HTTP: %v", m)
	}
	if resp, body := get(t, "GET", m["attachments"].([]any)[0].(map[string]any)["url"].(string)); resp.StatusCode != 200 || string(body) != "two.jpeg" {
		t.Fatalf("the photo left: %d %q", resp.StatusCode, body)
	}

	// The text of a text and a photo: part 1.
	_, textBack := app.db.Insert(chatdbtest.Msg{Chat: dm, From: alice, Text: "wrong caption", Attachments: []chatdbtest.FileSpec{photo("three.jpeg")}})
	ev.next("message.received", guidIs(textBack))
	app.db.UnsendParts(textBack, []int{1}, at)
	d = ev.next("message.unsent", guidIs(textBack))
	if text, atts := unsentParts(d); d["text"] != nil || len(filenames(d)) != 1 || filenames(d)[0] != "three.jpeg" ||
		text != true || len(atts) != 0 || d["unsent_at"] != nil {
		t.Fatalf("message.unsent (the text): %v", d)
	}

	// The rest of the first message: a whole unsend.
	unsendAt := time.Now().Add(-time.Second).Truncate(time.Millisecond)
	app.db.Unsend(both, unsendAt)
	d = ev.next("message.unsent", guidIs(both))
	if text, _ := unsentParts(d); d["text"] != nil || len(d["attachments"].([]any)) != 0 || d["unsent_at"] != millis(unsendAt) || text != nil {
		t.Fatalf("message.unsent (the rest): %v", d)
	}
	m = td.messageByGUID(key, alice, both)
	if m["text"] != nil || len(m["attachments"].([]any)) != 0 || m["unsent_at"] != millis(unsendAt) || m["unsent_parts"] != nil {
		t.Fatalf("unsent message over HTTP: %v", m)
	}
	// Taking parts back moved date_edited, but changed no text.
	if n := ev.counts()["message.edited"]; n != 0 {
		t.Fatalf("%d message.edited for parts taken back", n)
	}
}
