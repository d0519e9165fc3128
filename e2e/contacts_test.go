package e2e

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/blueline-app/blueline/testkit"
)

// optOutLine is a line that answers an opt-out.
const (
	optOutLine  = "+15550000009"
	optOutReply = "You will get no more messages from us. Text START to resume."
)

// On the simulated network: STOP opts a contact out (sends 403, the line's
// reply sent once, opt-in events to the webhook that asked for them) until
// START; a blocked contact's message is stored but reaches no webhook.
func TestOptOutAndBlockedContacts(t *testing.T) {
	rc := newReceiver(t, nil)
	td := startTestDaemon(t, webhookConfig(t, rc, "[[lines]]\nhandle = \""+optOutLine+"\"\nopt_out_reply = \""+optOutReply+"\"\n"))
	key := td.key()
	td.register(key, optOutLine, rc, "message.received", "message.sent", "contact.opted_out", "contact.opted_in")

	td.inbound(optOutLine, alice, "hello")
	td.waitOutbox(key, td.send(key, map[string]any{"from": optOutLine, "to": alice, "text": "hi"})["id"].(string))

	td.inbound(optOutLine, alice, "STOP")
	r := td.call("POST", "/v1/messages", key, map[string]any{"from": optOutLine, "to": alice, "text": "are you there?"})
	if r.Status != 403 || r.ErrCode() != "contact_opted_out" {
		t.Fatalf("send after STOP: %d %s", r.Status, r.Raw)
	}
	td.inbound(optOutLine, alice, " stop ") // opted out already: no reply, no event
	td.inbound(optOutLine, alice, "Start")
	td.waitOutbox(key, td.send(key, map[string]any{"from": optOutLine, "to": alice, "text": "welcome back"})["id"].(string))

	// A blocked contact writes, is unblocked and writes again: the webhook
	// gets the second message and nothing before it (a chat's events reach
	// a webhook in order).
	if r := td.call("POST", "/v1/contacts/blocked", key, map[string]any{"from": optOutLine, "handle": bob}); r.Status != 201 {
		t.Fatalf("block: %d %s", r.Status, r.Raw)
	}
	blocked := td.inbound(optOutLine, bob, "let me in")
	r = td.call("POST", "/v1/messages", key, map[string]any{"from": optOutLine, "to": bob, "text": "hi bob"})
	if r.Status != 403 || r.ErrCode() != "contact_blocked" {
		t.Errorf("send to a blocked contact: %d %s", r.Status, r.Raw)
	}
	if r := td.call("DELETE", "/v1/contacts/blocked/"+bob+"?from="+optOutLine, key, nil); r.Status != 200 {
		t.Fatalf("unblock: %d %s", r.Status, r.Raw)
	}
	td.inbound(optOutLine, bob, "unblocked now")

	var got []string
	testkit.Eventually(t, 10*time.Second, func() bool {
		got = got[:0]
		for _, h := range rc.Requests() {
			if h.Err != nil {
				t.Fatalf("delivery does not verify: %v", h.Err)
			}
			d := h.Data()
			what, _ := d["text"].(string)
			if strings.HasPrefix(h.Event(), "contact.") {
				what, _ = d["handle"].(string)
			}
			got = append(got, h.Event()+" "+what)
		}
		return slices.Contains(got, "message.received unblocked now")
	})
	count := func(s string) (n int) {
		for _, g := range got {
			if g == s {
				n++
			}
		}
		return n
	}
	for what, want := range map[string]int{
		"message.received hello": 1, "message.received STOP": 1, "message.received  stop ": 1, "message.received Start": 1,
		"contact.opted_out " + alice: 1, "contact.opted_in " + alice: 1, "message.sent " + optOutReply: 1,
		"message.sent welcome back": 1, "message.sent are you there?": 0, "message.received let me in": 0,
	} {
		if n := count(what); n != want {
			t.Errorf("%q delivered %d times, want %d; deliveries: %q", what, n, want, got)
		}
	}
	// The opt-out comes after the message that caused it, and the reply
	// after the opt-out.
	if i, j, k := slices.Index(got, "message.received STOP"), slices.Index(got, "contact.opted_out "+alice), slices.Index(got, "message.sent "+optOutReply); !(i < j && j < k) {
		t.Errorf("order of the opt-out's deliveries: %q", got)
	}

	// The blocked contact's message is stored.
	msgs := td.call("GET", "/v1/messages?from="+optOutLine+"&to="+bob, key, nil).Data()
	if len(msgs) != 2 || msgs[1]["id"] != blocked["id"] {
		t.Errorf("the blocked contact's messages: %v", msgs)
	}
}
