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

// What wakes an agent, on the whole daemon: an agent key with sender
// gating (keys create --allow-from --group-mention) registers a webhook
// that receives only the live messages of the contacts it allows, each
// saying its arrival, filter and sender_verified, and its sends to another
// contact are refused.
func TestAgentSenderGating(t *testing.T) {
	rc := newReceiver(t, nil)
	td := startTestDaemon(t, webhookConfig(t, rc, ""))
	agent := td.key("--label", "family-bot", "--agent", "--allow-from", alice, "--group-mention", `(?i)@bot\b`)
	var keys []struct {
		Label        string
		AllowFrom    []string `json:"allow_from"`
		GroupMention string   `json:"group_mention"`
	}
	if err := json.Unmarshal([]byte(td.mustCLI("keys", "list", "--json")), &keys); err != nil {
		t.Fatal(err)
	}
	if len(keys) != 1 || len(keys[0].AllowFrom) != 1 || keys[0].AllowFrom[0] != alice || keys[0].GroupMention != `(?i)@bot\b` {
		t.Fatalf("keys list: %+v", keys)
	}
	if _, errOut, code := td.cli("keys", "create", "--label", "x", "--allow-from", alice); code == 0 || !strings.Contains(errOut, "agent") {
		t.Errorf("--allow-from without --agent: exit %d, %s", code, errOut)
	}

	hook := td.register(agent, mainLine, rc, "message.received")
	if hook["include_filtered"] != false || len(hook["arrival"].([]any)) != 1 {
		t.Errorf("an agent key's webhook: %v, want live messages of unfiltered chats", hook)
	}
	td.inbound(mainLine, bob, "from bob")
	td.inbound(mainLine, alice, "from alice")
	ev := newEventLog(t, rc)
	d := ev.next("message.received", func(d map[string]any) bool { return d["text"] == "from alice" })
	if d["arrival"] != "live" || d["filter"] != nil || d["sender_verified"] != true {
		t.Errorf("alice's message: arrival %v, filter %v, sender_verified %v", d["arrival"], d["filter"], d["sender_verified"])
	}
	if n := ev.counts()["message.received"]; n != 1 {
		t.Errorf("the gated agent's webhook received %d messages, want alice's only", n)
	}
	if r := td.call("POST", "/v1/messages", agent, map[string]any{"from": mainLine, "to": bob, "text": "hi"}); r.Status != 403 || r.ErrCode() != "contact_not_allowed" {
		t.Errorf("a gated agent's send to bob: %d %s", r.Status, r.Raw)
	}
	if r := td.call("POST", "/v1/messages", agent, map[string]any{"from": mainLine, "to": alice, "text": "hi"}); r.Status != 201 {
		t.Errorf("a gated agent's send to alice: %d %s", r.Status, r.Raw)
	}

	// The console creates gated agent keys too, and shows their gating.
	b := newBrowser(t)
	b.signIn(td)
	create := func(label, allowFrom, mention string) {
		b.do("create a gated key "+label,
			chromedp.Navigate(td.base+"/dashboard/keys"),
			chromedp.SetValue(chromedp.CSS("#create-key input[name=label]"), label),
			chromedp.Click(chromedp.CSS("#create-key input[name=agent]")),
			chromedp.SetValue(chromedp.CSS("#create-key input[name=allow_from]"), allowFrom),
			chromedp.SetValue(chromedp.CSS("#create-key input[name=group_mention]"), mention),
			chromedp.Submit(chromedp.CSS("#create-key")),
			chromedp.WaitVisible(chromedp.CSS("#new-key, .error")))
	}
	create("console-bot", bob+", "+carol, "(?i)@helper")
	if row := b.text("the keys table", "main table"); !strings.Contains(row, "from "+bob+", "+carol) || !strings.Contains(row, "groups: (?i)@helper") {
		t.Errorf("the keys page shows %q, want the new key's gating", row)
	}
	create("bad-bot", alice, "(unclosed")
	if got := b.text("the error", ".error"); !strings.Contains(got, "group_mention") {
		t.Errorf("a mention that is not a regexp: the page says %q", got)
	}
}
