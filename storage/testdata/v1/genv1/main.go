// genv1 writes storage/testdata/v1: a database in the layout of schema 1,
// and what its lists answered then.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/blueline-app/blueline/storage"
)

func main() {
	dir := os.Args[1]
	ctx := context.Background()
	db, err := storage.Open(dir)
	if err != nil {
		panic(err)
	}
	lines, err := db.SyncLines(ctx, []storage.Line{{ID: storage.NewID("ln_"), Handle: "+15550000009", Service: "imessage", Bridge: "messages"}})
	if err != nil {
		panic(err)
	}
	line := lines[0]
	text := func(s string) *string { return &s }
	base := int64(1_700_000_000_000)
	dm := storage.Chat{ID: storage.NewID("cht_"), LineID: line.ID, GUID: "iMessage;-;+15551230001", Identifier: "+15551230001", Service: "imessage", Participants: []string{"+15551230001"}}
	group := storage.Chat{ID: storage.NewID("cht_"), LineID: line.ID, GUID: "iMessage;+;chat123", Identifier: "chat123", Service: "imessage", Name: "Group", IsGroup: true, Participants: []string{"+15551230001", "+15551230002"}}
	var history []storage.Inbound
	for i := range 40 {
		c := dm
		sender := "+15551230001"
		if i%3 == 0 {
			sender = line.Handle
		}
		if i%4 == 1 {
			c = group
			if sender != line.Handle {
				sender = "+15551230002"
			}
		}
		m := storage.Message{ID: storage.NewID("msg_"), GUID: fmt.Sprintf("%08X-0000-4000-8000-%012X", i, i*7919), Sender: sender,
			Text: text(fmt.Sprintf("history %d", i)), Service: "imessage", IsFromMe: sender == line.Handle,
			SentAt: base + int64(i/2)*1000, SyncedAt: base + 100_000_000}
		if i == 7 {
			m.Attachments = []storage.Attachment{{Filename: "IMG_0007.jpeg", MimeType: "image/jpeg", Size: 123456}}
			m.Text = nil
		}
		if i == 9 {
			m.GUID = "not-a-uuid-9"
			m.Service = "sms"
		}
		if i == 11 {
			m.ReplyToGUID = history[10].Message.GUID
		}
		history = append(history, storage.Inbound{Chat: c, Message: m})
	}
	if _, err := db.ImportHistory(ctx, line.ID, history); err != nil {
		panic(err)
	}
	if err := db.SettleHistory(ctx); err != nil {
		panic(err)
	}
	// A live message after the import.
	if _, err := db.RecordInbound(ctx, storage.Inbound{Chat: dm, Message: storage.Message{ID: storage.NewID("msg_"),
		GUID: "ABCDEF01-0000-4000-8000-000000000001", Sender: "+15551230001", Text: text("live"), Service: "imessage",
		SentAt: base + 30_000, SyncedAt: base + 100_000_001}}); err != nil {
		panic(err)
	}
	out := map[string]any{}
	chats, _, err := db.ListChats(ctx, line.ID, nil, 100)
	if err != nil {
		panic(err)
	}
	out["chats"] = chats
	msgs := map[string][]storage.Message{}
	for _, c := range chats {
		var after []byte
		for {
			page, next, err := db.ListMessages(ctx, c.ID, after, 7)
			if err != nil {
				panic(err)
			}
			msgs[c.ID] = append(msgs[c.ID], page...)
			if next == nil {
				break
			}
			after = next
		}
	}
	out["messages"] = msgs
	if err := db.Close(); err != nil {
		panic(err)
	}
	data, _ := json.MarshalIndent(out, "", " ")
	if err := os.WriteFile(filepath.Join(dir, "lists.json"), data, 0o644); err != nil {
		panic(err)
	}
}
