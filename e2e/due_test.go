package e2e

import (
	"testing"
	"time"
)

// An agent key's message scheduled before the owner wrote from their own
// phone falls due while the owner has the chat: it ends failed
// human_active and never reaches the contact; a key that is not an
// agent's, scheduled for the same moment, is sent.
func TestScheduledAgentSendHeldBackByTakeover(t *testing.T) {
	td := startTestDaemon(t, "")
	agent := td.key("--label", "support-bot", "--agent")
	human := td.key("--label", "operator")
	td.inbound(mainLine, alice, "can someone call me?")
	// Far enough ahead for owner-send to have run before it falls due.
	sendAt := time.Now().Add(6 * time.Second).UnixMilli()
	held := td.send(agent, map[string]any{"from": mainLine, "to": alice, "text": "the agent, later", "send_at": sendAt})
	sent := td.send(human, map[string]any{"from": mainLine, "to": alice, "text": "the operator, later", "send_at": sendAt})
	td.mustCLI("sim", "owner-send", "--line", mainLine, "--to", alice, "--text", "I'll call you now")
	if time.Now().UnixMilli() >= sendAt {
		t.Fatal("owner-send returned after the scheduled messages fell due: the test proves nothing")
	}
	if item := td.waitOutbox(human, sent["id"].(string)); item["status"] != "sent" {
		t.Fatalf("the operator's scheduled message: %v", item)
	}
	item := td.waitOutbox(agent, held["id"].(string))
	if item["status"] != "failed" || item["error"] != "human_active" || item["attempts"] != float64(0) {
		t.Fatalf("the agent's scheduled message: %v; want failed human_active, never attempted", item)
	}
	for _, m := range td.call("GET", "/v1/messages?from="+mainLine+"&to="+alice, human, nil).Data() {
		if m["text"] == "the agent, later" {
			t.Fatalf("the agent's message reached the chat: %v", m)
		}
	}
}
