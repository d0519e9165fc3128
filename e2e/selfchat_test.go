package e2e

import (
	"testing"
	"time"

	"github.com/blueline-app/blueline/bridge/messages/chatdb/chatdbtest"
	"github.com/blueline-app/blueline/testkit"
)

// selfEvents counts the message.self deliveries of text the receiver had.
func selfEvents(rc *receiver, text string) int {
	n := 0
	for _, r := range rc.Requests() {
		if r.Event() == "message.self" && r.Data()["text"] == text {
			n++
		}
	}
	return n
}

// sendOnMac sends text from the Mac's line to `to` with key, writes the
// sent row in chat as Messages does, then what more calls for (written,
// given the row's GUID), and returns the outbox item's ID once it is sent.
func (td *testDaemon) sendOnMac(mac *fakeMac, key string, chat chatdbtest.ChatRef, to, text string, written func(guid string)) string {
	td.t.Helper()
	r := td.call("POST", "/v1/messages", key, map[string]any{"from": macLine, "to": to, "text": text})
	if r.Status != 201 {
		td.t.Fatalf("send %q to %s: %d %s", text, to, r.Status, r.Raw)
	}
	mac.nextRun()
	_, guid := mac.db.Insert(chatdbtest.Msg{Chat: chat, Text: text})
	mac.db.MarkSent(guid)
	if written != nil {
		written(guid)
	}
	id := r.Body["id"].(string)
	if item := td.waitOutbox(key, id); item["status"] != "sent" {
		td.t.Fatalf("send %q to %s: %v", text, to, item)
	}
	return id
}

// The owner's chat with themselves on the simulated network: the owner's
// message (written twice, as Messages does) is one message.self and
// nothing else; an agent's send of the same text into the chat is
// message.sent and never message.self. A last message of the owner's,
// delivered after, shows that nothing more was coming.
func TestSelfChat(t *testing.T) {
	rc := newReceiver(t, nil)
	td := startTestDaemon(t, webhookConfig(t, rc, ""))
	agent := td.key("--label", "assistant", "--agent")
	td.register(agent, mainLine, rc, "message.received", "message.sent", "message.self")
	ev := newEventLog(t, rc)

	owner := td.simJSON("owner-send", "--line", mainLine, "--to", "self", "--text", "what is on today?")
	d := ev.next("message.self", func(d map[string]any) bool { return d["text"] == "what is on today?" })
	if d["id"] != owner["id"] || d["is_from_me"] != true || d["line_handle"] != mainLine {
		t.Fatalf("message.self: %v (sim printed %v)", d, owner)
	}
	r := td.call("POST", "/v1/messages", agent, map[string]any{"from": mainLine, "to": mainLine, "text": "what is on today?"})
	if r.Status != 201 {
		t.Fatalf("the agent's send into the owner's own chat: %d %s", r.Status, r.Raw)
	}
	ev.next("message.sent", func(d map[string]any) bool { return d["outbox_id"] == r.Body["id"] })
	td.simJSON("owner-send", "--line", mainLine, "--to", "self", "--text", "thanks")
	ev.next("message.self", func(d map[string]any) bool { return d["text"] == "thanks" })
	if n := selfEvents(rc, "what is on today?"); n != 1 {
		t.Errorf("%d message.self events for the text the owner and the agent both wrote, want 1", n)
	}
	for _, r := range rc.Requests() {
		if r.Event() == "message.received" || r.Event() == "message.sent" && r.Data()["outbox_id"] == nil {
			t.Errorf("the owner's own chat made %s: %v", r.Event(), r.Data())
		}
	}
}

// On a Messages line (macOS 26 fixture, stand-in osascript), under the
// phone number and the e-mail address of the Apple ID: the owner's message
// to themselves (a sent row, and its received copy naming it by
// reply_to_guid) is one message.self; the agent's send of the same text
// (its sent row, matched to the outbox item, and the copy Messages writes
// of it) is message.sent alone.
func TestMessagesSelfChat(t *testing.T) {
	mac := newFakeMac(t)
	const mail = "owner@example.com"
	rc := newReceiver(t, nil)
	td := startTestDaemon(t, webhookConfig(t, rc, mac.config(freeTCPPort(t))+"self_handles = [\""+macLine+"\", \""+mail+"\"]\n"))
	agent := td.key("--label", "mac-assistant", "--agent")
	td.register(agent, macLine, rc, "message.received", "message.sent", "message.self")
	ev := newEventLog(t, rc)

	for _, self := range []string{macLine, mail} {
		chat := mac.db.DirectChat("imessage", self)
		text := "remind me at 5 (" + self + ")"
		_, sent := mac.db.Insert(chatdbtest.Msg{Chat: chat, Text: text, IsSent: true})
		mac.db.Insert(chatdbtest.Msg{Chat: chat, From: self, Text: text, Follows: sent})
		ev.next("message.self", func(d map[string]any) bool { return d["text"] == text && d["is_from_me"] == true })

		id := td.sendOnMac(mac, agent, chat, self, text, func(own string) {
			mac.db.Insert(chatdbtest.Msg{Chat: chat, From: self, Text: text, Follows: own})
		})
		ev.next("message.sent", func(d map[string]any) bool { return d["outbox_id"] == id })
		// The copy is stored as the agent's message, not as news.
		testkit.Eventually(t, 10*time.Second, func() bool {
			m := td.call("GET", "/v1/messages?from="+macLine+"&to="+self+"&limit=10", agent, nil).Data()
			return len(m) == 2
		})

		// The owner writes again from their iPhone (a sent row alone).
		_, later := mac.db.Insert(chatdbtest.Msg{Chat: chat, Text: "done (" + self + ")", IsSent: true})
		ev.next("message.self", func(d map[string]any) bool { return d["guid"] == later })
		if n := selfEvents(rc, text); n != 1 {
			t.Errorf("%s: %d message.self events for the text the owner and the agent both wrote, want 1", self, n)
		}
	}
	for _, r := range rc.Requests() {
		if r.Event() == "message.received" {
			t.Errorf("the owner's own chat made message.received: %v", r.Data())
		}
	}
}
