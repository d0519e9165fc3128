package e2e

import (
	"slices"
	"testing"

	"github.com/blueline-app/blueline/apitest"
	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/daemontest"
)

// fleetTestDaemons are the e2e suite's test daemons over the nodes of a
// fleet started in process (daemontest.Fleet).
func fleetTestDaemons(t *testing.T, nodes []*daemontest.Daemon) []*testDaemon {
	out := make([]*testDaemon, len(nodes))
	for i, n := range nodes {
		out[i] = &testDaemon{t: t, cfgPath: n.ConfigPath(), dataDir: n.DataDir(), d: n.Daemon(), base: n.URL()}
	}
	return out
}

// An app built on the reference SDK, pointed at node B of a fleet, uses
// the line on node C: every answer B gives parses as the SDK parses it,
// sends (a reply, an audio message of a file uploaded through B, a
// reaction, typing, a receipt) are sent by C, and reads and errors are the
// API's.
func TestFleetSDKThroughAnotherNode(t *testing.T) {
	nodes := fleetTestDaemons(t, daemontest.Fleet(t, 3, ""))
	b, c := nodes[1], nodes[2]
	line := daemontest.FleetLine(2)
	key := b.key("--owner", "dev")
	in := c.inbound(line, alice, "hello")
	msgID, guid := in["id"].(string), in["guid"].(string)

	obx := b.call("POST", "/v1/messages", key, map[string]any{"from": line, "to": alice, "text": "reply", "reply_to": msgID})
	if obx.Status != 201 {
		t.Fatalf("send through B: %d %s", obx.Status, obx.Raw)
	}
	assertConforms(t, "POST /v1/messages", obx, sdkOutboxItem)
	if item := b.waitOutbox(key, obx.Body["id"].(string)); item["status"] != "sent" {
		t.Fatalf("the reply: %v", item)
	}
	assertConforms(t, "GET /v1/outbox", b.call("GET", "/v1/outbox?id="+obx.Body["id"].(string), key, nil), sdkOutboxItem)
	lines := b.call("GET", "/v1/lines", key, nil)
	assertConforms(t, "GET /v1/lines", lines, sdkList(sdkLine))
	if len(lines.Data()) != 4 { // three nodes' lines, and the sandbox on A
		t.Errorf("GET /v1/lines through B: %s", lines.Raw)
	}
	assertConforms(t, "GET /v1/chats", b.call("GET", "/v1/chats?from="+line, key, nil), sdkList(sdkChat))
	msgs := b.call("GET", "/v1/messages?from="+line+"&to="+alice, key, nil)
	assertConforms(t, "GET /v1/messages", msgs, sdkList(sdkMessage))
	if len(msgs.Data()) != 2 {
		t.Errorf("C's history through B: %s", msgs.Raw)
	}
	assertConforms(t, "GET /v1/messages (paged)", b.call("GET", "/v1/messages?from="+line+"&to="+alice+"&limit=1", key, nil), sdkList(sdkMessage))

	up := b.call("POST", "/v1/files", key, string(fakeM4A), "Content-Type", "audio/mp4", "X-Filename", "memo.m4a")
	if up.Status != 201 {
		t.Fatalf("upload through B: %d %s", up.Status, up.Raw)
	}
	assertConforms(t, "POST /v1/files", up, sdkFile)
	for _, w := range []struct {
		path string
		body map[string]any
	}{
		{"/v1/audio-messages", map[string]any{"audio_message": up.Body["id"]}},
		{"/v1/reactions", map[string]any{"message_id": msgID, "type": "love"}},
		{"/v1/typing", map[string]any{"state": "on"}},
		{"/v1/receipts", map[string]any{}},
	} {
		r := b.call("POST", w.path, key, apitest.WithFields(w.body, "from", line, "to", alice))
		if r.Status != 201 {
			t.Fatalf("POST %s through B: %d %s", w.path, r.Status, r.Raw)
		}
		assertConforms(t, "POST "+w.path, r, sdkOutboxItem)
		if item := b.waitOutbox(key, r.Body["id"].(string)); item["status"] != "sent" {
			t.Errorf("POST %s: %v", w.path, item)
		}
	}
	for _, path := range []string{"/v1/reactions?message_id=" + msgID, "/v1/reactions?message_id=" + guid} {
		assertConforms(t, "GET "+path, b.call("GET", path, key, nil), sdkList(sdkReaction))
	}
	assertConforms(t, "GET /v1/typing", b.call("GET", "/v1/typing?from="+line+"&to="+alice, key, nil), sdkList(sdkTypingIndicator))
	assertConforms(t, "GET /v1/receipts", b.call("GET", "/v1/receipts?from="+line+"&to="+alice, key, nil), sdkList(sdkReadReceipt))
	sent := b.call("GET", "/v1/messages?from="+line+"&to="+alice, key, nil)
	audio := 0
	for _, m := range sent.Data() {
		if atts, _ := m["attachments"].([]any); len(atts) == 1 {
			audio++
		}
	}
	if audio != 1 {
		t.Errorf("the audio message C sent, read through B: %s", sent.Raw)
	}
	for _, r := range []response{
		b.call("GET", "/v1/chats", key, nil),
		b.call("POST", "/v1/messages", key, "{"),
		b.call("GET", "/v1/messages?chat_id=cht_nothing", key, nil),
		b.call("POST", "/v1/messages", key, map[string]any{"from": line, "to": carol, "text": "not first"}),
	} {
		assertConforms(t, "error", r, sdkError)
	}
}

// In a fleet, a webhook with an empty from (the reference CLI's `webhooks
// create` without --line) covers the lines of the node that answers it.
func TestFleetWebhookForEveryLine(t *testing.T) {
	raw := daemontest.Fleet(t, 3, "")
	nodes := fleetTestDaemons(t, raw)
	key := daemontest.FleetKey(t, raw, api.KeyRequest{Label: "every line"})
	r := nodes[1].call("POST", "/v1/webhooks", key, map[string]any{"from": "", "url": "https://93.184.215.14/hook", "events": []string{"message.received"}})
	if r.Status != 201 {
		t.Fatalf("POST /v1/webhooks through B: %d %s", r.Status, r.Raw)
	}
	var want []any
	for _, l := range nodes[1].call("GET", "/v1/lines", key, nil).Data() {
		if l["handle"] == daemontest.FleetLine(1) {
			want = append(want, l["id"])
		}
	}
	if got := r.Body["line_ids"].([]any); len(want) != 1 || !slices.Equal(got, want) {
		t.Errorf("line_ids %v, want B's line %v", got, want)
	}
}
