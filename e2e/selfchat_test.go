package e2e

import (
	"slices"
	"strings"
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
// delivered after, shows that nothing more was coming. The agent's
// allow-list names another contact: the owner is none, and passes.
func TestSelfChat(t *testing.T) {
	rc := newReceiver(t, nil)
	td := startTestDaemon(t, webhookConfig(t, rc, ""))
	agent := td.key("--label", "assistant", "--agent", "--allow-from", alice)
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

// promptOf waits for the approval prompt of the draft whose text is
// draft in the owner's chat with themselves (under self), and returns it.
func (td *testDaemon) promptOf(key, line, self, draft string) map[string]any {
	td.t.Helper()
	var prompt map[string]any
	testkit.Eventually(td.t, 10*time.Second, func() bool {
		for _, m := range td.call("GET", "/v1/messages?from="+line+"&to="+self+"&limit=100", key, nil).Data() {
			if text, _ := m["text"].(string); m["outbox_id"] != nil && strings.Contains(text, draft) {
				prompt = m
				return true
			}
		}
		return false
	})
	return prompt
}

// Drafts answered in the owner's own Messages, on the simulated network:
// each waiting draft is written into the owner's chat with themselves; a
// 👍 on it sends the draft, a 👎 declines it, and an inline reply sends
// the owner's words instead.
func TestApprovalInSelfChat(t *testing.T) {
	td := startTestDaemon(t, "")
	agent := td.key("--label", "drafter", "--agent", "--approval", "required")
	td.simJSON("owner-send", "--line", mainLine, "--to", "self", "--text", "notes")
	chatID := td.inbound(mainLine, alice, "is it open on Sunday?")["chat_id"].(string)
	draft := func(text string) (id string, prompt map[string]any) {
		t.Helper()
		r := td.call("POST", "/v1/messages", agent, map[string]any{"from": mainLine, "to": alice, "text": text})
		if r.Status != 201 || r.Body["approval"] != "waiting" {
			t.Fatalf("agent send %q: %d %s", text, r.Status, r.Raw)
		}
		return r.Body["id"].(string), td.promptOf(agent, mainLine, mainLine, text)
	}

	liked, prompt := draft("Yes, 10 to 4.")
	// The agent's own 👍 on the prompt, through the API, answers nothing.
	td.postSent(agent, "/v1/reactions", map[string]any{"from": mainLine, "to": mainLine, "message_id": prompt["id"], "type": "like"})
	if item := td.call("GET", "/v1/outbox?id="+liked, agent, nil).Body; item["approval"] != "waiting" {
		t.Fatalf("the agent's own tapback answered its draft: %v", item)
	}
	td.simJSON("reaction", "--line", mainLine, "--from", "self", "--message", prompt["id"].(string), "--type", "like")
	if item := td.waitOutbox(agent, liked); item["status"] != "sent" || item["approval"] != "approved" || item["approval_by"] != "self_chat" {
		t.Fatalf("the draft liked in the owner's chat: %v", item)
	}
	disliked, prompt := draft("No idea.")
	td.simJSON("reaction", "--line", mainLine, "--from", "self", "--message", prompt["id"].(string), "--type", "dislike")
	if item := td.waitOutbox(agent, disliked); item["status"] != "failed" || item["error"] != "declined" || item["approval_by"] != "self_chat" {
		t.Fatalf("the draft disliked in the owner's chat: %v", item)
	}
	replaced, prompt := draft("Maybe.")
	td.simJSON("owner-send", "--line", mainLine, "--to", "self", "--reply-to", prompt["id"].(string), "--text", "Yes, from 10 to 4 on Sundays.")
	if item := td.waitOutbox(agent, replaced); item["status"] != "sent" || item["approval_by"] != "self_chat" {
		t.Fatalf("the draft answered by a reply: %v", item)
	}
	var texts []string
	for _, m := range td.call("GET", "/v1/messages?from="+mainLine+"&to="+chatID, agent, nil).Data() {
		texts = append(texts, m["text"].(string))
	}
	if want := []string{"Yes, from 10 to 4 on Sundays.", "Yes, 10 to 4.", "is it open on Sunday?"}; !slices.Equal(texts, want) {
		t.Fatalf("the contact's chat holds %q, want %q", texts, want)
	}
}

// Drafts answered in the owner's own Messages on a Messages line (macOS
// 26 fixture, stand-in osascript): the prompt goes out through Messages;
// the owner's 👍 row (associated_message_type 2001) on it sends the draft,
// a 👎 (2002) on the prompt's received copy declines another, and an
// inline reply (thread_originator_guid) sends the owner's words.
func TestMessagesApprovalInSelfChat(t *testing.T) {
	mac := newFakeMac(t)
	const alice = "+15551230001"
	self, dm := mac.db.DirectChat("imessage", macLine), mac.db.DirectChat("imessage", alice)
	td := startTestDaemon(t, mac.config(freeTCPPort(t)))
	agent := td.key("--label", "mac-drafter", "--agent", "--approval", "required")
	mac.db.Insert(chatdbtest.Msg{Chat: self, Text: "notes", IsSent: true})
	mac.db.Insert(chatdbtest.Msg{Chat: dm, From: alice, Text: "is it open on Sunday?"})
	testkit.Eventually(t, 10*time.Second, func() bool {
		return len(td.messagesOf(agent, alice)) == 1 && len(td.messagesOf(agent, macLine)) == 1
	})
	// draft makes a draft, and has Messages send its prompt (with the
	// received copy Messages writes of it): it returns the draft's ID and
	// the GUIDs of the prompt's rows.
	draft := func(text string) (id, prompt, copied string) {
		t.Helper()
		r := td.call("POST", "/v1/messages", agent, map[string]any{"from": macLine, "to": alice, "text": text})
		if r.Status != 201 || r.Body["approval"] != "waiting" {
			t.Fatalf("agent send %q: %d %s", text, r.Status, r.Raw)
		}
		run := mac.nextRun()
		if len(run.args) < 3 || !strings.Contains(run.args[2], text) {
			t.Fatalf("the prompt's run: %q", run.args)
		}
		_, prompt = mac.db.Insert(chatdbtest.Msg{Chat: self, Text: run.args[2]})
		mac.db.MarkSent(prompt)
		_, copied = mac.db.Insert(chatdbtest.Msg{Chat: self, From: macLine, Text: run.args[2], Follows: prompt})
		td.promptOf(agent, macLine, macLine, text)
		return r.Body["id"].(string), prompt, copied
	}
	// sent has Messages send the approved draft, in words.
	sent := func(id, words string) {
		t.Helper()
		if run := mac.nextRun(); len(run.args) < 3 || run.args[2] != words {
			t.Fatalf("the draft's run: %q, want %q", run.args, words)
		}
		_, guid := mac.db.Insert(chatdbtest.Msg{Chat: dm, Text: words})
		mac.db.MarkSent(guid)
		if item := td.waitOutbox(agent, id); item["status"] != "sent" || item["approval_by"] != "self_chat" {
			t.Fatalf("the draft approved in Messages: %v", item)
		}
	}

	liked, prompt, _ := draft("Yes, 10 to 4.")
	mac.db.Insert(chatdbtest.Msg{Chat: self, ReactionTo: prompt, ReactionType: 2001, IsSent: true})
	sent(liked, "Yes, 10 to 4.")

	disliked, _, copied := draft("No idea.")
	mac.db.Insert(chatdbtest.Msg{Chat: self, ReactionTo: copied, ReactionType: 2002, IsSent: true})
	if item := td.waitOutbox(agent, disliked); item["status"] != "failed" || item["error"] != "declined" {
		t.Fatalf("the draft disliked in Messages: %v", item)
	}

	replaced, prompt, _ := draft("Maybe.")
	mac.db.Insert(chatdbtest.Msg{Chat: self, Text: "Yes, from 10 to 4 on Sundays.", ReplyTo: prompt, IsSent: true})
	sent(replaced, "Yes, from 10 to 4 on Sundays.")
}
