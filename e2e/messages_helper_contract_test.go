package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/blueline-app/blueline/bridge/messages/chatdb/chatdbtest"
	"github.com/blueline-app/blueline/testkit"
)

// noSuchChat is the BlueBubbles helper's answer for a chat GUID its chat
// registry does not know.
const noSuchChat = `"error":"Chat does not exist in IMChatRegistry!"`

// The private-API helper as the BlueBubbles helper speaks: it finds chats
// in Messages' registry by the GUID Messages keeps (on macOS 15 and 26 the
// "any;-;" form chat.db stores), names chats that way in its events, and
// declares nothing beyond what it has: the stock helper has no emoji
// tapbacks, and on macOS 26 no working threaded replies.
func TestMessagesHelperContract(t *testing.T) {
	const alice, carol, dave = "+15551230001", "+15551230003", "+15551230004"
	app := newMessagesApp(t, func(int, osaRun) answer { return accepted })
	dm := app.db.DirectChat("imessage", alice)
	// Carol's chat is stored as macOS 26 stores it; Dave's under both
	// forms, of which the helper's registry knows only the "any;" one.
	carolChat := app.db.ChatWithGUID("any;-;"+carol, "iMessage", carol)
	daveChat := app.db.DirectChat("imessage", dave)
	app.db.ChatWithGUID("any;-;"+dave, "iMessage", dave)
	helperPort := freeTCPPort(t)
	td := startTestDaemon(t, app.config(helperPort)+`macos_version = "26.1"`+"\n"+fastSends)
	key := td.key()
	var msgs []string
	for _, c := range []struct {
		chat    chatdbtest.ChatRef
		contact string
	}{{dm, alice}, {carolChat, carol}, {daveChat, dave}} {
		_, g := app.db.Insert(chatdbtest.Msg{Chat: c.chat, From: c.contact, Text: "hello from " + c.contact})
		msgs = append(msgs, g)
		testkit.Eventually(t, 10*time.Second, func() bool { return len(td.messagesOf(key, c.contact)) == 1 })
	}

	known := map[string]bool{"iMessage;-;" + alice: true, "any;-;" + carol: true, "any;-;" + dave: true}
	helper := connectHelperWith(t, helperPort, func(f map[string]any) string {
		data, _ := f["data"].(map[string]any)
		if g, ok := data["chatGuid"].(string); ok && !known[g] {
			return noSuchChat
		}
		return ""
	})
	caps := func() map[string]any {
		for _, l := range td.call("GET", "/v1/lines", key, nil).Data() {
			if l["handle"] == macLine {
				return l["capabilities"].(map[string]any)
			}
		}
		t.Fatal("no Mac line")
		return nil
	}
	testkit.Eventually(t, 5*time.Second, func() bool { return caps()["reactions"].(map[string]any)["available"] == true })

	// Tapbacks: each chat by the form the helper knows, the stored form
	// first and the next one only after "Chat does not exist".
	for i, c := range []struct {
		contact string
		tried   []string
	}{
		{alice, []string{"iMessage;-;" + alice}},
		{carol, []string{"any;-;" + carol}},
		{dave, []string{"iMessage;-;" + dave, "any;-;" + dave}},
	} {
		r := td.call("POST", "/v1/reactions", key, map[string]any{"from": macLine, "to": c.contact, "message_id": msgs[i], "type": "love"})
		if r.Status != 201 {
			t.Fatalf("tapback to %s: %d %s", c.contact, r.Status, r.Raw)
		}
		if item := td.waitOutbox(key, r.Body["id"].(string)); item["status"] != "sent" {
			t.Fatalf("tapback to %s: %v", c.contact, item)
		}
		for _, want := range c.tried {
			f := helper.next(t)
			if f["action"] != "send-reaction" || f["data"].(map[string]any)["chatGuid"] != want {
				t.Fatalf("tapback to %s: frame %v, want send-reaction to %s", c.contact, f, want)
			}
		}
	}

	// The stock helper declares no emoji tapbacks: refused before anything
	// reaches it, with the reason.
	emoji := caps()["emoji_reactions"].(map[string]any)
	if emoji["available"] != false || !strings.Contains(fmt.Sprint(emoji["reason"]), "does not declare emoji tapbacks") {
		t.Errorf("emoji_reactions with the stock helper: %v", emoji)
	}
	r := td.call("POST", "/v1/reactions", key, map[string]any{"from": macLine, "to": alice, "message_id": msgs[0], "type": "emoji", "emoji": "🎉"})
	if r.Status != 400 || r.ErrCode() != "advanced_features_required" || !strings.Contains(string(r.Raw), "emoji tapbacks") {
		t.Errorf("emoji tapback through the stock helper: %d %s", r.Status, r.Raw)
	}

	// On macOS 26 the stock helper's threaded replies stall: a reply goes
	// out unthreaded, through AppleScript, and the line says so.
	threaded := caps()["threaded_replies"].(map[string]any)
	if threaded["available"] != false || !strings.Contains(fmt.Sprint(threaded["reason"]), "unthreaded") {
		t.Errorf("threaded_replies on macOS 26 with the stock helper: %v", threaded)
	}
	app.setHandler(func(n int, run osaRun) answer {
		return answer{then: func() { app.sendRow(dm, alice, "unthreaded answer") }}
	})
	obx := td.send(key, map[string]any{"from": macLine, "to": alice, "text": "unthreaded answer", "reply_to": msgs[0]})
	if item := td.waitOutbox(key, obx["id"].(string)); item["status"] != "sent" {
		t.Fatalf("reply: %v", item)
	}
	app.checkRuns(t, "text→chat")

	// Inbound typing names the chat the helper's way: it still reaches
	// Carol's chat.
	fmt.Fprintf(helper.conn, `{"event":"started-typing","guid":%q}`+"\r\n", "any;-;"+carol)
	testkit.Eventually(t, 10*time.Second, func() bool {
		got := td.call("GET", "/v1/typing?from="+macLine+"&to="+carol, key, nil).Data()
		return len(got) == 1 && got[0]["handle"] == carol
	})
	select {
	case f := <-helper.frames:
		t.Fatalf("an extra frame: %v", f)
	default:
	}
}

