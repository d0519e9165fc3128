package e2e

import (
	"testing"
	"time"

	"github.com/blueline-app/blueline/bridge/messages/chatdb/chatdbtest"
	"github.com/blueline-app/blueline/testkit"
)

// On a Mac line (the macOS fixture and the stand-in osascript): a STOP row
// opts its contact out, the line's reply is sent once through Messages,
// sends are refused until a START row.
func TestMessagesOptOut(t *testing.T) {
	const alice, reply = "+15551230001", "Unsubscribed. Text START to resume."
	var app *messagesApp
	app = newMessagesApp(t, func(int, osaRun) answer {
		return answer{then: func() { app.sendRow(app.db.DirectChat("imessage", alice), alice, reply) }}
	})
	dm := app.db.DirectChat("imessage", alice)
	td, key := app.macDaemon(t, fastSends+"\nopt_out_reply = \""+reply+"\"", "", alice, dm)

	app.db.Insert(chatdbtest.Msg{Chat: dm, From: alice, Text: "Stop"})
	var last map[string]any
	testkit.Eventually(t, 10*time.Second, func() bool {
		msgs := td.messagesOf(key, alice)
		last = msgs[len(msgs)-1]
		return last["text"] == reply
	})
	if last["is_from_me"] != true || last["outbox_id"] == nil {
		t.Errorf("the reply as stored: %v", last)
	}
	app.checkRuns(t, "text→chat")
	r := td.call("POST", "/v1/messages", key, map[string]any{"from": macLine, "to": alice, "text": "one more thing"})
	if r.Status != 403 || r.ErrCode() != "contact_opted_out" {
		t.Fatalf("send after STOP: %d %s", r.Status, r.Raw)
	}

	app.db.Insert(chatdbtest.Msg{Chat: dm, From: alice, Text: "START"})
	testkit.Eventually(t, 10*time.Second, func() bool {
		msgs := td.messagesOf(key, alice)
		return msgs[len(msgs)-1]["text"] == "START"
	})
	td.send(key, map[string]any{"from": macLine, "to": alice, "text": "welcome back"})
}
