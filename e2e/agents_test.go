package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/blueline-app/blueline/bridge/messages/chatdb/chatdbtest"
	"github.com/blueline-app/blueline/client"
	"github.com/blueline-app/blueline/testkit"
)

// An agent on a line, on the whole daemon: an agent key (keys create
// --agent, in keys list), the owner writing from their own phone (sim
// owner-send) holds it back from the chat while another key is not, the
// console's Resume agents button lets it write again, and a lease taken
// with the Go client keeps a second agent out.
func TestAgentTakeoverAndLease(t *testing.T) {
	rc := newReceiver(t, nil)
	td := startTestDaemon(t, webhookConfig(t, rc, ""))
	agent := td.key("--label", "support-bot", "--agent")
	other := td.key("--label", "sales-bot", "--agent")
	human := td.key("--label", "operator")
	var keys []struct {
		Label string
		Agent bool
	}
	if err := json.Unmarshal([]byte(td.mustCLI("keys", "list", "--json")), &keys); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if k.Agent != (k.Label != "operator") {
			t.Errorf("keys list: %s has agent %v", k.Label, k.Agent)
		}
	}

	td.register(human, mainLine, rc, "chat.handoff", "chat.leased", "chat.released")
	ev := newEventLog(t, rc)
	chatID := td.inbound(mainLine, alice, "is my order shipped?")["chat_id"].(string)
	inChat := func(more func(d map[string]any) bool) func(d map[string]any) bool {
		return func(d map[string]any) bool { return d["chat_id"] == chatID && d["line_handle"] == mainLine && more(d) }
	}
	msg := map[string]any{"from": mainLine, "to": alice, "text": "Let me check."}
	if r := td.call("POST", "/v1/messages", agent, msg); r.Status != 201 {
		t.Fatalf("agent send before the owner wrote: %d %s", r.Status, r.Raw)
	}
	var owner map[string]any
	if err := json.Unmarshal([]byte(td.mustCLI("sim", "owner-send", "--line", mainLine, "--to", alice, "--text", "I'll take this one")), &owner); err != nil {
		t.Fatal(err)
	}
	if owner["is_from_me"] != true || owner["chat_id"] != chatID || owner["outbox_id"] != nil {
		t.Fatalf("sim owner-send printed %v", owner)
	}
	if r := td.call("POST", "/v1/messages", agent, msg); r.Status != 409 || r.ErrCode() != "human_active" {
		t.Fatalf("agent send after the owner wrote: %d %s", r.Status, r.Raw)
	}
	ev.next("chat.handoff", inChat(func(d map[string]any) bool { return d["state"] == "human_active" && d["until"] != nil }))
	if r := td.call("POST", "/v1/messages", human, msg); r.Status != 201 {
		t.Fatalf("a key that is not an agent's: %d %s", r.Status, r.Raw)
	}

	// The owner resumes the agents in the console.
	b := newBrowser(t)
	b.signIn(td)
	b.do("open the conversation", chromedp.Navigate(td.base+"/dashboard/chats/"+chatID), chromedp.WaitVisible(chromedp.CSS("#human-active")))
	if got := b.text("the takeover notice", "#human-active p"); !strings.Contains(got, "agent keys may not write to it until") {
		t.Errorf("the takeover notice says %q", got)
	}
	b.do("resume the agents", chromedp.Click(chromedp.CSS("#human-active button")), chromedp.WaitVisible(chromedp.CSS(`p.notice[role=status]`)))
	if got := b.text("the notice", `p.notice[role=status]`); !strings.Contains(got, "Agents resumed") {
		t.Errorf("after Resume agents the page says %q", got)
	}
	b.waitFor("the takeover notice is gone", `document.querySelector("#human-active") === null`)
	ev.next("chat.handoff", inChat(func(d map[string]any) bool { return d["state"] == "agent_resumed" && d["until"] == nil }))
	if r := td.call("POST", "/v1/messages", agent, msg); r.Status != 201 {
		t.Fatalf("agent send after the console resumed the agents: %d %s", r.Status, r.Raw)
	}

	// A lease through the Go client keeps the other agent out until released.
	ctx := context.Background()
	c := client.New(td.base, client.WithAPIKey(agent))
	l, err := c.Chats.Lease(ctx, client.LeaseParams{From: mainLine, To: chatID, TTLSeconds: 600, Label: "order question"})
	if err != nil || l.KeyLabel != "support-bot" || l.Status != "active" {
		t.Fatalf("lease: %+v, %v", l, err)
	}
	ev.next("chat.leased", inChat(func(d map[string]any) bool { return d["key_label"] == "support-bot" && d["label"] == "order question" }))
	r := td.call("POST", "/v1/messages", other, msg)
	if r.Status != 409 || r.ErrCode() != "chat_leased" || !strings.Contains(string(r.Raw), "support-bot") {
		t.Fatalf("the other agent's send to the leased chat: %d %s", r.Status, r.Raw)
	}
	_, err = client.New(td.base, client.WithAPIKey(other)).Chats.Release(ctx, mainLine, chatID)
	if !errors.Is(err, client.ErrInvalidRequest) || !strings.Contains(err.Error(), "chat_leased") {
		t.Fatalf("the other agent's release: %v", err)
	}
	if l, err := c.Chats.Release(ctx, mainLine, chatID); err != nil || l.Status != "released" {
		t.Fatalf("release: %+v, %v", l, err)
	}
	ev.next("chat.released", inChat(func(d map[string]any) bool { return d["key_label"] == "support-bot" && d["released"] == "released" }))
	if r := td.call("POST", "/v1/messages", other, msg); r.Status != 201 {
		t.Fatalf("the other agent's send after the release: %d %s", r.Status, r.Raw)
	}
}

// On a Messages line: the owner's row sent from their iPhone (no outbox
// item) takes the chat over; the rows of Blueline's own sends do not.
func TestMessagesOwnerTakeover(t *testing.T) {
	mac := newFakeMac(t)
	const alice = "+15551230001"
	dm := mac.db.DirectChat("imessage", alice)
	td := startTestDaemon(t, mac.config(freeTCPPort(t)))
	agent := td.key("--label", "mac-agent", "--agent")
	mac.db.Insert(chatdbtest.Msg{Chat: dm, From: alice, Text: "hello"})
	testkit.Eventually(t, 10*time.Second, func() bool { return len(td.messagesOf(agent, alice)) == 1 })

	// The agent's own send, matched to its outbox item, takes nothing over.
	for _, text := range []string{"first answer", "second answer"} {
		td.sendOnMac(mac, agent, dm, alice, text, nil)
	}

	// The owner answers from their iPhone: the agent is held back.
	_, mine := mac.db.Insert(chatdbtest.Msg{Chat: dm, Text: "I'll handle this"})
	mac.db.MarkSent(mine)
	testkit.Eventually(t, 10*time.Second, func() bool { return len(td.messagesOf(agent, alice)) == 4 })
	r := td.call("POST", "/v1/messages", agent, map[string]any{"from": macLine, "to": alice, "text": "third answer"})
	if r.Status != 409 || r.ErrCode() != "human_active" {
		t.Fatalf("agent send after the owner's iPhone answered: %d %s", r.Status, r.Raw)
	}
}