// A helper that declares threaded replies on macOS 26 gets them, and one
// that declares emoji tapbacks gets those.
func TestMessagesHelperThatDeclaresMore(t *testing.T) {
	const alice = "+15551230001"
	app := newMessagesApp(t, func(int, osaRun) answer { return accepted })
	dm := app.db.DirectChat("imessage", alice)
	helperPort := freeTCPPort(t)
	td := startTestDaemon(t, app.config(helperPort)+`macos_version = "26.1"`+"\n"+fastSends)
	key := td.key()
	_, first := app.db.Insert(chatdbtest.Msg{Chat: dm, From: alice, Text: "hi"})
	testkit.Eventually(t, 10*time.Second, func() bool { return len(td.messagesOf(key, alice)) == 1 })
	var replyGUID string
	helper := connectHelperDeclaring(t, helperPort, []string{"emoji-reactions", "threaded-replies"}, func(f map[string]any) string {
		if f["action"] == "send-message" {
			_, replyGUID = app.db.Insert(chatdbtest.Msg{Chat: dm, Text: "threaded", IsSent: true, ReplyTo: first})
			return fmt.Sprintf(`"identifier":%q`, replyGUID)
		}
		return ""
	})
	testkit.Eventually(t, 5*time.Second, func() bool {
		for _, l := range td.call("GET", "/v1/lines", key, nil).Data() {
			if l["handle"] == macLine {
				c := l["capabilities"].(map[string]any)
				return c["threaded_replies"].(map[string]any)["available"] == true && c["emoji_reactions"].(map[string]any)["available"] == true
			}
		}
		return false
	})
	obx := td.send(key, map[string]any{"from": macLine, "to": alice, "text": "threaded", "reply_to": first})
	if item := td.waitOutbox(key, obx["id"].(string)); item["status"] != "sent" {
		t.Fatalf("reply: %v", item)
	}
	if f := helper.next(t); f["action"] != "send-message" || f["data"].(map[string]any)["selectedMessageGuid"] != first {
		t.Fatalf("frame %v, want a threaded send-message", f)
	}
	r := td.call("POST", "/v1/reactions", key, map[string]any{"from": macLine, "to": alice, "message_id": first, "type": "emoji", "emoji": "🎉"})
	if r.Status != 201 {
		t.Fatalf("emoji tapback: %d %s", r.Status, r.Raw)
	}
	td.waitOutbox(key, r.Body["id"].(string))
	if f := helper.next(t); f["action"] != "send-reaction" || f["data"].(map[string]any)["reactionType"] != "emoji" {
		t.Fatalf("frame %v, want an emoji send-reaction", f)
	}
	// The reference CLI's `react MSG 👍🏽` sends the emoji as the type: the
	// same emoji tapback reaches the helper.
	r = td.call("POST", "/v1/reactions", key, map[string]any{"from": macLine, "to": alice, "message_id": first, "type": "👍🏽"})
	if r.Status != 201 {
		t.Fatalf("emoji as the type: %d %s", r.Status, r.Raw)
	}
	td.waitOutbox(key, r.Body["id"].(string))
	if f := helper.next(t); f["action"] != "send-reaction" || f["data"].(map[string]any)["reactionType"] != "emoji" || f["data"].(map[string]any)["emoji"] != "👍🏽" {
		t.Fatalf("frame %v, want an emoji send-reaction of 👍🏽", f)
	}
	app.checkRuns(t)
}

