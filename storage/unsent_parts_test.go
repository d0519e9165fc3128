package storage_test

import (
	"slices"
	"testing"

	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/storage"
)

// A sender takes back parts of a message one at a time, the network
// listing all taken back so far each time: each new part goes with a
// message.unsent, the rest stays, a file that arrives late still finds its
// place; then the whole message goes.
func TestUpdateMessageUnsentParts(t *testing.T) {
	db, line := openDB(t)
	hook := createWebhook(t, db, line, api.EventMessageEdited, api.EventMessageUnsent)
	text := func(s string) *string { return &s }
	record := func(body *string, files ...storage.Attachment) storage.Message {
		t.Helper()
		res, err := db.RecordInbound(ctx, storage.Inbound{
			Chat: storage.Chat{ID: storage.NewID("cht_"), LineID: line.ID, GUID: "iMessage;-;" + rxAlice, Identifier: rxAlice, Service: "imessage"},
			Message: storage.Message{ID: storage.NewID("msg_"), GUID: storage.NewID("guid_"), Sender: rxAlice, Text: body,
				Attachments: files, SentAt: 10},
		})
		if err != nil {
			t.Fatal(err)
		}
		return res.Message
	}
	update := func(u storage.MessageUpdate) (storage.Message, []string) {
		t.Helper()
		m, ev, err := db.UpdateMessage(ctx, line.ID, u)
		if err != nil {
			t.Fatal(err)
		}
		return m, ev
	}
	files := func(m storage.Message) []string {
		var out []string
		for _, a := range m.Attachments {
			out = append(out, a.Filename+":"+a.FileID)
		}
		return out
	}
	unsent := api.EventMessageUnsent

	// Parts 0 to 2 are the files, 3 the text; c.jpeg has not arrived.
	m := record(text("look"), storage.Attachment{Filename: "a.jpeg", FileID: "fil_a"},
		storage.Attachment{Filename: "b.jpeg", FileID: "fil_b"}, storage.Attachment{Filename: "c.jpeg"})
	steps := []struct {
		name  string
		u     storage.MessageUpdate
		ev    []string
		text  string // "" for none
		files []string
		parts storage.UnsentParts
	}{
		{"the second file", storage.MessageUpdate{UnsentParts: []int{1}, EditedAt: 50, Text: text("look"),
			Attachments: []storage.Attachment{{Filename: "a.jpeg"}, {Filename: "c.jpeg", FileID: "fil_c"}}},
			[]string{unsent}, "look", []string{"a.jpeg:fil_a", "c.jpeg:fil_c"}, storage.UnsentParts{Attachments: []int{1}}},
		{"the same again", storage.MessageUpdate{UnsentParts: []int{1}, EditedAt: 50, Text: text("look")},
			nil, "look", []string{"a.jpeg:fil_a", "c.jpeg:fil_c"}, storage.UnsentParts{Attachments: []int{1}}},
		{"the third file", storage.MessageUpdate{UnsentParts: []int{1, 2}, EditedAt: 60, Text: text("look")},
			[]string{unsent}, "look", []string{"a.jpeg:fil_a"}, storage.UnsentParts{Attachments: []int{1, 2}}},
		{"the text", storage.MessageUpdate{UnsentParts: []int{1, 2, 3}, EditedAt: 70},
			[]string{unsent}, "", []string{"a.jpeg:fil_a"}, storage.UnsentParts{Text: true, Attachments: []int{1, 2}}},
		{"a part it never had", storage.MessageUpdate{UnsentParts: []int{1, 2, 3, 7}, EditedAt: 75},
			nil, "", []string{"a.jpeg:fil_a"}, storage.UnsentParts{Text: true, Attachments: []int{1, 2}}},
	}
	for _, s := range steps {
		s.u.GUID = m.GUID
		got, ev := update(s.u)
		if !slices.Equal(ev, s.ev) || got.UnsentAt != 0 || got.EditedAt != 0 || got.UnsentParts == nil ||
			got.UnsentParts.Text != s.parts.Text || !slices.Equal(got.UnsentParts.Attachments, s.parts.Attachments) {
			t.Fatalf("%s: events %v, unsent at %d, edited at %d, parts %+v; want %v, %+v", s.name, ev, got.UnsentAt, got.EditedAt, got.UnsentParts, s.ev, s.parts)
		}
		if (got.Text == nil) != (s.text == "") || got.Text != nil && *got.Text != s.text || !slices.Equal(files(got), s.files) {
			t.Fatalf("%s: text %v, files %v; want %q, %v", s.name, got.Text, files(got), s.text, s.files)
		}
	}
	got, ev := update(storage.MessageUpdate{GUID: m.GUID, UnsentAt: 80})
	if !slices.Equal(ev, []string{unsent}) || got.UnsentAt != 80 || got.UnsentParts != nil || got.Text != nil || len(got.Attachments) != 0 {
		t.Fatalf("the whole message: %+v %v", got, ev)
	}

	// A photo taken back, then the text edited: the edit is an edit.
	m = record(text("look"), storage.Attachment{Filename: "a.jpeg", FileID: "fil_a2"})
	if _, ev := update(storage.MessageUpdate{GUID: m.GUID, UnsentParts: []int{0}, EditedAt: 50, Text: text("look")}); !slices.Equal(ev, []string{unsent}) {
		t.Fatalf("the photo: %v", ev)
	}
	got, ev = update(storage.MessageUpdate{GUID: m.GUID, UnsentParts: []int{0}, EditedAt: 60, Text: text("look here")})
	if !slices.Equal(ev, []string{api.EventMessageEdited}) || *got.Text != "look here" || got.EditedAt != 60 || len(got.Attachments) != 0 {
		t.Fatalf("an edit after a photo taken back: %+v %v", got, ev)
	}

	// A message without text has no text part.
	m = record(nil, storage.Attachment{Filename: "a.jpeg"}, storage.Attachment{Filename: "b.jpeg"})
	if got, ev := update(storage.MessageUpdate{GUID: m.GUID, UnsentParts: []int{2}, EditedAt: 50}); ev != nil || got.UnsentParts != nil || len(got.Attachments) != 2 {
		t.Fatalf("part 2 of two files: %+v %v", got, ev)
	}

	names, d := events(t, db, hook)
	if want := []string{unsent, unsent, unsent, unsent, unsent, api.EventMessageEdited}; !slices.Equal(names, want) {
		t.Fatalf("events %v, want %v", names, want)
	}
	if p := d[0].Message.UnsentParts; p == nil || !slices.Equal(p.Attachments, []int{1}) || len(d[0].Message.Attachments) != 2 {
		t.Fatalf("the first event's message: %+v", d[0].Message)
	}
}