// RCS is its own service, and an RCS conversation beside an old SMS chat
// with the same number is answered where the contact last wrote: in RCS.
func TestMessagesRCSConversation(t *testing.T) {
	const rita = "+15551230009"
	app := newMessagesApp(t, func(int, osaRun) answer { return accepted })
	rcs := app.db.ChatWithGUID("RCS;-;"+rita, "RCS", rita)
	sms := app.db.DirectChat("sms", rita)
	// The history: Rita wrote over RCS yesterday; the SMS chat's message is
	// older but written later, so it is the chat the API finds for her.
	app.db.Insert(chatdbtest.Msg{Chat: rcs, From: rita, Text: "over RCS", Date: time.Now().Add(-24 * time.Hour)})
	app.db.Insert(chatdbtest.Msg{Chat: sms, From: rita, Text: "over SMS, long ago", Date: time.Now().Add(-30 * 24 * time.Hour)})
	td := startTestDaemon(t, app.config(freeTCPPort(t))+fastSends)
	key := td.key()
	testkit.Eventually(t, 10*time.Second, func() bool { return len(td.messagesOf(key, rita)) > 0 })
	services := map[string]bool{}
	smsChatID := ""
	for _, c := range td.listAll(key, "/v1/chats?from="+macLine+"&limit=100") {
		services[fmt.Sprint(c["service"])] = true
		if c["service"] == "sms" {
			smsChatID, _ = c["id"].(string)
		}
	}
	if !services["rcs"] || !services["sms"] {
		t.Errorf("chats' services %v, want an rcs and an sms chat", services)
	}

	var sent string
	app.setHandler(func(n int, run osaRun) answer {
		return answer{then: func() {
			_, sent = app.db.Insert(chatdbtest.Msg{Chat: rcs, Text: "answered in RCS", HandleOf: rita})
			app.db.MarkSent(sent)
		}}
	})
	obx := td.send(key, map[string]any{"from": macLine, "to": rita, "text": "answered in RCS"})
	item := td.waitOutbox(key, obx["id"].(string))
	if item["status"] != "sent" || item["service"] != "rcs" || item["chat_guid"] != "RCS;-;"+rita {
		t.Fatalf("item %v", item)
	}
	if item["chat_id"] != smsChatID {
		t.Errorf("the API took the send for chat %v, want the SMS chat %s (the one the API finds for her)", item["chat_id"], smsChatID)
	}
	app.checkRuns(t, "text→chat")
	if got := app.arg(0, 1); got != "RCS;-;"+rita {
		t.Errorf("sent to %q, want the RCS chat", got)
	}
	if m := td.messageByGUID(key, rita, sent); m["service"] != "rcs" {
		t.Errorf("message %v", m)
	}
}

// Messages may send from another alias than the line's handle (an e-mail
// address chosen under "Start new conversations from"): the line's health
// says so, and the log once.
func TestMessagesSendingAlias(t *testing.T) {
	const alice = "+15551230001"
	m := newLivedInMac(t, "", nil)
	dm := m.db.DirectChat("imessage", alice)
	m.live(dm, alice, "hi there")
	for _, text := range []string{"from the e-mail alias", "again"} {
		_, g := m.db.Insert(chatdbtest.Msg{Chat: dm, Text: text, IsSent: true, CallerID: "owner@icloud.example"})
		m.ev.next("message.sent", guidIs(g))
	}
	h := m.health()
	if h["sending_alias"] != "owner@icloud.example" || !strings.Contains(h["summary"].(string), "another alias") {
		t.Errorf("health %v", h)
	}
	if ready := m.td.call("GET", "/readyz", "", nil); strings.Contains(string(ready.Raw), "owner@icloud.example") {
		t.Errorf("the public /readyz names the alias: %s", ready.Raw)
	}
	if n := strings.Count(m.logs.String(), "another address than the line's handle"); n != 1 {
		t.Errorf("%d log lines about the alias, want 1", n)
	}
	// Back to the line's own handle.
	_, g := m.db.Insert(chatdbtest.Msg{Chat: dm, Text: "from the number", IsSent: true, CallerID: macLine})
	m.ev.next("message.sent", guidIs(g))
	if h := m.health(); h["sending_alias"] != nil {
		t.Errorf("health %v", h)
	}
}
